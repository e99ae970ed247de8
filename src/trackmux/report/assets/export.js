/* The report (the frozen export of trackmux ui): draws the JSON embedded in the page (the
 * UI's API payloads plus per-run details) with the pieces the live UI uses
 * (window.trackmuxCharts). Every text from run data goes in by textContent. */
(function () {
  "use strict";
  var C = window.trackmuxCharts, el = C.el;
  var data = JSON.parse(document.getElementById("trackmux-data").textContent);
  var main = document.getElementById("export"), nav = document.getElementById("nav");
  // keyed by run ids and metric keys (user data): maps without a prototype (C.dict)
  var labels = C.dict(), colours = C.dict(), handles = C.dict(), cells = C.dict(), details = data.details || C.dict();
  var colourOf = C.colourKeeper();  // the same colour rule as the live page
  window.trackmuxExport = {data: data, charts: handles};
  data.runs.forEach(function (r) { labels[r.id] = r.label || r.name; colours[r.id] = colourOf(r.id); });
  main.textContent = "";

  function section(id, title) {
    var s = el("section", {id: id}); s.appendChild(el("h2", {}, title)); main.appendChild(s);
    var a = el("a", {href: "#" + id}, title); nav.appendChild(a);
    return {node: s, drop: function () { s.remove(); a.remove(); }};
  }
  function each(obj, fn) { Object.keys(obj || {}).forEach(function (k) { fn(k, obj[k]); }); }
  function runLine(rid, text) {
    var p = el("div", {"class": "hint"}); var dot = el("i", {"class": "dot"});
    dot.style.background = colours[rid]; p.appendChild(dot);
    p.appendChild(document.createTextNode(" " + labels[rid] + (text ? " · " + text : ""))); return p;
  }

  // the doctor's findings first: what went wrong, and where (marked on the charts)
  var findings = [];
  if (data.findings) {
    var fs = section("findings", "Doctor");
    var max = Math.max.apply(null, data.runs.map(function (r) { return r.last_step || 1; }));
    C.findings(fs.node, data.runs.map(function (r) { return {id: r.id, label: labels[r.id], findings: data.findings[r.id] || [], coverage: (data.coverage || {})[r.id] || null}; }), max,
               {open: openFinding});
    data.runs.forEach(function (r) { (data.findings[r.id] || []).forEach(function (f) { findings.push(f); }); });
    if (findings.length) fs.node.appendChild(el("p", {"class": "hint"}, "Onsets are marked on the charts of their keys (dashed lines)."));
  }

  // summary and health of each run
  var rs = section("runs", "Runs");
  var t = el("table", {"class": "tm-table runs"}), head = el("tr");
  ["run", "run id", "project", "state", "started", "duration", "last step", "events", "delivery"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
  t.appendChild(head);
  data.runs.forEach(function (r) {
    var d = details[r.id] || {}, tr = el("tr", {"data-run": labels[r.id]});
    var name = el("td"), dot = el("i", {"class": "dot"}); dot.style.background = colours[r.id];
    name.appendChild(dot); name.appendChild(document.createTextNode(" " + r.name)); tr.appendChild(name);
    tr.appendChild(el("td", {"class": "mono"}, d.run_id || ""));
    tr.appendChild(el("td", {}, r.project));
    var st = el("td"); st.appendChild(el("span", {"class": "badge " + (r.state === "finished" ? "ok" : r.state === "running" ? "live" : "bad")}, r.state)); tr.appendChild(st);
    tr.appendChild(el("td", {}, d.started || ""));
    tr.appendChild(el("td", {}, d.duration || ""));
    tr.appendChild(el("td", {"class": "num"}, r.last_step === null ? "" : String(r.last_step)));
    tr.appendChild(el("td", {"class": "num"}, String(r.events)));
    tr.appendChild(el("td", {}, r.backends.map(function (b) { return b.name + (b.pending ? " " + b.pending + " pending" : " ✓"); }).join(", ") || "spool only"));
    t.appendChild(tr);
    var problems = (d.problems || []).concat((r.damage || []).filter(function (p) { return (d.problems || []).join("\n").indexOf(p) < 0; }));
    problems.forEach(function (p) {
      var row = el("tr", {"class": "problem"}); row.appendChild(el("td", {colspan: 9, "class": "warning"}, p)); t.appendChild(row);
    });
  });
  rs.node.appendChild(t);

  /* A finding's onset, key or evidence leads to its chart, zoomed around the onset with
   * the evidence ringed, or to the sample browser of its key at that step. */
  function openFinding(f, rid, key) {
    key = key || (f.evidence && f.evidence.length && f.evidence[0].key) || (f.keys || [])[0] || null;
    var steps = [f.step].concat((f.evidence || []).map(function (e) { return e.step; }));
    var lo = Math.min.apply(null, steps), hi = Math.max.apply(null, steps);
    var last = (data.runs.filter(function (r) { return r.id === rid; })[0] || {}).last_step || hi;
    var pad = Math.max(5, Math.round(0.05 * last), Math.round(0.25 * (hi - lo)));
    var h = key && handles[key];
    if (h) {
      var ev = (f.evidence || []).filter(function (e) { return !e.key || e.key === key; });
      if (!ev.length) {  // no evidence given: the run's value at the onset
        var s = data.series[key], run = s && s.runs.filter(function (r) { return r.id === rid; })[0];
        if (run) for (var i = 0; i < s.x.length; i++) if (s.x[i] === f.step && run.y[i] !== null) ev.push({step: f.step, value: run.y[i]});
      }
      h.zoomTo(Math.max(0, lo - pad), hi + pad); h.setEvidence(ev);
      h.node.scrollIntoView({block: "center"});
      return;
    }
    var box = document.querySelector('.panel.samples[data-run="' + CSS.escape(rid) + '"][data-key="' + CSS.escape(key || "") + '"]');
    if (!box) return;
    box.scrollIntoView({block: "start"});
    var slider = box.querySelector(".tms-step");
    if (!slider) return;
    var steps2 = JSON.parse(box.getAttribute("data-steps") || "[]"), at = 0;
    steps2.forEach(function (s, i) { if (s <= f.step) at = i; });
    slider.value = String(at); slider.dispatchEvent(new Event("input"));
  }

  // metrics, grouped by prefix, all runs overlaid, onsets of findings on their keys
  var ms = section("metrics", "Metrics");
  var bar = el("div", {"class": "row"}), yscale = el("select", {id: "yscale"}), robust = el("input", {type: "checkbox", id: "robust"});
  yscale.appendChild(el("option", {value: "linear"}, "linear")); yscale.appendChild(el("option", {value: "log"}, "log"));
  robust.checked = true;
  bar.appendChild(el("label", {}, "y ")).appendChild(yscale);
  var rl = el("label", {}); rl.appendChild(robust); rl.appendChild(document.createTextNode(" clip outliers")); bar.appendChild(rl);
  ms.node.appendChild(bar);
  [yscale, robust].forEach(function (c) { c.addEventListener("change", function () {
    Object.keys(handles).forEach(function (k) { handles[k].setYMode({log: yscale.value === "log", robust: robust.checked}); });
  }); });
  if (!Object.keys(data.groups).length) ms.node.appendChild(el("p", {"class": "hint"}, "no metrics logged"));
  each(data.groups, function (prefix, keys) {
    var h = el("h3", {"class": "group", id: "metrics-" + prefix.replace(/[^A-Za-z0-9]/g, "-")}, prefix);
    ms.node.appendChild(h);
    var grid = el("div", {"class": "grid"}); ms.node.appendChild(grid);
    keys.forEach(function (key) {
      var s = data.series[key], cell = el("div", {"class": "panel"}); grid.appendChild(cell);
      var marks = findings.filter(function (f) { return !f.keys || !f.keys.length || f.keys.indexOf(key) >= 0; });
      handles[key] = C.lineChart(cell, {key: key, x_mode: s.x_mode, runs: s.runs.map(function (r) { return {id: r.id, x: s.x, y: r.y, nonfinite: r.nonfinite}; })},
        {labels: labels, colours: colours, findings: marks, width: chartWidth(cell)});
      cells[key] = cell;
    });
  });
  // a chart fills its card (the grid's cards are 580 px and wider), and follows it when the
  // window is resized
  function chartWidth(cell) { return Math.max(260, Math.floor(cell.clientWidth || 580) - 18); }
  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      Object.keys(handles).forEach(function (k) {
        var plot = handles[k].plot, width = chartWidth(cells[k]);
        if (plot && plot.width !== width) plot.setSize({width: width, height: plot.height});
      });
    }, 150);
  });

  var hs = section("histograms", "Histograms"), any = false;
  each(data.histograms, function (rid, byKey) {
    each(byKey, function (key, items) {
      any = true; var p = el("div", {"class": "panel"}); hs.node.appendChild(p);
      p.appendChild(runLine(rid));
      C.histogramChart(p, key, items);
    });
  });
  if (!any) hs.drop();

  var ts = section("tables", "Tables"); any = false;
  each(data.tables, function (rid, byKey) {
    each(byKey, function (key, items) {
      if (!items.length) return; any = true;
      var shown = items.length < items[0].logged ? ", " + items.length + " of " + items[0].logged + " logged tables shown" : ", " + items.length + " logged";
      ts.node.appendChild(el("h3", {}, key)).appendChild(el("span", {"class": "hint"}, " " + labels[rid] + shown));
      var p = el("div", {"class": "panel"}); ts.node.appendChild(p);
      items.slice().reverse().forEach(function (tab, i) {
        var d = el("details", i === 0 ? {open: ""} : {}); d.appendChild(el("summary", {}, "step " + tab.step));
        C.table(d, tab); p.appendChild(d);
      });
    });
  });
  if (!any) ts.drop();

  // each embedded step is gzip'd JSON, decompressed when the step slider reaches it
  function unpack(b64) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }
  if (data.samples && window.trackmuxSamples) {
    var ss = section("samples", "Samples"); any = false;
    each(data.samples, function (rid, byKey) {
      each(byKey, function (key, packed) {
        var steps = Object.keys(packed.steps).map(Number).sort(function (a, b) { return a - b; });
        if (!steps.length) return; any = true;
        var box = el("div", {"class": "panel samples", "data-key": key, "data-run": rid, "data-steps": JSON.stringify(steps)}); ss.node.appendChild(box);
        box.appendChild(el("h3", {}, key + " · " + labels[rid] + (steps.length < packed.total ? " · " + steps.length + " of " + packed.total + " steps embedded" : "")));
        box.appendChild(el("p", {"class": "hint"}, "first samples of each step; every sample of any step: trackmux samples " + ((details[rid] || {}).run_id || "") + " --key " + key + " --step N"));
        var holder = el("div", {"class": "sample-browser"}); box.appendChild(holder);
        var load = function (step) {
          var b64 = packed.steps[String(step)];
          return b64 ? unpack(b64) : Promise.reject(new Error("step " + step + " is not in this report"));
        };
        // the ledger's own browser draws the step slider over the embedded steps
        load(steps[steps.length - 1]).then(function (last) {
          window.trackmuxSamples.mount(holder, last, {steps: steps, load: load});
          holder.setAttribute("data-ready", "1");
        }).catch(function (e) { holder.textContent = "samples could not be read: " + e.message; });
      });
    });
    if (!any) ss.drop();
  }

  var is = section("images", "Images"); any = false;
  each(data.images, function (rid, byKey) {
    each(byKey, function (key, imgs) {
      imgs = imgs.filter(Boolean); if (!imgs.length) return; any = true;
      is.node.appendChild(el("h3", {}, key)).appendChild(el("span", {"class": "hint"}, " " + labels[rid]));
      var gallery = el("div", {"class": "gallery"}); is.node.appendChild(gallery);
      imgs.slice().reverse().forEach(function (img) {
        var caption = key + " · step " + img.step + (img.caption ? " · " + img.caption : "");
        var f = el("figure"); f.appendChild(el("img", {src: img.src, alt: caption, width: img.width, height: img.height}));
        f.appendChild(el("figcaption", {}, caption)); gallery.appendChild(f);
      });
    });
  });
  if (!any) is.drop();

  var xs = section("text", "Text"); any = false;
  each(details, function (rid, d) {
    (d.texts || []).forEach(function (tx) {
      any = true; var det = el("details"); det.appendChild(el("summary", {}, tx.key + " · step " + tx.step + " · " + labels[rid]));
      det.appendChild(el("pre", {}, tx.text)); xs.node.appendChild(det);
    });
    if (d.texts_total > (d.texts || []).length) xs.node.appendChild(el("p", {"class": "hint"}, labels[rid] + ": the last " + d.texts.length + " of " + d.texts_total + " texts (trackmux show has all)"));
  });
  if (!any) xs.drop();

  var as = section("artifacts", "Artifacts"); any = false;
  each(details, function (rid, d) {
    (d.artifacts || []).forEach(function (a) {
      any = true;
      as.node.appendChild(el("h3", {}, a.name)).appendChild(el("span", {"class": "hint"}, " " + a.type + " · " + labels[rid] + " · step " + a.step + " · from " + a.source));
      C.table(as.node, {columns: ["file", "bytes", "sha256", "kept"], offset: 0, total: a.files.length,
        rows: a.files.map(function (f) { return [f.path, f.size, f.sha256, f.kept]; })});
    });
  });
  if (!any) as.drop();

  if (data.compare && data.compare.config && data.compare.config.length) {
    var cs = section("config", "Config");
    if (data.runs.length > 1) cs.node.appendChild(el("p", {"class": "hint"}, "Rows where the runs differ are highlighted."));
    var ct = el("table", {"class": "tm-table config"}), ch = el("tr");
    ch.appendChild(el("th", {}, "key"));
    data.compare.runs.forEach(function (r) { ch.appendChild(el("th", {}, labels[r.id])); });
    ct.appendChild(ch);
    data.compare.config.forEach(function (row) {
      var tr = el("tr", row.differs && data.runs.length > 1 ? {"class": "diff"} : {});
      tr.appendChild(el("td", {"class": "mono"}, row.key));
      row.values.forEach(function (v) { tr.appendChild(el("td", {"class": "mono"}, v === null ? "" : typeof v === "string" ? v : JSON.stringify(v))); });
      ct.appendChild(tr);
    });
    cs.node.appendChild(ct);
  }

  var withProv = data.runs.filter(function (r) { return (details[r.id] || {}).provenance; });
  if (withProv.length) {
    var ps = section("provenance", "Provenance");
    ps.node.appendChild(el("p", {"class": "hint"}, "What produced each run (recorded at init; trackmux diff A B compares two)."));
    var keys = [];
    data.runs.forEach(function (r) { var p = (details[r.id] || {}).provenance; if (p) Object.keys(p.rows).forEach(function (k) { if (keys.indexOf(k) < 0) keys.push(k); }); });
    var pt = el("table", {"class": "tm-table provenance"}), ph = el("tr");
    ph.appendChild(el("th", {}, "field")); data.runs.forEach(function (r) { ph.appendChild(el("th", {}, labels[r.id])); });
    pt.appendChild(ph);
    keys.forEach(function (k) {
      var vals = data.runs.map(function (r) {
        var d = details[r.id] || {}, p = d.provenance;
        if (!p && k === "code" && d.provenance_missing) return d.provenance_missing;  // why, not dashes
        return p && Object.prototype.hasOwnProperty.call(p.rows, k) ? p.rows[k] : "—";
      });
      var differs = data.runs.length > 1 && vals.some(function (v) { return v !== vals[0]; });
      var tr = el("tr", differs ? {"class": "diff"} : {}); tr.appendChild(el("td", {"class": "mono"}, k));
      vals.forEach(function (v) { tr.appendChild(el("td", {"class": "mono"}, v)); }); pt.appendChild(tr);
    });
    ps.node.appendChild(pt);
    withProv.forEach(function (r) {
      var p = details[r.id].provenance; if (!p.diff) return;
      var det = el("details"); det.appendChild(el("summary", {}, "uncommitted diff of " + labels[r.id] + " (" + p.diff_chars + " characters)"));
      det.appendChild(el("pre", {}, p.diff)); ps.node.appendChild(det);
    });
  }

  var ds = section("delivery", "Delivery");
  ds.node.appendChild(el("p", {"class": "hint"}, "Events each backend has acknowledged, against the last event in the spool."));
  data.runs.forEach(function (r) {
    var d = details[r.id] || {delivery: []};
    ds.node.appendChild(el("h3", {}, labels[r.id]));
    var p = el("div", {"class": "panel delivery", "data-run": labels[r.id]}); ds.node.appendChild(p);
    if (!d.delivery.length) { p.appendChild(el("p", {"class": "hint"}, "spool only: no backend was configured for this run")); return; }
    C.table(p, {columns: ["backend", "state", "acked / last seq", "remote id", "last ack"], offset: 0, total: d.delivery.length,
      rows: d.delivery.map(function (b) { return [b.backend, b.state, b.acked + " / " + b.last, b.remote_id || "", b.updated]; })});
    if (d.sync) p.appendChild(el("p", {"class": "hint"}, "Deliver the rest with " + d.sync));
  });
  document.body.setAttribute("data-drawn", "1");
})();
