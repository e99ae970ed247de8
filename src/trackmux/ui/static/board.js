// The goals board: per project, each goal judged on where runs are now (their latest
// value), the run nearest the target and its curve (a y-axis labelled with round values
// that cover the curve and the target, the target's value on its dashed line), and the
// findings of the project's
// live runs. Refreshes every 2 s. Text goes in through textContent only; the page runs
// under the UI's CSP.
(function () {
  "use strict";
  var token = new URLSearchParams(location.search).get("token");
  var back = document.getElementById("back");
  if (token) back.href = "/?token=" + encodeURIComponent(token);
  var SVG = "http://www.w3.org/2000/svg";

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function svg(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }
  function label(v) { return Number(v.toPrecision(3)).toString(); }
  // Round values for a y-axis that covers [lo, hi]: a step of 1, 2 or 5 times a power of
  // ten, the smallest that needs at most MAX_TICKS - 1 steps (raw ends such as 0.0113 and
  // 0.587 read as noise; 0, 0.2, 0.4, 0.6 read at a glance).
  var MAX_TICKS = 6;
  function niceTicks(lo, hi) {
    if (hi === lo) { var d = Math.abs(lo) || 1; lo -= d / 2; hi += d / 2; }
    var power = Math.floor(Math.log10((hi - lo) / (MAX_TICKS - 1)));
    for (;; power++) {
      for (var m = 0; m < 3; m++) {
        var step = [1, 2, 5][m] * Math.pow(10, power);
        var first = Math.floor(lo / step + 1e-9), last = Math.ceil(hi / step - 1e-9);
        if (last - first > MAX_TICKS - 1) continue;
        var digits = Math.max(0, -power), ticks = [];
        for (var k = first; k <= last; k++) ticks.push(Number((k * step).toFixed(digits)) || 0);
        return ticks;
      }
    }
  }
  // An axis's labels in one unit, that of its largest value: k, M or G from 10,000 up and
  // an exponent below 0.001, so that no label is wider than the room left of the axis
  // (-2500000 lost its sign there, 50000000 its first digit).
  function axisFormat(ticks) {
    var top = Math.max.apply(null, ticks.map(Math.abs));
    var unit = top >= 1e9 ? [1e9, "G"] : top >= 1e6 ? [1e6, "M"] : top >= 1e4 ? [1e3, "k"] : null;
    if (unit) {
      return function (v, digits) {
        return v === 0 ? "0" : Number((v / unit[0]).toPrecision(digits)) + unit[1];
      };
    }
    if (top < 1e-3) {
      return function (v, digits) { return v === 0 ? "0" : Number(v.toPrecision(digits)).toExponential(); };
    }
    return function (v, digits) { return digits === 3 ? label(v) : String(v); };
  }
  function text(x, y, content, cls) {
    var node = svg("text", {x: x, y: y, "text-anchor": "end", "dominant-baseline": "middle",
                            "font-size": 9, fill: cls === "target" ? "#555" : "#888", "class": "axis " + cls});
    node.textContent = content;
    return node;
  }
  function curve(goal) {
    var w = 360, h = 90, pad = 6, left = 44;  // left: the y-axis and its labels
    var box = svg("svg", {width: w, height: h, viewBox: "0 0 " + w + " " + h, "class": "goal-curve"});
    var c = goal.curve;
    if (!c || !c.steps.length) return box;
    var ys = c.values.filter(function (v) { return v !== null; }).concat([goal.target]);
    var ticks = niceTicks(Math.min.apply(null, ys), Math.max.apply(null, ys));
    var lo = ticks[0], hi = ticks[ticks.length - 1];
    var x0 = c.steps[0], x1 = c.steps[c.steps.length - 1] || 1;
    function X(s) { return left + (x1 === x0 ? 0 : (s - x0) / (x1 - x0)) * (w - left - pad); }
    function Y(v) { return h - pad - (v - lo) / (hi - lo) * (h - 2 * pad); }
    // the y-axis: its round values (top first), and the target's value where its line
    // meets the axis (a tick label too near it is left out)
    box.appendChild(svg("line", {x1: left - 2, x2: left - 2, y1: pad, y2: h - pad,
                                 stroke: "#bbb", "class": "y-axis"}));
    var yt = Y(goal.target), said = axisFormat(ticks);
    ticks.slice().reverse().forEach(function (v) {
      box.appendChild(svg("line", {x1: left - 4, x2: left - 2, y1: Y(v), y2: Y(v), stroke: "#bbb", "class": "tick"}));
      if (Math.abs(Y(v) - yt) >= 10) box.appendChild(text(left - 5, Y(v), said(v, 6), "tick"));
    });
    box.appendChild(text(left - 5, yt, said(goal.target, 3), "target"));
    // a gap (NaN) starts a new segment; a point alone (an eval logged once, or between
    // gaps) is a dot, since a path of one point paints nothing
    var d = "", dots = [], run = [];
    function close() { if (run.length === 1) dots.push(run[0]); run = []; }
    c.steps.forEach(function (s, i) {
      var v = c.values[i];
      if (v === null) { close(); return; }
      var x = X(s).toFixed(1), y = Y(v).toFixed(1);
      d += (run.length ? "L" : "M") + x + " " + y;
      run.push([x, y]);
    });
    close();
    var colour = goal.met ? "#2a8a3e" : "#c0392b";
    box.appendChild(svg("line", {x1: left - 2, x2: w - pad, y1: yt, y2: yt,
                                 stroke: "#999", "stroke-dasharray": "4 3", "class": "target"}));
    box.appendChild(svg("path", {d: d, fill: "none", stroke: colour, "stroke-width": 1.5}));
    dots.forEach(function (p) {
      box.appendChild(svg("circle", {cx: p[0], cy: p[1], r: 2.5, fill: colour, "class": "dot"}));
    });
    return box;
  }
  function render(body) {
    var main = document.getElementById("board");
    main.textContent = "";
    var projects = [];
    body.boards.forEach(function (b) { projects = projects.concat(b.projects); });
    if (!body.boards.length) main.appendChild(el("p", {"class": "hint"}, "goals live in a team store: trackmux ui postgresql://..."));
    else if (!projects.length) main.appendChild(el("p", {"class": "hint"}, "no runs in the store yet"));
    projects.forEach(function (p) {
      var sec = el("section", {"class": "project", "data-project": p.project});
      sec.appendChild(el("h2", {}, p.project + " (" + p.runs + " runs)"));
      if (!p.goals.length) {
        sec.appendChild(el("p", {"class": "hint"}, "no goals: trackmux goals set " + p.project + " 'KEY >= VALUE' --store DSN"));
      }
      var table = el("table", {"class": "goals"});
      if (p.goals.length) {
        var head = el("tr");
        ["goal", "state", "the run nearest the target, now", "run", "its curve"].forEach(function (t) { head.appendChild(el("th", {}, t)); });
        table.appendChild(head);
      }
      p.goals.forEach(function (g) {
        var tr = el("tr", {"data-goal": g.goal, "class": g.met ? "met" : "unmet"});
        tr.appendChild(el("td", {}, g.goal));
        var state = el("td");  // the badge inside its cell: a cell that is itself a badge loses the row's border
        state.appendChild(el("span", {"class": "badge " + (g.met ? "ok" : "warn")}, g.met ? "met" : "not met"));
        tr.appendChild(state);
        var best = g.best;
        var when = best && best.time ? ", " + new Date(best.time * 1000).toLocaleString() : "";
        tr.appendChild(el("td", {title: g.judged ? "runs judged on their " + g.judged : ""},
                          best ? best.value.toPrecision(4) + " at step " + best.step + when +
                                 " (" + g.meeting + " of " + g.runs + " runs meet it now)"
                               : g.runs ? "no run stands at a finite value" : "no run logged it yet"));
        tr.appendChild(el("td", {}, best ? best.name + " (" + (best.user ? best.user + "@" : "") + best.host + ")" : ""));
        var chart = el("td"); chart.appendChild(curve(g)); tr.appendChild(chart);
        table.appendChild(tr);
      });
      sec.appendChild(table);
      p.live.forEach(function (r) {
        var live = el("div", {"class": "live"});
        live.appendChild(el("h3", {}, "live: " + r.name + " (" + (r.user ? r.user + "@" : "") + r.host + ")"));
        if (!r.findings.length) live.appendChild(el("p", {"class": "hint"}, "no findings"));
        r.findings.forEach(function (f) {
          live.appendChild(el("div", {"class": "finding " + f.severity}, f.severity + " " + f.rule + " @ step " + f.step + ": " + f.message));
        });
        sec.appendChild(live);
      });
      main.appendChild(sec);
    });
  }
  function load() {
    fetch("/api/goals", {headers: token ? {"X-Trackmux-Token": token} : {}}).then(function (r) {
      return r.json();
    }).then(function (body) {
      if (body.error) throw new Error(body.error);
      render(body);
      document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString();
    }).catch(function (e) {
      document.getElementById("status").textContent = "cannot load the goals: " + e.message;
    });
  }
  load();
  setInterval(load, 2000);
})();
