/* trackmux ui: the page. Draws with window.trackmuxCharts (assets/charts.js), the same
 * pieces as the frozen export; fetches only the API of the server that served it.
 * Live: every second each chart asks for the points after the seq it already has. */
(function () {
  "use strict";
  var C = window.trackmuxCharts, el = C.el;
  // No token here: opening the printed URL traded it for an HttpOnly cookie and the
  // server redirected to this page without it; same-origin requests carry the cookie.
  // every map keyed by run data (run ids, keys) has no prototype: an id like "__proto__"
  // or "constructor" is just a key (C.dict)
  var S = {runs: [], selected: [], tab: "charts", charts: [], sources: C.dict(), labels: C.dict(),
           colours: C.dict(), findings: C.dict(), coverage: C.dict(), timers: [], shown: null, groups: null, focus: null,
           sweep: null};
  var colourOf = C.colourKeeper();  // a run keeps its colour when others come and go
  // findings read from samples; a finding of any other rule whose key is one of the run's
  // sample keys opens them too (openFinding)
  var SAMPLE_RULES = new Set(["degenerate_text", "flat_groups", "component_divergence", "tool_failures",
                              "turn_count_shift", "turn_limit_truncation", "tool_dominance"]);

  function api(path) {
    return fetch(path, {credentials: "same-origin"}).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(body.error || r.statusText);
        return body;
      });
    });
  }
  function q(params) {
    return Object.keys(params).filter(function (k) { return params[k] !== null && params[k] !== undefined; })
      .map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(params[k]); }).join("&");
  }
  function status(text) { document.getElementById("status").textContent = text; }
  function view() { return document.getElementById("view"); }

  // ---- the run list -------------------------------------------------------------
  function badge(state) {
    var cls = state === "finished" ? "ok" : state === "running" ? "live" : state === "stopped" ? "warn" : "bad";
    return el("span", {"class": "badge " + cls}, state);
  }
  function health(b) {
    var text = b.name + (b.pending ? " " + b.pending + " pending" : " ✓") +
      (b.quarantined ? " " + b.quarantined + " quarantined" : "");
    return el("span", {"class": "badge " + (b.pending || b.quarantined ? "warn" : "ok"),
                       title: "acknowledged up to event " + b.acked}, text);
  }
  function renderRuns() {
    var body = document.querySelector("#runs tbody");
    body.textContent = "";
    S.runs.forEach(function (r, i) {
      S.labels[r.id] = r.name; S.colours[r.id] = colourOf(r.id);
      var tr = el("tr", {"data-run": r.id, "class": S.selected.indexOf(r.id) >= 0 ? "selected" : ""});
      var box = el("input", {type: "checkbox", "aria-label": "select " + r.name});
      box.checked = S.selected.indexOf(r.id) >= 0;
      box.addEventListener("change", function () { toggle(r.id, box.checked); });
      var cell = el("td"); cell.appendChild(box); tr.appendChild(cell);
      var name = el("td"); var dot = el("i", {"class": "dot"}); dot.style.background = S.colours[r.id];
      name.appendChild(dot); name.appendChild(document.createTextNode(" " + r.name));
      if (r.damage && r.damage.length) name.appendChild(el("div", {"class": "hint damage"}, r.damage[0]));
      (r.stops || []).forEach(function (line) { name.appendChild(el("div", {"class": "hint stop"}, line)); });
      if (r.host) name.appendChild(el("div", {"class": "hint"}, (r.user ? r.user + "@" : "") + r.host));
      tr.appendChild(name);
      tr.appendChild(el("td", {}, r.project));
      var st = el("td"); st.appendChild(badge(r.state)); tr.appendChild(st);
      var del = el("td"); r.backends.forEach(function (b) { del.appendChild(health(b)); });
      if (!r.backends.length) del.appendChild(el("span", {"class": "hint"}, "spool only"));
      tr.appendChild(del);
      tr.appendChild(el("td", {"class": "num"}, r.last_step === null ? "" : String(r.last_step)));
      tr.appendChild(el("td", {"class": "num"}, String(r.events)));
      tr.appendChild(el("td", {"class": "num" + (r.findings_bad ? " bad" : "")},
        r.findings === null ? "–" : String(r.findings)));
      body.appendChild(tr);
    });
  }
  function loadRuns() {
    return api("/api/runs").then(function (body) {
      var before = S.runs.map(function (r) { return r.id; }).join();
      S.runs = body.runs; S.sources = body.sources; S.roots = body.roots || [];
      document.getElementById("goals-link").hidden = !body.goals;  // a team store's goals, when set
      if (!S.selected.length && S.runs.length) S.selected = defaultSelection(S.runs);
      renderRuns();
      status(S.runs.length + " runs · cache " + Math.round(body.memory.cached_bytes / 1048576) + " MB");
      return before !== S.runs.map(function (r) { return r.id; }).join();
    });
  }
  // the two newest runs, and every run the live doctor found a problem in (up to 6 in
  // all): a failing run is never hidden behind healthy ones
  function defaultSelection(runs) {
    var picked = runs.slice(0, 2).map(function (r) { return r.id; });
    runs.forEach(function (r) { if (r.findings_bad && picked.length < 6 && picked.indexOf(r.id) < 0) picked.push(r.id); });
    return picked;
  }
  // runs with findings first: what went wrong is what a reader looks for
  function byConcern(ids) {
    var bad = C.dict();
    S.runs.forEach(function (r) { bad[r.id] = r.findings_bad || 0; });
    return ids.slice().sort(function (a, b) { return (bad[b] || 0) - (bad[a] || 0); });
  }
  function runHeader(id) {
    var h = el("h3", {"class": "run-head", "data-run": id}), dot = el("i", {"class": "dot"});
    dot.style.background = S.colours[id]; h.appendChild(dot);
    h.appendChild(document.createTextNode(" " + (S.labels[id] || id)));
    var row = S.runs.filter(function (r) { return r.id === id; })[0];
    if (row && row.findings_bad) h.appendChild(el("span", {"class": "badge bad"}, row.findings_bad + " finding" + (row.findings_bad > 1 ? "s" : "")));
    return h;
  }
  // one column per chosen run (samples, images and tables): no run hidden behind another
  function runColumns(node, ids, fill) {
    var grid = el("div", {"class": "run-columns"}); node.appendChild(grid);
    byConcern(ids).forEach(function (id) {
      var col = el("div", {"class": "run-column", "data-run": id}); grid.appendChild(col);
      col.appendChild(runHeader(id));
      fill(col, id);
    });
  }
  function toggle(id, on) {
    S.selected = S.selected.filter(function (x) { return x !== id; });
    if (on) S.selected.push(id);
    renderRuns(); show(S.tab);
  }

  // ---- charts -------------------------------------------------------------------
  function xmode() { return document.getElementById("xmode").value; }
  function ymode() { return {log: document.getElementById("yscale").value === "log",
                             robust: document.getElementById("robust").checked}; }
  function smoothing() { return parseFloat(document.getElementById("smoothing").value) || 0; }

  function mountChart(node, key) {
    var runs = S.selected.slice(), mode = xmode(), width = Math.max(200, Math.floor(node.clientWidth || 560) - 20);
    var entry = {key: key, runs: runs, mode: mode, handle: null, cursors: C.dict(), lo: null, hi: null, busy: false,
                 partial: false, note: el("p", {"class": "hint loading", "data-key": key}, "loading: the curves fill in as the runs are read")};
    entry.note.hidden = true;
    // opened from a finding: zoomed to its onset, its evidence ringed
    var focus = S.focus && S.focus.key === key && mode === "step" ? S.focus : null;
    if (focus) { entry.lo = focus.lo; entry.hi = focus.hi; }
    function fetchRange(lo, hi) {
      // one bucket per 2 px: its min and max make one point per pixel
      return api("/api/series?" + q({key: key, runs: runs.join(","), x: mode, lo: lo, hi: hi, width: Math.ceil(width / 2)}))
        .then(function (p) {
          p.runs.forEach(function (r) { entry.cursors[r.id] = r.cursor; });
          loading(entry, !!p.partial);
          var payload = {key: key, x_mode: mode, runs: p.runs.map(function (r) { return {id: r.id, x: p.x, y: r.y, nonfinite: r.nonfinite}; })};
          entry.payload = payload;
          return payload;
        });
    }
    entry.refetch = fetchRange;
    fetchRange(entry.lo, entry.hi).then(function (payload) {
      askFindings();
      var y = ymode();
      entry.handle = C.lineChart(node, payload, {labels: S.labels, colours: S.colours, smoothing: smoothing(),
        width: width, findings: allFindings(runs, key), log: y.log, robust: y.robust,
        zoom: focus ? [focus.lo, focus.hi] : null, evidence: focus ? evidenceOf(focus, payload) : null,
        onZoom: function (lo, hi) {
          entry.lo = lo; entry.hi = hi;
          fetchRange(lo, hi).then(function (p) { entry.handle.update(p, lo !== null); });
        }});
      node.appendChild(entry.note);
      if (focus) node.scrollIntoView({block: "center"});
    }).catch(function (e) { node.appendChild(el("p", {"class": "error"}, key + ": " + e.message)); });
    S.charts.push(entry);
    return entry;
  }
  // the finding's evidence points of this key; without them the run's value at the onset
  function evidenceOf(focus, payload) {
    var given = (focus.evidence || []).filter(function (e) { return !e.key || e.key === focus.key; });
    if (given.length) return given;
    var out = [];
    payload.runs.forEach(function (r) {
      if (r.id !== focus.run) return;
      var xs = r.x;
      for (var i = 0; i < xs.length; i++) if (xs[i] === focus.step && r.y[i] !== null) out.push({step: xs[i], value: r.y[i]});
    });
    return out;
  }
  // an answer from runs read only in part: the chart says so, and polls the whole
  // (downsampled) series again until every run is read, instead of tailing it
  function loading(entry, partial) {
    entry.partial = partial;
    entry.note.hidden = !partial;
  }
  function tailChart(entry) {
    if (!entry.handle || entry.busy || !entry.payload) return Promise.resolve();
    if (entry.partial) {
      entry.busy = true;
      return entry.refetch(entry.lo, entry.hi).then(function (p) { entry.handle.update(p, entry.lo !== null); })
        .finally(function () { entry.busy = false; });
    }
    var after = entry.runs.map(function (id) { return id + ":" + (entry.cursors[id] || 0); }).join(",");
    entry.busy = true;
    return api("/api/tail?" + q({key: entry.key, after: after, x: entry.mode})).then(function (p) {
      var changed = false;
      if (p.partial) loading(entry, true);  // a burst to read: the whole series next time
      p.runs.forEach(function (r) {
        entry.cursors[r.id] = r.cursor;
        if (!r.x.length) return;
        changed = true;
        entry.payload.runs.forEach(function (run, i) {
          if (run.id !== r.id) return;
          // each run keeps its own x from now on: copy before appending
          entry.payload.runs[i] = {id: run.id, x: run.x.concat(r.x), y: run.y.concat(r.y)};
        });
      });
      if (changed) entry.handle.update(entry.payload, entry.lo !== null);
    }).finally(function () { entry.busy = false; });
  }

  function chartGroups(filterFn, keysAsked) {
    var node = view();
    if (!S.selected.length) { node.appendChild(el("p", {"class": "hint"}, "select runs above")); return; }
    var tab = S.tab, empty = el("p", {"class": "hint empty"},
      tab === "system" ? "no system metrics in the chosen runs: init(system_metrics=...) records them"
                       : "no metrics in the chosen runs yet" + (document.getElementById("filter").value.trim() ? " (matching the filter)" : ""));
    S.shown = new Set(); S.groups = new Map();
    var add = S.addKeys = function (body) {  // first call: every key; later (live): only new ones
      if (S.tab !== tab) return;
      var needle = document.getElementById("filter").value.trim();
      Object.keys(body.groups).forEach(function (prefix) {
        var keys = body.groups[prefix].filter(function (k) {
          return !S.shown.has(k) && filterFn(prefix, k) && (!needle || k.indexOf(needle) >= 0); });
        if (!keys.length) return;
        if (!S.groups.has(prefix)) {
          node.appendChild(el("h3", {"class": "group"}, prefix));
          var g = el("div", {"class": "grid", "data-group": prefix}); node.appendChild(g);
          S.groups.set(prefix, g);
        }
        var grid = S.groups.get(prefix);
        keys.forEach(function (key) {
          S.shown.add(key);
          var cell = el("div", {"class": "panel"}); grid.appendChild(cell);
          lazily(cell, function () { mountChart(cell, key); });
        });
      });
      if (S.shown.size) empty.remove(); else node.appendChild(empty);
    };
    (keysAsked || api("/api/keys?" + q({runs: S.selected.join(",")}))).then(function (body) {
      if (S.addKeys !== add) return;  // another tab or view was shown meanwhile
      add(body);
      if (!node.querySelector(".panel")) askFindings();  // no chart to wait for
    });
  }
  // a key first logged after the page opened gets its chart without a reload
  function newKeys() {
    if ((S.tab !== "charts" && S.tab !== "system") || !S.addKeys || !S.selected.length || S.keysBusy) return;
    S.keysBusy = true;
    var asked = S.addKeys;
    api("/api/keys?" + q({runs: S.selected.join(",")})).then(function (body) {
      if (S.addKeys === asked) asked(body);
    }).catch(function () {}).finally(function () { S.keysBusy = false; });
  }
  function lazily(node, draw) {
    var io = new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; })) { io.disconnect(); draw(); }
    }, {rootMargin: "300px"});
    io.observe(node);
  }
  // a finding marks the charts of its keys (all charts when it names none)
  function allFindings(runs, key) {
    var out = [];
    runs.forEach(function (id) { (S.findings[id] || []).forEach(function (f) {
      if (!key || !f.keys || !f.keys.length || f.keys.indexOf(key) >= 0) out.push(f); }); });
    return out;
  }
  // Charts never wait for this: their marks are set when it arrives. Over many runs only
  // what the live doctor stored is asked (diagnosing 100 runs takes a minute); the
  // Findings tab diagnoses the chosen runs.
  // once per view, after the first chart's data: the critical path is runs, keys, series
  function askFindings() {
    if (S.findingsAsked) return;
    S.findingsAsked = true; loadFindings(false);
  }
  function loadFindings(diagnose) {
    if (!S.sources.findings || !S.selected.length) return Promise.resolve();
    var stored = !diagnose && S.selected.length > 12 ? "1" : null;
    return api("/api/findings?" + q({runs: S.selected.join(","), stored: stored})).then(function (body) {
      body.runs.forEach(function (r) { S.findings[r.id] = r.findings; if (r.coverage) S.coverage[r.id] = r.coverage; });
      S.charts.forEach(function (c) { if (c.handle) c.handle.setFindings(allFindings(c.runs, c.key)); });
    }).catch(function () {});
  }

  // ---- compare ------------------------------------------------------------------
  function compareView() {
    var node = view();
    if (S.selected.length < 2) { node.appendChild(el("p", {"class": "hint"}, "select two or more runs to compare")); return; }
    var pick = el("div", {"class": "row"});
    var metric = el("select", {id: "metric"}), px = el("select", {id: "path-x"}), py = el("select", {id: "path-y"});
    pick.appendChild(el("label", {}, "metric for importance ")); pick.appendChild(metric);
    pick.appendChild(el("label", {}, " path: x ")); pick.appendChild(px);
    pick.appendChild(el("label", {}, " y ")); pick.appendChild(py);
    node.appendChild(pick);
    var out = el("div", {id: "compare-out"}); node.appendChild(out);
    api("/api/keys?" + q({runs: S.selected.join(",")})).then(function (body) {
      var keys = [].concat.apply([], Object.values(body.groups));
      [metric, px, py].forEach(function (s) { keys.forEach(function (k) { s.appendChild(el("option", {value: k}, k)); }); });
      metric.value = keys.filter(function (k) { return /reward|score/.test(k); })[0] || keys[0];
      px.value = keys.filter(function (k) { return /kl/.test(k); })[0] || keys[0];
      py.value = metric.value;
      function draw() {
        out.textContent = "";
        api("/api/compare?" + q({runs: S.selected.join(","), metric: metric.value})).then(function (c) {
          drawCompare(out, c);
          return api("/api/path?" + q({runs: S.selected.join(","), x: px.value, y: py.value}));
        }).then(function (p) {
          out.appendChild(el("h3", {}, p.y_key + " against " + p.x_key));
              C.pathChart(out, p, {labels: S.labels, colours: S.colours});
        });
      }
      [metric, px, py].forEach(function (s) { s.addEventListener("change", draw); });
      draw();
    });
  }
  function drawCompare(node, c) {
    node.appendChild(el("h3", {}, "Config differences"));
    var t = el("table", {id: "config-diff"}), head = el("tr");
    head.appendChild(el("th", {}, "key"));
    c.runs.forEach(function (r) { head.appendChild(el("th", {}, S.labels[r.id] || r.name)); });
    t.appendChild(head);
    c.config.filter(function (row) { return row.differs; }).forEach(function (row) {
      var tr = el("tr", {"class": "diff"}); tr.appendChild(el("td", {"class": "mono"}, row.key));
      row.values.forEach(function (v) { tr.appendChild(el("td", {"class": "mono"}, v === null ? "" : String(v))); });
      t.appendChild(tr);
    });
    node.appendChild(t);
    var same = c.config.filter(function (row) { return !row.differs; }).length;
    node.appendChild(el("p", {"class": "hint"}, same + " keys are the same in every chosen run"));
    node.appendChild(el("h3", {}, "Hyperparameter importance for " + c.metric));
    node.appendChild(el("p", {"class": "hint method"}, c.method));
    var it = importanceTable("importance", "key", "", c.importance, function (imp) {
      var bar = el("td", {"class": "ci"});
      var track = el("div", {"class": "ci-track"}), span = el("div", {"class": "ci-span"}), dot = el("div", {"class": "ci-dot"});
      function pos(v) { return (50 + 50 * Math.max(-1, Math.min(1, v))) + "%"; }
      span.style.left = pos(imp.low); span.style.width = (50 * (imp.high - imp.low)) + "%"; dot.style.left = pos(imp.value);
      track.appendChild(span); track.appendChild(dot); bar.appendChild(track);
      return bar;
    });
    if (!c.importance.length) node.appendChild(el("p", {"class": "hint"}, "no config key differs across 3 or more runs with this metric"));
    else node.appendChild(it);
  }

  /* The importance table of the compare view (config keys over runs) and of the sweep
   * view (parameters over trials): one row per key, its last cell drawn by ``lastCell``. */
  function importanceTable(id, keyHeader, lastHeader, rows, lastCell) {
    var it = el("table", {id: id}), h = el("tr");
    [keyHeader, "method", "value", "90% interval", "n", lastHeader].forEach(function (x) { h.appendChild(el("th", {}, x)); });
    it.appendChild(h);
    rows.forEach(function (imp) {
      var tr = el("tr", {"data-key": imp.key});
      tr.appendChild(el("td", {"class": "mono"}, imp.key));
      tr.appendChild(el("td", {}, imp.method === "spearman" ? "Spearman ρ" : "η (ranks)"));
      tr.appendChild(el("td", {"class": "num"}, C.fmt(imp.value)));
      tr.appendChild(el("td", {"class": "num"}, C.fmt(imp.low) + " .. " + C.fmt(imp.high)));
      tr.appendChild(el("td", {"class": "num"}, String(imp.n)));
      tr.appendChild(lastCell(imp));
      it.appendChild(tr);
    });
    return it;
  }

  // ---- histograms, media, findings, samples -------------------------------------
  function histogramsView() {
    var node = view();
    if (!S.selected.length) { node.appendChild(el("p", {"class": "hint"}, "select runs above")); return; }
    var chosen = S.selected.slice();
    Promise.all(chosen.map(function (id) {
      return api("/api/run/" + id + "/histograms").then(function (body) { return body.histograms; });
    })).then(function (all) {
      if (S.tab !== "histograms") return;
      var without = [];
      chosen.forEach(function (id, i) {  // in the order chosen, whichever answered first
        var keys = Object.keys(all[i]);
        if (!keys.length) { without.push(S.labels[id] || id); return; }
        node.appendChild(runHeader(id));
        var grid = el("div", {"class": "grid"}); node.appendChild(grid);
        keys.forEach(function (k) { var p = el("div", {"class": "panel"}); grid.appendChild(p); C.histogramChart(p, k, all[i][k]); });
      });
      if (without.length === chosen.length) node.appendChild(el("p", {"class": "hint empty"},
        "no histograms in the chosen runs: run.log_histogram(key, values) records them"));
      else if (without.length) node.appendChild(el("p", {"class": "hint empty tm-no-histograms"},
        "no histograms in " + without.join(", ")));
    });
  }
  function slider(node, items, onPick, label) {
    var row = el("div", {"class": "row"});
    var input = el("input", {type: "range", min: 0, max: items.length - 1, value: items.length - 1, "class": "step-slider"});
    var text = el("span", {"class": "hint"});
    row.appendChild(el("span", {}, label + " ")); row.appendChild(input); row.appendChild(text);
    node.appendChild(row);
    function pick() { var it = items[+input.value]; text.textContent = "step " + it.step + " (" + (+input.value + 1) + " of " + items.length + ")"; onPick(it); }
    input.addEventListener("input", pick); pick();
    return input;
  }
  function mediaView() {
    var node = view();
    if (!S.selected.length) { node.appendChild(el("p", {"class": "hint"}, "select runs above")); return; }
    runColumns(node, S.selected, function (col, id) {
      api("/api/run/" + id + "/media").then(function (m) {
        Object.keys(m.images).forEach(function (key) {
          var box = el("div", {"class": "panel media", "data-key": key, "data-run": id}); col.appendChild(box);
          box.appendChild(el("h3", {}, key));
          var img = el("img", {alt: key});
          slider(box, m.images[key], function (it) { img.src = "/api/run/" + id + "/image/" + it.seq; }, "image");
          box.appendChild(img);
        });
        Object.keys(m.tables).forEach(function (key) {
          var box = el("div", {"class": "panel media", "data-key": key, "data-run": id}); col.appendChild(box);
          box.appendChild(el("h3", {}, key));
          var holder = el("div");
          slider(box, m.tables[key], function (it) {
            api("/api/run/" + id + "/table/" + it.seq).then(function (t) { holder.textContent = ""; C.table(holder, t); });
          }, "table");
          box.appendChild(holder);
        });
        if (!Object.keys(m.images).length && !Object.keys(m.tables).length) col.appendChild(el("p", {"class": "hint empty"}, "no images or tables in this run"));
      });
    });
  }
  function findingsView() {
    var node = view();
    if (!S.sources.findings) { node.appendChild(el("p", {"class": "hint unavailable"}, "findings: not available in this install (the doctor package is missing)")); return; }
    loadFindings(true).then(function () {
      var max = 1;
      S.runs.forEach(function (r) { if (S.selected.indexOf(r.id) >= 0 && r.last_step) max = Math.max(max, r.last_step); });
      C.findings(node, S.selected.map(function (id) { return {id: id, label: S.labels[id], findings: S.findings[id] || [], coverage: S.coverage[id] || null}; }), max,
                 {open: openFinding});
    });
  }
  /* One click from a finding to where it shows: samples findings (degenerate text, flat
   * groups, reward components, tool calls: any finding whose key is a sample key of the
   * run) open the sample browser at the onset step and key; the others the key's chart
   * zoomed around the onset (or around the evidence), the evidence points ringed. */
  function openFinding(f, rid, key) {
    key = key || (f.evidence && f.evidence.length && f.evidence[0].key) || (f.keys || [])[0] || null;
    if (S.selected.indexOf(rid) < 0) { S.selected.push(rid); renderRuns(); }
    var steps = [f.step].concat((f.evidence || []).map(function (e) { return e.step; }));
    var lo = Math.min.apply(null, steps), hi = Math.max.apply(null, steps);
    var row = S.runs.filter(function (r) { return r.id === rid; })[0], last = (row && row.last_step) || hi;
    var pad = Math.max(5, Math.round(0.05 * last), Math.round(0.25 * (hi - lo)));
    S.focus = {run: rid, key: key, step: f.step, lo: Math.max(0, lo - pad), hi: hi + pad,
               evidence: (f.evidence || []).filter(function (e) { return !key || !e.key || e.key === key; })};
    function charts() {
      document.getElementById("xmode").value = "step";
      document.getElementById("filter").value = key || "";
      show("charts", null, true);
    }
    if (!S.sources.samples) return charts();
    if (SAMPLE_RULES.has(f.rule)) { show("samples", null, true); return; }
    var asked = S.focus;
    return api("/api/run/" + rid + "/samples").then(function (body) {
      if (S.focus !== asked) return;  // another finding was opened meanwhile
      var keys = [key].concat(f.keys || []).filter(function (k) { return k && Object.prototype.hasOwnProperty.call(body.keys, k); });
      if (keys.length) { S.focus.key = keys[0]; show("samples", null, true); } else charts();
    }, charts);
  }
  function loadSamplesScript(then) {
    if (window.trackmuxSamples) return then();
    ["/assets/samples.css", "/assets/conversation.css"].forEach(function (href) {
      var css = document.createElement("link"); css.rel = "stylesheet"; css.href = href;
      document.head.appendChild(css);
    });
    // conversations (assets/conversation.js) first: samples.js draws them when present
    var c = document.createElement("script"); c.src = "/assets/conversation.js";
    c.onload = c.onerror = function () {
      var s = document.createElement("script"); s.src = "/assets/samples.js"; s.onload = then;
      document.head.appendChild(s);
    };
    document.head.appendChild(c);
  }
  function samplesView() {
    var node = view();
    if (!S.sources.samples) { node.appendChild(el("p", {"class": "hint unavailable"}, "samples: not available in this install (the samples package is missing)")); return; }
    if (!S.selected.length) { node.appendChild(el("p", {"class": "hint"}, "select runs above")); return; }
    var focus = S.focus;
    // the ledger's own browser (report/assets/samples.js): it draws the step slider, sort,
    // filter, groups and token colours; the server hands it one step at a time
    loadSamplesScript(function () {
      runColumns(node, S.selected, function (col, id) {
        api("/api/run/" + id + "/samples").then(function (body) {
          Object.keys(body.keys).forEach(function (key) {
            var steps = body.keys[key];
            if (!steps.length) return;
            var box = el("div", {"class": "panel samples", "data-key": key, "data-run": id}); col.appendChild(box);
            box.appendChild(el("h3", {}, key));
            var holder = el("div", {"class": "sample-browser", "data-run": id}); box.appendChild(holder);
            var load = function (step) { return api("/api/run/" + id + "/samples/step?" + q({key: key, step: step})); };
            var at = steps[steps.length - 1], focused = focus && focus.run === id && (!focus.key || focus.key === key);
            if (focused) {  // the logged step at or before the onset (else the first after)
              var before = steps.filter(function (s) { return s <= focus.step; });
              at = before.length ? before[before.length - 1] : steps[0];
              box.setAttribute("data-focus", "1");
            }
            load(at).then(function (p) {
              window.trackmuxSamples.mount(holder, p, {steps: steps, load: load});
              holder.setAttribute("data-ready", "1");
              if (focused) box.scrollIntoView({block: "start"});
            }).catch(function (e) { holder.textContent = "samples could not be read: " + e.message; });
          });
          if (!Object.keys(body.keys).length) col.appendChild(el("p", {"class": "hint empty"}, "no samples in this run (run.log_samples)"));
        });
      });
    });
  }

  // ---- sweeps -------------------------------------------------------------------
  /* The sweeps stored under the served folders (ROOT/.sweeps/), read-only: the trials
   * table (a pruned trial shows the doctor's reason; its run opens its charts), value
   * against each parameter, and each parameter's importance for the value. */
  function sweepsView() {
    var node = view();
    api("/api/sweeps").then(function (body) {
      if (S.tab !== "sweeps") return;
      if (!body.available) { node.appendChild(el("p", {"class": "hint unavailable"}, body.message)); return; }
      (body.errors || []).forEach(function (e) { node.appendChild(el("p", {"class": "error"}, "a sweep storage could not be read: " + e)); });
      if (!body.sweeps.length) {
        node.appendChild(el("p", {"class": "hint empty"}, "no sweeps under the served folders: `trackmux sweep create` stores them in ROOT/.sweeps/"));
        return;
      }
      var row = el("div", {"class": "row"}), pick = el("select", {id: "sweep-pick"});
      body.sweeps.forEach(function (s) {
        pick.appendChild(el("option", {value: s.id}, s.sweep + " · " + s.method + " · " + s.trials + " trials" +
          (s.metric ? " · " + s.goal + " " + s.metric : "")));
      });
      if (S.sweep && body.sweeps.some(function (s) { return s.id === S.sweep; })) pick.value = S.sweep;
      row.appendChild(el("label", {"for": "sweep-pick"}, "sweep ")); row.appendChild(pick);
      node.appendChild(row);
      var out = el("div", {id: "sweep-out"}); node.appendChild(out);
      var shown = null, busy = false;
      // drawn again only when the sweep changed (a running sweep: every 5 s, see live())
      function draw(force) {
        if (busy) return;
        S.sweep = pick.value; busy = true;
        api("/api/sweep/" + encodeURIComponent(pick.value)).then(function (d) {
          var text = JSON.stringify(d);
          if (S.tab !== "sweeps" || S.sweep !== d.id || (!force && text === shown)) return;
          shown = text; out.textContent = ""; drawSweep(out, d);
        }).catch(function (e) {
          out.textContent = ""; shown = null;
          out.appendChild(el("p", {"class": "error"}, "sweep could not be read: " + e.message));
        }).finally(function () { busy = false; });
      }
      pick.addEventListener("change", function () { draw(true); });
      S.sweepRefresh = function () { draw(false); };
      draw(true);
    }).catch(function (e) { node.appendChild(el("p", {"class": "error"}, "sweeps could not be listed: " + e.message)); });
  }
  // a trial's run alone: its curves, not drawn over whatever else was chosen
  function openRun(rid) {
    S.selected = [rid];
    renderRuns(); show("charts");
  }
  // parameter names are the user's: read them as own properties only ("constructor",
  // "__proto__" are just names)
  function own(obj, key) { return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined; }
  var STATE_BADGE = new Map([["complete", "ok"], ["running", "live"], ["pruned", "warn"]]);
  function paramText(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "number") return C.fmt(v);
    return typeof v === "string" ? v : JSON.stringify(v);
  }
  function drawSweep(node, d) {
    var counts = Object.keys(d.counts).sort().map(function (k) { return d.counts[k] + " " + k; }).join(", ");
    node.appendChild(el("p", {"class": "hint", id: "sweep-summary"}, "sweep " + d.sweep + " (" + d.method +
      (d.metric.name ? ", " + d.metric.goal + " " + d.metric.name : "") + "): " + counts + " · " + d.storage));
    var best = d.best;
    node.appendChild(el("p", {id: "sweep-best"}, best ? "best: trial " + best.number + ", value " + C.fmt(best.value) +
      " (" + d.params.map(function (k) { return k + "=" + paramText(own(best.params, k)); }).join(" ") + ")" : "best: none yet (no complete trial)"));
    var t = el("table", {id: "sweep-trials"}), head = el("tr");
    ["trial", "state", "value", "steps"].concat(d.params).concat(["run", "reason"]).forEach(function (h, i) {
      head.appendChild(el("th", {"class": i === 0 || i === 2 || i === 3 ? "num" : ""}, h));
    });
    t.appendChild(head);
    d.trials.forEach(function (tr) {
      var row = el("tr", {"data-trial": String(tr.number), "data-state": tr.state, "class": best && best.number === tr.number ? "best" : ""});
      row.appendChild(el("td", {"class": "num"}, String(tr.number)));
      var st = el("td"); st.appendChild(el("span", {"class": "badge " + (STATE_BADGE.get(tr.state) || "bad")}, tr.state));
      row.appendChild(st);
      row.appendChild(el("td", {"class": "num"}, tr.value === null ? "–" : C.fmt(tr.value)));
      row.appendChild(el("td", {"class": "num"}, tr.steps === null || tr.steps === undefined ? "–" : String(tr.steps)));
      d.params.forEach(function (k) { row.appendChild(el("td", {"class": "mono"}, paramText(own(tr.params, k)))); });
      var run = el("td");
      if (tr.run) {
        var link = el("a", {href: "#", "class": "tm-go sweep-run", "data-run": tr.run, title: "show this run alone in the charts"},
                      S.labels[tr.run] || tr.run_id || tr.run);
        link.addEventListener("click", function (e) { e.preventDefault(); openRun(tr.run); });
        run.appendChild(link);
      } else if (tr.run_id) {
        run.appendChild(el("span", {"class": "hint", title: "its run is not under the served folders"}, tr.run_id));
      }
      row.appendChild(run);
      // a failed trial's last stderr lines (its traceback) on hover; the reason ends with the last
      row.appendChild(el("td", {"class": "reason", title: (tr.stderr || []).join("\n")}, tr.reason || ""));
      t.appendChild(row);
    });
    node.appendChild(t);
    node.appendChild(el("h3", {}, (d.metric.name || "value") + " against each parameter"));
    node.appendChild(el("p", {"class": "hint"}, "● complete · ○ pruned (its last value; the sampler counts it as worse than every complete trial) · failed trials have no value"));
    var grid = el("div", {"class": "sweep-scatters"}); node.appendChild(grid);
    d.params.forEach(function (k) { grid.appendChild(scatter(k, d.trials, best)); });
    node.appendChild(el("h3", {}, "Parameter importance for " + (d.metric.name || "the value")));
    node.appendChild(el("p", {"class": "hint method"}, d.importance_method));
    if (!d.importance.length) { node.appendChild(el("p", {"class": "hint"}, "no parameter varies over 3 or more trials with a value")); return; }
    var it = importanceTable("sweep-importance", "parameter", "importance", d.importance, function (imp) {
      var cell = el("td"), track = el("div", {"class": "imp-track"}), bar = el("div", {"class": "imp-bar"});
      bar.style.width = Math.round(100 * Math.min(1, imp.importance)) + "%";
      track.appendChild(bar); cell.appendChild(track);
      return cell;
    });
    node.appendChild(it);
  }
  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    var n = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    if (text !== undefined) n.textContent = text;
    return n;
  }
  /* One small scatter: the value of each complete and pruned trial against parameter
   * `key` (log x for positive numbers over two decades; categories evenly spaced). */
  function scatter(key, trials, best) {
    var W = 300, H = 190, L = 52, R = 10, T = 10, B = 34;
    var box = el("div", {"class": "panel sweep-scatter", "data-param": key});
    box.appendChild(el("div", {"class": "tm-chart-title"}, key));
    var pts = trials.filter(function (t) { return t.value !== null && (t.state === "complete" || t.state === "pruned") && own(t.params, key) !== undefined; });
    var plot = svg("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H});
    box.appendChild(plot);
    if (!pts.length) { box.appendChild(el("p", {"class": "hint"}, "no trial with a value yet")); return box; }
    var xs = pts.map(function (t) { return own(t.params, key); });
    var numeric = xs.every(function (v) { return typeof v === "number" && isFinite(v); });
    var cats = new Map(), fx;
    if (numeric) {
      var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs);
      var log = lo > 0 && hi / lo >= 100, f = log ? Math.log : function (v) { return v; };
      var a = f(lo), b = f(hi), span = b - a || 1;
      fx = function (v) { return L + 8 + (W - L - R - 16) * (b === a ? 0.5 : (f(v) - a) / span); };
      plot.appendChild(svg("text", {x: L, y: H - 6, "class": "tick"}, C.fmt(lo)));
      plot.appendChild(svg("text", {x: W - R, y: H - 6, "class": "tick", "text-anchor": "end"}, C.fmt(hi) + (log ? " (log)" : "")));
    } else {
      xs.forEach(function (v) { var k = paramText(v); if (!cats.has(k)) cats.set(k, cats.size); });
      var n = cats.size;
      fx = function (v) { return L + (W - L - R) * (cats.get(paramText(v)) + 0.5) / n; };
      cats.forEach(function (i, label) { plot.appendChild(svg("text", {x: L + (W - L - R) * (i + 0.5) / n, y: H - 6, "class": "tick", "text-anchor": "middle"}, label)); });
    }
    var ys = pts.map(function (t) { return t.value; });
    var ylo = Math.min.apply(null, ys), yhi = Math.max.apply(null, ys), yspan = yhi - ylo || 1;
    function fy(v) { return T + 6 + (H - T - B - 12) * (yhi === ylo ? 0.5 : 1 - (v - ylo) / yspan); }
    plot.appendChild(svg("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, "class": "axis"}));
    plot.appendChild(svg("line", {x1: L, y1: T, x2: L, y2: H - B, "class": "axis"}));
    plot.appendChild(svg("text", {x: L - 4, y: fy(yhi) + 4, "class": "tick", "text-anchor": "end"}, C.fmt(yhi)));
    if (yhi !== ylo) plot.appendChild(svg("text", {x: L - 4, y: fy(ylo) + 4, "class": "tick", "text-anchor": "end"}, C.fmt(ylo)));
    pts.forEach(function (t) {
      var cls = "pt " + t.state + (best && best.number === t.number ? " best" : "");
      var dot = svg("circle", {cx: fx(own(t.params, key)).toFixed(1), cy: fy(t.value).toFixed(1), r: 4.5, "class": cls, "data-trial": String(t.number)});
      dot.appendChild(svg("title", {}, "trial " + t.number + " (" + t.state + "): " + key + "=" + paramText(own(t.params, key)) +
        ", value " + C.fmt(t.value) + (t.reason ? " · " + t.reason : "")));
      plot.appendChild(dot);
    });
    return box;
  }

  // no run under the served folders yet: where it looked and how to log one; the view is
  // drawn again when the first run appears (loadRuns in the live loop)
  function emptyFolder(node) {
    var where = (S.roots || []).join(", ") || "the served folder";
    var box = el("div", {"class": "hint empty-folder"});
    box.appendChild(el("p", {}, "no runs under " + where + " yet. Log one into it:"));
    box.appendChild(el("pre", {"class": "mono"}, "import trackmux\nrun = trackmux.init(project=\"my-project\", dir=" +
      JSON.stringify((S.roots || [])[0] || "DIR") + ")\nrun.log({\"loss\": 0.5}, step=1)\nrun.finish()"));
    box.appendChild(el("p", {}, "or set TRACKMUX_DIR to this folder, or try `trackmux demo --dir " +
      ((S.roots || [])[0] || "DIR") + "`. Runs show here as they appear."));
    node.appendChild(box);
  }

  // ---- tabs and the live loop ---------------------------------------------------
  function show(tab, keysAsked, keepFocus) {
    S.tab = tab; S.findingsAsked = false; S.addKeys = null; S.sweepRefresh = null;
    if (!keepFocus) S.focus = null;
    S.charts.forEach(function (c) { if (c.handle) c.handle.destroy(); });
    S.charts = [];
    view().textContent = "";
    document.querySelectorAll("#tabs button").forEach(function (b) { b.classList.toggle("on", b.dataset.tab === tab); });
    document.getElementById("controls").style.display = (tab === "charts" || tab === "system") ? "" : "none";
    S.emptyShown = !S.runs.length && tab !== "sweeps";
    if (S.emptyShown) emptyFolder(view());
    else if (tab === "charts") chartGroups(function (p) { return p !== "system"; }, keysAsked);
    else if (tab === "system") chartGroups(function (p) { return p === "system"; });
    else if (tab === "compare") compareView();
    else if (tab === "histograms") histogramsView();
    else if (tab === "media") mediaView();
    else if (tab === "findings") findingsView();
    else if (tab === "samples") samplesView();
    else if (tab === "sweeps") sweepsView();
  }
  var ticks = 0;
  function live() {
    S.charts.forEach(tailChart);
    if (++ticks % 2 === 0) newKeys();
    if (ticks % 5 === 0 && S.tab === "sweeps" && S.sweepRefresh) S.sweepRefresh();
  }
  document.querySelectorAll("#tabs button").forEach(function (b) { b.addEventListener("click", function () { show(b.dataset.tab); }); });
  document.getElementById("xmode").addEventListener("change", function () { show(S.tab); });
  document.getElementById("filter").addEventListener("change", function () { show(S.tab); });
  document.getElementById("smoothing").addEventListener("input", function () {
    S.charts.forEach(function (c) { if (c.handle) c.handle.setSmoothing(smoothing()); });
  });
  ["yscale", "robust"].forEach(function (id) {
    document.getElementById(id).addEventListener("change", function () {
      var y = ymode();
      S.charts.forEach(function (c) { if (c.handle) c.handle.setYMode(y); });
    });
  });
  // #runs=all&filter=reward/mean opens with every run selected and one key (links, benchmark)
  var hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("filter")) document.getElementById("filter").value = hash.get("filter");
  // #runs=all: the keys of every run are asked at once, beside the run list, not after it
  var allKeys = hash.get("runs") === "all" && !hash.get("tab") ? api("/api/keys?runs=all") : null;
  loadRuns().then(function () {
    if (hash.get("runs") === "all") { S.selected = S.runs.map(function (r) { return r.id; }); renderRuns(); }
    show(hash.get("tab") || "charts", allKeys);
  });
  setInterval(live, 1000);
  setInterval(function () {
    loadRuns().then(function () { if (S.emptyShown && S.runs.length) show(S.tab); })
      .catch(function (e) { status("server unreachable: " + e.message); });
  }, 2000);
  window.trackmuxUI = {state: S, show: show, openFinding: openFinding, openRun: openRun};
})();
