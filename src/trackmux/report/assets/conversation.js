/* trackmux conversation view: one agentic trajectory (a `messages` cell of the samples
   ledger, core/values/trajectory.py) drawn as chat bubbles: the user's and the assistant's
   turns, each assistant turn's reward, latency and tokens, its tool calls and the tools'
   results folded (a failed result marked and unfolded). Called by samples.js for a
   payload whose `trajectories` names a conversation column; used by the report and by
   `trackmux ui`:

     window.trackmuxConversation.render(messages) -> element (div.tm-conv)
     window.trackmuxConversation.navigator(body)  -> element (jump to a group or sample)

   Every string here is model output or user data: it is only ever set as textContent
   (never innerHTML, never an attribute that runs or loads anything), so markup, scripts
   and javascript: links in it stay text. Values keyed by user data live in Maps. A body
   that is folded is built when first unfolded, so a step of hundreds of trajectories
   opens quickly; so is a conversation far off screen. */
(function () {
  "use strict";
  var PREVIEW = 90;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function isObj(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

  function str(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "string") return v;
    try { return JSON.stringify(v); } catch (e) { return String(v); }
  }

  function num(v) {
    if (typeof v !== "number" || !isFinite(v)) return null;
    return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
  }

  /* the text of a message's content: a string, or a list of parts (text parts joined,
     other parts named by their type) */
  function contentText(content) {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return str(content);
    return content.map(function (part) {
      if (!isObj(part)) return str(part);
      if (part.type === "text" && typeof part.text === "string") return part.text;
      return "[" + str(part.type) + "]";
    }).join("\n");
  }

  function callOf(call) {
    var body = isObj(call) && isObj(call["function"]) ? call["function"] : call;
    return {id: isObj(call) ? str(call.id) : "", name: isObj(body) ? str(body.name) : "?",
            args: isObj(body) ? str(body.arguments) : ""};
  }

  function preview(text) {
    var flat = text.replace(/\s+/g, " ");
    return flat.length > PREVIEW ? flat.slice(0, PREVIEW - 1) + "…" : flat;
  }

  /* a folded part: the summary is drawn now, the body when first unfolded */
  function fold(cls, summary, build, open) {
    var box = el("details", cls);
    var head = el("summary", null);
    summary.forEach(function (n) { head.appendChild(n); });
    box.appendChild(head);
    var built = false;
    function ensure() { if (!built) { built = true; box.appendChild(build()); } }
    box.addEventListener("toggle", function () { if (box.open) ensure(); });
    if (open) { ensure(); box.open = true; }
    return box;
  }

  function argumentsBody(args) {
    var text = args;
    try { text = JSON.stringify(JSON.parse(args), null, 2); } catch (e) { /* as written */ }
    return el("pre", "tm-pre", text);
  }

  function badges(m) {
    var out = [], rest = [];
    var r = num(m.reward), l = num(m.latency_ms);
    var t = typeof m.tokens === "number" ? num(m.tokens) : Array.isArray(m.tokens) ? String(m.tokens.length) : null;
    if (r !== null) out.push(el("span", "tm-badge tm-rew", "reward " + r));
    if (l !== null) rest.push(l + " ms");
    if (t !== null) rest.push(t + " tok");
    if (Array.isArray(m.logprobs) && m.logprobs.length) {
      var sum = 0, n = 0;
      m.logprobs.forEach(function (v) { if (typeof v === "number") { sum += v; n += 1; } });
      if (n) rest.push("logprob " + num(sum / n));
    }
    if (rest.length) out.push(el("span", "tm-badge", rest.join(" · ")));
    return out;
  }

  function summaryOf(messages) {
    var turns = 0, calls = 0, errors = 0;
    messages.forEach(function (m) {
      if (!isObj(m)) return;
      if (m.role === "assistant") {
        turns += 1;
        if (Array.isArray(m.tool_calls)) calls += m.tool_calls.length;
      } else if (m.role === "tool" && m.status === "error") errors += 1;
    });
    return {turns: turns, calls: calls, errors: errors};
  }

  function bubble(m, turn, names) {
    var role = str(m.role) || "?";
    if (role === "system") {
      var sys = contentText(m.content);
      return fold("tm-fold tm-system", [el("span", "tm-role", "system"),
                                        el("span", "tm-prev", " " + preview(sys))],
                  function () { return el("div", "tm-text", sys); }, false);
    }
    if (role === "tool") {
      var failed = m.status === "error";
      var name = str(m.name) || names.get(str(m.tool_call_id)) || "tool";
      var result = contentText(m.content);
      var node = fold("tm-fold tm-result" + (failed ? " tm-error" : ""),
                      [el("span", "tm-role", "← " + name),
                       el("span", failed ? "tm-status tm-bad" : "tm-status", failed ? " error" : (m.status ? " " + str(m.status) : "")),
                       el("span", "tm-prev", " " + preview(result))],
                      function () { return el("div", "tm-text", result); }, failed);
      return node;
    }
    var box = el("div", "tm-msg tm-" + (role === "user" || role === "assistant" ? role : "other"));
    var head = el("div", "tm-mhead");
    head.appendChild(el("span", "tm-role", role === "assistant" ? "assistant · turn " + turn : role));
    badges(m).forEach(function (b) { head.appendChild(b); });
    box.appendChild(head);
    var text = contentText(m.content);
    if (text) box.appendChild(el("div", "tm-text", text));
    if (Array.isArray(m.tool_calls)) {
      m.tool_calls.forEach(function (raw) {
        var call = callOf(raw);
        if (call.id) names.set(call.id, call.name);
        box.appendChild(fold("tm-fold tm-call", [el("span", "tm-role", "→ " + call.name),
                                                 el("span", "tm-prev", "(" + preview(call.args) + ")")],
                             function () { return argumentsBody(call.args); }, false));
      });
    }
    return box;
  }

  /* The first EAGER conversations drawn in one go are built at once; the others when
     they come near the screen (IntersectionObserver), so a step of hundreds opens fast.
     Each waiting one is built before a jump or an unfold-all reaches it. */
  var EAGER = 24, drawnNow = 0, pending = new Map(), observer = null;

  function build(root) {
    var fill = pending.get(root);
    if (!fill) return;
    pending.delete(root);
    if (observer) observer.unobserve(root);
    fill();
  }

  function later(root, fill) {
    if (typeof IntersectionObserver === "undefined") { fill(); return; }
    if (!observer) observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) { if (e.isIntersecting) build(e.target); });
    }, {rootMargin: "800px"});
    pending.set(root, fill);
    observer.observe(root);
  }

  function render(messages) {
    var root = el("div", "tm-conv");
    if (!Array.isArray(messages)) {
      root.appendChild(el("div", "tm-empty", "no conversation"));
      return root;
    }
    var s = summaryOf(messages);
    var head = el("div", "tm-sum");
    head.appendChild(el("span", null, s.turns + " turns · " + s.calls + " tool calls"));
    if (s.errors) head.appendChild(el("span", "tm-bad", " · " + s.errors + " failed"));
    root.appendChild(head);
    function fill() {
      var names = new Map(), turn = 0, frag = document.createDocumentFragment();
      messages.forEach(function (m) {
        if (!isObj(m)) { frag.appendChild(el("div", "tm-msg tm-other", str(m))); return; }
        if (m.role === "assistant") turn += 1;
        frag.appendChild(bubble(m, turn, names));
      });
      root.appendChild(frag);
    }
    if (drawnNow === 0) setTimeout(function () { drawnNow = 0; }, 0);
    drawnNow += 1;
    if (drawnNow <= EAGER) fill(); else later(root, fill);
    return root;
  }

  function buildAll(body) {
    body.querySelectorAll(".tm-conv").forEach(build);
  }

  /* jump to a group or a sample of the drawn step, and fold or unfold every tool part */
  function navigator(body) {
    var nav = el("span", "tm-nav");
    var group = el("select", "tm-goto-group");
    group.setAttribute("aria-label", "go to group");
    var sample = el("input", "tm-goto-sample");
    sample.type = "number"; sample.min = "0"; sample.placeholder = "sample #";
    sample.setAttribute("aria-label", "go to sample");
    var openAll = el("button", "tm-unfold", "unfold tools");
    var closeAll = el("button", "tm-fold-all", "fold tools");
    openAll.type = closeAll.type = "button";
    function flash(node) {
      if (!node) return;
      node.querySelectorAll(".tm-conv").forEach(build);
      node.scrollIntoView({block: "nearest", inline: "nearest"});
      node.classList.add("tm-flash");
      setTimeout(function () { node.classList.remove("tm-flash"); }, 1200);
    }
    function groups() {
      var seen = new Map();
      body.querySelectorAll(".tms-group").forEach(function (g) { seen.set(g.dataset.group, g); });
      return seen;
    }
    group.addEventListener("focus", function () {
      var current = group.value;
      group.textContent = "";
      group.appendChild(el("option", null, "group…")).value = "";
      groups().forEach(function (_, name) { group.appendChild(el("option", null, name)).value = name; });
      group.value = current;
    });
    group.addEventListener("change", function () { flash(groups().get(group.value)); });
    sample.addEventListener("change", function () {
      var found = null;
      body.querySelectorAll(".tms-card").forEach(function (c) {
        if (c.dataset.sample === String(Number(sample.value))) found = c;
      });
      flash(found);
    });
    function setAll(open) {
      buildAll(body);
      body.querySelectorAll("details.tm-call, details.tm-result").forEach(function (d) { d.open = open; });
    }
    openAll.addEventListener("click", function () { setAll(true); });
    closeAll.addEventListener("click", function () { setAll(false); });
    [group, sample, openAll, closeAll].forEach(function (n) { nav.appendChild(n); });
    return nav;
  }

  window.trackmuxConversation = {render: render, navigator: navigator, summary: summaryOf};
})();
