/* The frozen export: draws the JSON embedded in the page (the UI's API payloads) with
 * the same pieces the live UI uses (window.trackmuxCharts). */
(function () {
  "use strict";
  var C = window.trackmuxCharts, el = C.el;
  var data = JSON.parse(document.getElementById("trackmux-data").textContent);
  var main = document.getElementById("export");
  var labels = {}, colours = {}, handles = {};
  window.trackmuxExport = {data: data, charts: handles};
  data.runs.forEach(function (r, i) { labels[r.id] = r.name; colours[r.id] = C.colour(i); });

  function section(id, title) {
    var s = el("section", {id: id}); s.appendChild(el("h2", {}, title)); main.appendChild(s); return s;
  }
  var runs = section("runs", "Runs");
  C.table(runs, {columns: ["run", "project", "state", "last step", "events", "delivery"],
    rows: data.runs.map(function (r) {
      return [r.name, r.project, r.state, r.last_step, r.events, r.backends.map(function (b) {
        return b.name + (b.pending ? " " + b.pending + " pending" : " ✓"); }).join(", ") || "spool only"];
    }), offset: 0, total: data.runs.length});

  var findings = [];
  if (data.findings) {
    var fs = section("findings", "Findings");
    var max = Math.max.apply(null, data.runs.map(function (r) { return r.last_step || 1; }));
    C.findings(fs, data.runs.map(function (r) { return {id: r.id, label: r.name, findings: data.findings[r.id] || []}; }), max);
    data.runs.forEach(function (r) { (data.findings[r.id] || []).forEach(function (f) { findings.push(f); }); });
  }

  var metrics = section("metrics", "Metrics");
  Object.keys(data.groups).forEach(function (prefix) {
    metrics.appendChild(el("h3", {"class": "group"}, prefix));
    var grid = el("div", {"class": "grid"}); metrics.appendChild(grid);
    data.groups[prefix].forEach(function (key) {
      var s = data.series[key], cell = el("div", {"class": "panel"}); grid.appendChild(cell);
      handles[key] = C.lineChart(cell, {key: key, x_mode: s.x_mode, runs: s.runs.map(function (r) { return {id: r.id, x: s.x, y: r.y}; })},
        {labels: labels, colours: colours, findings: findings, width: 560});
    });
  });

  var any = false, hs = section("histograms", "Histograms");
  Object.keys(data.histograms).forEach(function (rid) {
    Object.keys(data.histograms[rid]).forEach(function (key) {
      any = true; var p = el("div", {"class": "panel"}); hs.appendChild(p);
      p.appendChild(el("div", {"class": "hint"}, labels[rid]));
      C.histogramChart(p, key, data.histograms[rid][key]);
    });
  });
  if (!any) hs.remove();

  var ts = section("tables", "Tables"); any = false;
  Object.keys(data.tables).forEach(function (rid) {
    Object.keys(data.tables[rid]).forEach(function (key) {
      data.tables[rid][key].forEach(function (t) {
        if (!t) return; any = true;
        ts.appendChild(el("h3", {}, key + " · step " + t.step + " · " + labels[rid]));
        var p = el("div", {"class": "panel"}); ts.appendChild(p); C.table(p, t);
      });
    });
  });
  if (!any) ts.remove();

  var is = section("images", "Images"); any = false;
  Object.keys(data.images).forEach(function (rid) {
    Object.keys(data.images[rid]).forEach(function (key) {
      data.images[rid][key].forEach(function (img) {
        if (!img) return; any = true;
        var f = el("figure"); var i = el("img", {src: img.src, alt: key});
        f.appendChild(i); f.appendChild(el("figcaption", {}, key + " · step " + img.step + (img.caption ? " · " + img.caption : "") + " · " + labels[rid]));
        is.appendChild(f);
      });
    });
  });
  if (!any) is.remove();

  if (data.samples && window.trackmuxSamples) {
    var ss = section("samples", "Samples"); any = false;
    Object.keys(data.samples).forEach(function (rid) {
      Object.keys(data.samples[rid]).forEach(function (key) {
        var byStep = data.samples[rid][key], steps = Object.keys(byStep).map(Number).sort(function (a, b) { return a - b; });
        if (!steps.length) return; any = true;
        var box = el("div", {"class": "panel samples", "data-key": key}); ss.appendChild(box);
        var last = byStep[String(steps[steps.length - 1])], all = (last.steps || steps).length;
        box.appendChild(el("h3", {}, key + " · " + labels[rid] + (steps.length < all ? " · " + steps.length + " of " + all + " steps embedded" : "")));
        var holder = el("div", {"class": "sample-browser"}); box.appendChild(holder);
        // the ledger's own browser draws the step slider over the embedded steps
        window.trackmuxSamples.mount(holder, last, {
          steps: steps, load: function (step) { return Promise.resolve(byStep[String(step)]); }});
      });
    });
    if (!any) ss.remove();
  }

  if (data.compare && data.compare.config && data.runs.length > 1) {
    var cs = section("config", "Config differences");
    var diff = data.compare.config.filter(function (r) { return r.differs; });
    C.table(cs, {columns: ["key"].concat(data.compare.runs.map(function (r) { return labels[r.id]; })),
      rows: diff.map(function (r) { return [r.key].concat(r.values); }), offset: 0, total: diff.length});
  }
})();
