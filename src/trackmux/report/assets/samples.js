/* trackmux sample browser: one step of a samples key (trackmux.samples.read.step_payload),
   with a step slider, sort, filter, whole GRPO groups side by side, reward components,
   and the response's tokens coloured by a chosen per-token array (values on hover).
   Vanilla JS, no network. Used by the HTML report and by `trackmux ui`:

     window.trackmuxSamples.mount(element, payload, {steps: [..], load: async step => payload})

   `load` fetches another step's payload (the report decompresses an embedded one; the UI
   asks its server). Without it the slider is hidden. */
(function () {
  "use strict";
  var MAX_TOKENS = 4096;

  /* Column names, group ids and token array names are user data: they are keys of Maps
   * or of objects without a prototype, never of a plain {} ("__proto__", "constructor"
   * and "toString" are ordinary group ids). */
  function dict() { return Object.create(null); }
  function own(obj, key) { return obj !== null && obj !== undefined && Object.prototype.hasOwnProperty.call(obj, key); }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "cls") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(4);
    return String(v);
  }

  /* --- the filter: the same language as `trackmux samples --where` --------------- */
  function compileWhere(text, columns) {
    var re = /\s*(?:(-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(<=|>=|==|!=|<|>|\(|\))|`([^`]+)`|([A-Za-z_][A-Za-z0-9_.\/@-]*))/y;
    var toks = [], pos = 0, src = text.replace(/\s+$/, "");
    var KW = new Set(["and", "or", "not", "contains", "in", "true", "false", "null"]);
    while (pos < src.length) {
      re.lastIndex = pos;
      var m = re.exec(src);
      if (!m || re.lastIndex === pos) throw new Error("cannot read '" + src.slice(pos).trim().slice(0, 20) + "' at character " + (pos + 1));
      if (m[1] !== undefined) toks.push(["num", parseFloat(m[1])]);
      else if (m[2] !== undefined) toks.push(["str", m[2].slice(1, -1).replace(/\\(.)/g, "$1")]);
      else if (m[3] !== undefined) toks.push(["op", m[3]]);
      else if (m[4] !== undefined) toks.push(["name", m[4]]);
      else toks.push([KW.has(m[5]) ? "kw" : "name", m[5]]);
      pos = re.lastIndex;
    }
    if (!toks.length) throw new Error("the expression is empty");
    var i = 0;
    function peek() { return toks[i]; }
    function take() { if (i >= toks.length) throw new Error("the expression ends too early"); return toks[i++]; }
    function isWord(t, w) { return t && (t[0] === "kw" || t[0] === "op") && t[1] === w; }
    function value() {
      var t = take();
      if (t[0] === "num" || t[0] === "str") return function () { return t[1]; };
      if (t[0] === "kw" && (t[1] === "true" || t[1] === "false" || t[1] === "null")) {
        var c = t[1] === "true" ? true : t[1] === "false" ? false : null;
        return function () { return c; };
      }
      if (t[0] === "name") {
        if (columns.indexOf(t[1]) < 0) throw new Error("unknown column '" + t[1] + "'");
        return function (row) { return own(row, t[1]) ? row[t[1]] : null; };
      }
      if (isWord(t, "(")) {
        var inner = or();
        if (!isWord(peek(), ")")) throw new Error("missing ')'");
        take();
        return inner;
      }
      throw new Error("expected a value, got '" + t[1] + "'");
    }
    function cmp() {
      var left = value(), t = peek();
      var ops = ["<", "<=", ">", ">=", "==", "!=", "contains", "in"];
      if (t && (t[0] === "op" || t[0] === "kw") && ops.indexOf(t[1]) >= 0) {
        var op = take()[1], right = value();
        return function (row) { return compare(op, left(row), right(row)); };
      }
      return left;
    }
    function not() {
      if (isWord(peek(), "not")) { take(); var inner = not(); return function (r) { return !inner(r); }; }
      return cmp();
    }
    function and() {
      var parts = [not()];
      while (isWord(peek(), "and")) { take(); parts.push(not()); }
      return function (r) { return parts.every(function (p) { return p(r); }); };
    }
    function or() {
      var parts = [and()];
      while (isWord(peek(), "or")) { take(); parts.push(and()); }
      return function (r) { return parts.some(function (p) { return p(r); }); };
    }
    var expr = or();
    if (i !== toks.length) throw new Error("unexpected '" + toks[i][1] + "'");
    return function (row) { return !!expr(row); };
  }

  function compare(op, a, b) {
    if (op === "==") return a === b;
    if (op === "!=") return a !== b;
    if (op === "contains") return typeof a === "string" && typeof b === "string" && a.indexOf(b) >= 0;
    if (op === "in") return Array.isArray(b) ? b.indexOf(a) >= 0 : typeof a === "string" && typeof b === "string" && b.indexOf(a) >= 0;
    if (a === null || b === null || typeof a !== typeof b || (typeof a !== "number" && typeof a !== "string")) return false;
    return op === "<" ? a < b : op === "<=" ? a <= b : op === ">" ? a > b : a >= b;
  }

  /* --- colours ----------------------------------------------------------------- */
  function scale(values) {
    var lo = Infinity, hi = -Infinity;
    values.forEach(function (row) { (row || []).forEach(function (v) {
      if (typeof v === "number") { if (v < lo) lo = v; if (v > hi) hi = v; } }); });
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    if (hi === lo) hi = lo + 1;
    return function (v) {
      if (typeof v !== "number") return "transparent";
      var t = Math.max(0, Math.min(1, (v - lo) / (hi - lo)));
      /* low: red, high: green (a logprob near 0 is confident) */
      var r = Math.round(220 - 160 * t), g = Math.round(80 + 130 * t), b = 90;
      return "rgba(" + r + "," + g + "," + b + ",0.45)";
    };
  }

  /* --- the browser ------------------------------------------------------------- */
  function mount(root, payload, options) {
    options = options || {};
    var state = {payload: payload, sort: payload.reward || "sample", desc: true,
                 filter: "", array: null, stringArray: null, error: ""};
    root.classList.add("tms");
    root.innerHTML = "";
    var steps = options.steps || payload.steps || [payload.step];
    var bar = el("div", {cls: "tms-bar"});
    var slider = el("input", {type: "range", min: "0", max: String(steps.length - 1),
                              value: String(Math.max(0, steps.indexOf(payload.step))),
                              "aria-label": "step", cls: "tms-step"});
    var stepLabel = el("span", {cls: "tms-steplabel"});
    var sortSel = el("select", {"aria-label": "sort", cls: "tms-sort"});
    var dirBtn = el("button", {type: "button", cls: "tms-dir", text: "↓"});
    var filterIn = el("input", {type: "text", cls: "tms-filter", size: "34",
                                placeholder: "filter: reward < 0.2 and length > 100"});
    var arraySel = el("select", {"aria-label": "colour tokens by", cls: "tms-array"});
    var info = el("span", {cls: "tms-info"});
    if (options.load && steps.length > 1) bar.appendChild(el("label", {text: "step "}, [slider, stepLabel]));
    else bar.appendChild(stepLabel);
    bar.appendChild(el("label", {text: " sort "}, [sortSel, dirBtn]));
    bar.appendChild(el("label", {text: " "}, [filterIn]));
    bar.appendChild(el("label", {text: " tokens "}, [arraySel]));
    bar.appendChild(info);
    var body = el("div", {cls: "tms-body"});
    var conv = window.trackmuxConversation;  /* conversations: assets/conversation.js */
    var nav = conv ? conv.navigator(body) : null;
    if (nav) bar.appendChild(nav);
    root.appendChild(bar);
    root.appendChild(body);

    function rowsOf(p) {
      return p.rows.map(function (cells, i) {
        var row = dict();
        row.sample = i;
        p.columns.forEach(function (c, j) { row[c] = cells[j]; });
        return row;
      });
    }

    function setup() {
      var p = state.payload;
      stepLabel.textContent = "step " + p.step;
      if (nav) nav.hidden = !(p.trajectories || []).length;
      sortSel.innerHTML = "";
      ["sample"].concat(p.columns.filter(function (c) { return own(p.kinds, c) && p.kinds[c] === "number"; }))
        .forEach(function (c) { sortSel.appendChild(el("option", {value: c, text: c})); });
      if (["sample"].concat(p.columns).indexOf(state.sort) < 0) state.sort = "sample";
      sortSel.value = state.sort;
      arraySel.innerHTML = "";
      var tokens = p.tokens || dict();
      var names = Object.keys(tokens).filter(function (n) { return own(tokens, n); });
      state.stringArray = names.filter(function (n) { return tokens[n].dtype === "s"; })[0] || null;
      var numeric = names.filter(function (n) { return tokens[n].dtype !== "s"; });
      arraySel.appendChild(el("option", {value: "", text: "(none)"}));
      numeric.forEach(function (n) { arraySel.appendChild(el("option", {value: n, text: n})); });
      if (numeric.indexOf(state.array) < 0) state.array = numeric[0] || null;
      arraySel.value = state.array || "";
      draw();
    }

    function card(p, row, colour) {
      var i = row.sample;
      var head = el("div", {cls: "tms-head"}, [el("b", {text: "#" + i})]);
      if (p.reward) head.appendChild(el("span", {cls: "tms-reward", text: p.reward + " " + fmt(row[p.reward])}));
      ["advantage", "length"].forEach(function (c) {
        if (c in row) head.appendChild(el("span", {cls: "tms-meta", text: c + " " + fmt(row[c])}));
      });
      var comps = el("table", {cls: "tms-components"});
      p.components.forEach(function (c) {
        comps.appendChild(el("tr", {}, [el("td", {text: c}), el("td", {cls: "num", text: fmt(row[c])})]));
      });
      var rest = p.columns.filter(function (c) {
        return c !== p.reward && c !== p.group && c !== "prompt" && c !== "response" &&
          (p.trajectories || []).indexOf(c) < 0 &&
          p.components.indexOf(c) < 0 && c !== "advantage" && c !== "length";
      });
      var extra = el("div", {cls: "tms-extra"});
      rest.forEach(function (c) { extra.appendChild(el("span", {text: c + ": " + fmt(row[c])})); });
      var response = el("div", {cls: "tms-response"});
      var values = state.array ? p.tokens[state.array].values[i] : null;
      var strings = state.stringArray ? p.tokens[state.stringArray].values[i] : null;
      if (values && strings) {
        strings.slice(0, MAX_TOKENS).forEach(function (tok, k) {
          var v = values[k];
          response.appendChild(el("span", {cls: "tms-tok", style: "background:" + colour(v),
                                           title: JSON.stringify(tok) + " · " + state.array + " " + fmt(v), text: tok}));
        });
      } else {
        response.textContent = "response" in row ? fmt(row.response) : "";
        if (values) {
          var strip = el("div", {cls: "tms-strip"});
          values.slice(0, MAX_TOKENS).forEach(function (v, k) {
            strip.appendChild(el("i", {style: "background:" + colour(v),
                                       title: "token " + k + " · " + state.array + " " + fmt(v)}));
          });
          response = el("div", {}, [response, strip]);
        }
      }
      var talk = conv && (p.trajectories || []).length ? p.trajectories[0] : null;
      if (talk) response = conv.render(row[talk]);
      var node = el("div", {cls: talk ? "tms-card tm-card-conv" : "tms-card", "data-sample": String(i)}, [head]);
      if (p.components.length) node.appendChild(comps);
      if (rest.length) node.appendChild(extra);
      node.appendChild(response);
      return node;
    }

    function draw() {
      var p = state.payload;
      body.innerHTML = "";
      var rows = rowsOf(p), shown = rows;
      filterIn.classList.remove("tms-bad");
      filterIn.title = "";
      if (state.filter.trim()) {
        try {
          var pred = compileWhere(state.filter, ["sample"].concat(p.columns));
          shown = rows.filter(pred);
        } catch (e) {
          filterIn.classList.add("tms-bad");
          filterIn.title = e.message;
          body.appendChild(el("div", {cls: "tms-error", text: "filter: " + e.message}));
        }
      }
      var key = state.sort, sign = state.desc ? -1 : 1;
      shown = shown.slice().sort(function (a, b) {
        var x = a[key], y = b[key];
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return x < y ? -sign : x > y ? sign : a.sample - b.sample;
      });
      info.textContent = " " + shown.length + " of " + p.count + " samples" +
        (p.shown < p.count ? " (" + p.shown + " in this page)" : "");
      var colour = state.array ? scale(p.tokens[state.array].values) : null;
      if (p.group) {
        var byGroup = new Map();  // insertion order is the order groups first appear
        shown.forEach(function (row) {
          var g = String(row[p.group]);
          if (!byGroup.has(g)) byGroup.set(g, []);
          byGroup.get(g).push(row);
        });
        byGroup.forEach(function (members, g) {
          var rewards = members.map(function (r) { return r[p.reward]; });
          var same = p.reward && rewards.every(function (r) { return r === rewards[0]; });
          var first = members[0];
          var box = el("div", {cls: "tms-group", "data-group": g}, [
            el("div", {cls: "tms-ghead"}, [
              el("b", {text: p.group + " " + g}),
              el("span", {cls: "tms-meta", text: " " + members.length + " samples" + (same && members.length > 1 ? " · all rewards equal (no signal)" : "")})]),
            "prompt" in first ? el("div", {cls: "tms-prompt", text: fmt(first.prompt)}) : null,
            el("div", {cls: "tms-row"}, members.map(function (r) { return card(p, r, colour); }))]);
          body.appendChild(box);
        });
      } else {
        body.appendChild(el("div", {cls: "tms-row tms-wrap"}, shown.map(function (r) {
          var c = card(p, r, colour);
          if ("prompt" in r) c.insertBefore(el("div", {cls: "tms-prompt", text: fmt(r.prompt)}), c.children[1] || null);
          return c;
        })));
      }
    }

    slider.addEventListener("input", function () {
      var step = steps[Number(slider.value)];
      stepLabel.textContent = "step " + step + " …";
      Promise.resolve(options.load(step)).then(function (p) {
        if (steps[Number(slider.value)] !== step) return;
        state.payload = p;
        setup();
      }).catch(function (e) { stepLabel.textContent = "step " + step + ": " + e.message; });
    });
    sortSel.addEventListener("change", function () { state.sort = sortSel.value; draw(); });
    dirBtn.addEventListener("click", function () {
      state.desc = !state.desc; dirBtn.textContent = state.desc ? "↓" : "↑"; draw();
    });
    filterIn.addEventListener("input", function () { state.filter = filterIn.value; draw(); });
    arraySel.addEventListener("change", function () { state.array = arraySel.value || null; draw(); });
    setup();
    return {state: state, redraw: draw};
  }

  window.trackmuxSamples = {mount: mount, compileWhere: compileWhere};
})();
