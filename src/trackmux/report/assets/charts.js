/* trackmux drawing pieces, shared by the live UI (trackmux ui) and its frozen export.
 * Each function draws one payload of the UI's API into an element; the data shape is the
 * same whether it came from the server or was embedded in a page.
 * Line charts use uPlot (MIT, vendored in assets/uplot with its license). */
(function () {
  "use strict";
  var PALETTE = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777",
                 "#0891b2", "#65a30d"];
  var SEVERITY = {info: "#0891b2", warning: "#d97706", critical: "#dc2626"};

  function colour(i) { return PALETTE[i % PALETTE.length]; }

  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "";
    var a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1e6 || a < 1e-3) return v.toExponential(2);
    if (a >= 1000) return Math.round(v).toLocaleString("en-US");
    return String(+v.toPrecision(4));
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in (attrs || {})) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /* Exponential moving average with TensorBoard's debiasing; nulls stay gaps. */
  function smooth(ys, weight) {
    if (!weight) return ys;
    var out = new Array(ys.length), last = 0, n = 0;
    for (var i = 0; i < ys.length; i++) {
      var y = ys[i];
      if (y === null || y === undefined) { out[i] = null; continue; }
      last = last * weight + (1 - weight) * y; n++;
      out[i] = last / (1 - Math.pow(weight, n));
    }
    return out;
  }

  /* Runs' points (each {x: [...], y: [...]}) on one sorted x array, as uPlot wants. */
  function join(runs) {
    // the server already put every run on one x array: use it as it is
    if (runs.length && runs.every(function (r) { return r.x === runs[0].x; })) {
      return [runs[0].x].concat(runs.map(function (r) { return r.y; }));
    }
    var seen = new Map(), xs = [];
    runs.forEach(function (r) {
      for (var i = 0; i < r.x.length; i++) if (!seen.has(r.x[i])) { seen.set(r.x[i], 0); xs.push(r.x[i]); }
    });
    xs.sort(function (a, b) { return a - b; });
    xs.forEach(function (x, i) { seen.set(x, i); });
    var ys = runs.map(function (r) {
      var y = new Array(xs.length).fill(null);
      for (var i = 0; i < r.x.length; i++) y[seen.get(r.x[i])] = r.y[i];
      return y;
    });
    return [xs].concat(ys);
  }

  /* Vertical marks at the findings' onset steps (only on a step axis). */
  function findingsPlugin(getFindings) {
    return {hooks: {draw: function (u) {
      var marks = getFindings() || [];
      var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
      marks.forEach(function (f) {
        var x = u.valToPos(f.step, "x", true);
        if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
        ctx.save();
        ctx.strokeStyle = SEVERITY[f.severity] || "#6b7280";
        ctx.setLineDash([4, 3]); ctx.lineWidth = 1.5 * devicePixelRatio;
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
        ctx.restore();
      });
    }}};
  }

  /* A line chart of one metric for several runs.
   * payload: {key, x_mode, runs: [{id, x: [...], y: [...]}]}; opts: {labels: {id: name},
   * colours: {id: colour}, smoothing: 0..0.99, findings: [{step, severity}], onZoom(lo, hi),
   * width, height}. Returns a handle with update(payload) and destroy(). */
  function lineChart(node, payload, opts) {
    opts = opts || {};
    var state = {payload: payload, findings: opts.findings || []};
    var wrap = el("div", {"class": "tm-chart", "data-key": payload.key});
    var title = el("div", {"class": "tm-chart-title"}, payload.key);
    wrap.appendChild(title);
    node.appendChild(wrap);
    function note(p) {  // values JSON cannot carry are gaps in the line, and said so
      var bad = 0, drawn = false;
      p.runs.forEach(function (r) {
        bad += r.nonfinite || 0;
        for (var i = 0; !drawn && i < r.y.length; i++) if (r.y[i] !== null) drawn = true;
      });
      title.textContent = payload.key + (bad ? " · " + bad + " non-finite value" + (bad > 1 ? "s" : "") + " not drawn" : "") +
        (drawn ? "" : " · no finite values");
    }
    note(payload);
    var timeAxis = payload.x_mode === "time";
    function data() {
      var joined = join(state.payload.runs);
      var w = opts.smoothing || 0;
      for (var i = 1; i < joined.length; i++) joined[i] = smooth(joined[i], w);
      return joined;
    }
    var series = [{label: payload.x_mode === "relative" ? "seconds" : payload.x_mode,
                   value: function (u, v) { return v === null ? "" : (timeAxis ? new Date(v * 1000).toLocaleTimeString() : fmt(v)); }}];
    // many runs: 1 px lines. A canvas strokes a hairline on its fast path: 100 runs draw
    // in tens of ms instead of hundreds (docs/performance.md), and stay legible overlaid.
    var many = payload.runs.length > 12;
    payload.runs.forEach(function (r, i) {
      series.push({label: (opts.labels || {})[r.id] || r.id,
                   stroke: (opts.colours || {})[r.id] || colour(i), width: many ? 1 : 1.5,
                   spanGaps: false, points: {show: false},
                   value: function (u, v) { return fmt(v); }});
    });
    var zoomed = false;
    // many runs: no 100-row legend; the values nearest the cursor go in one line instead
    var readout = el("div", {"class": "tm-tip tm-readout"});
    function showNearest(u) {
      var i = u.cursor.idx;
      if (i === null || i === undefined || u.cursor.top < 0) { readout.textContent = ""; return; }
      var cursorVal = u.posToVal(u.cursor.top, "y"), near = [];
      for (var s = 1; s < u.series.length; s++) {
        var v = u.data[s][i];
        if (v !== null && v !== undefined) near.push([Math.abs(v - cursorVal), u.series[s].label, v]);
      }
      near.sort(function (a, b) { return a[0] - b[0]; });
      readout.textContent = series[0].label + " " + series[0].value(u, u.data[0][i]) + " · " +
        near.slice(0, 6).map(function (n) { return n[1] + " " + fmt(n[2]); }).join(" · ") +
        (near.length > 6 ? " · " + (near.length - 6) + " more" : "");
    }
    var uopts = {
      width: opts.width || 560, height: opts.height || 260, series: series,
      scales: {x: {time: timeAxis}},
      axes: [{}, {values: function (u, vals) { return vals.map(fmt); }, size: 60}],
      cursor: {drag: {x: true, y: false}},
      legend: {show: !many, live: true},
      plugins: [findingsPlugin(function () { return payload.x_mode === "step" ? state.findings : []; })],
      hooks: {setCursor: many ? [showNearest] : [], setSelect: [function (u) {
        if (u.select.width < 4) return;
        var lo = u.posToVal(u.select.left, "x"), hi = u.posToVal(u.select.left + u.select.width, "x");
        zoomed = true;
        if (opts.onZoom) opts.onZoom(lo, hi);
      }]}
    };
    var plot = new uPlot(uopts, data(), wrap);
    if (many) wrap.appendChild(readout);
    wrap.addEventListener("dblclick", function () {
      if (zoomed && opts.onZoom) { zoomed = false; opts.onZoom(null, null); }
    });
    return {
      plot: plot, node: wrap,
      update: function (p, keepScale) {
        state.payload = p; note(p); plot.setData(data(), !keepScale);
      },
      setFindings: function (f) { state.findings = f || []; plot.redraw(); },
      findings: function () { return state.findings; },
      setSmoothing: function (w) { opts.smoothing = w; plot.setData(data(), false); },
      zoomed: function () { return zoomed; },
      destroy: function () { plot.destroy(); wrap.remove(); }
    };
  }

  function axesFor(ctx, box, xr, yr, xLabel, yLabel) {
    ctx.fillStyle = "#6b7280"; ctx.font = "11px system-ui, sans-serif";
    ctx.strokeStyle = "#e5e7eb";
    for (var i = 0; i <= 4; i++) {
      var fy = box.top + box.h * i / 4, fx = box.left + box.w * i / 4;
      ctx.beginPath(); ctx.moveTo(box.left, fy); ctx.lineTo(box.left + box.w, fy); ctx.stroke();
      ctx.fillText(fmt(yr[1] - (yr[1] - yr[0]) * i / 4), 2, fy + 4);
      ctx.fillText(fmt(xr[0] + (xr[1] - xr[0]) * i / 4), fx - 10, box.top + box.h + 14);
    }
    ctx.fillStyle = "#1f2937";
    ctx.fillText(xLabel + " →", box.left + box.w - 120, box.top + box.h + 28);
    ctx.fillText("↑ " + yLabel, box.left + 4, box.top - 6);
  }

  function range(values) {
    var lo = Infinity, hi = -Infinity;
    values.forEach(function (v) { if (v !== null && isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    if (!isFinite(lo)) return [0, 1];
    if (hi === lo) { hi += Math.abs(lo) * 0.1 || 1; lo -= Math.abs(lo) * 0.1 || 1; }
    return [lo, hi];
  }

  /* One metric against another as a path per run (reward vs KL); hover names the step.
   * payload: {x_key, y_key, runs: [{id, step, x, y}]}. */
  function pathChart(node, payload, opts) {
    opts = opts || {};
    var W = opts.width || 560, H = opts.height || 360;
    var wrap = el("div", {"class": "tm-path", "data-x": payload.x_key, "data-y": payload.y_key});
    var canvas = el("canvas", {width: W, height: H});
    var tip = el("div", {"class": "tm-tip"});
    wrap.appendChild(canvas); wrap.appendChild(tip); node.appendChild(wrap);
    var ctx = canvas.getContext("2d");
    var box = {left: 60, top: 20, w: W - 80, h: H - 60};
    var xr = range([].concat.apply([], payload.runs.map(function (r) { return r.x; })));
    var yr = range([].concat.apply([], payload.runs.map(function (r) { return r.y; })));
    function px(v) { return box.left + (v - xr[0]) / (xr[1] - xr[0]) * box.w; }
    function py(v) { return box.top + (1 - (v - yr[0]) / (yr[1] - yr[0])) * box.h; }
    axesFor(ctx, box, xr, yr, payload.x_key, payload.y_key);
    var pts = [];
    payload.runs.forEach(function (r, i) {
      var c = (opts.colours || {})[r.id] || colour(i);
      ctx.strokeStyle = c; ctx.lineWidth = 1.4; ctx.beginPath();
      var open = false;
      for (var j = 0; j < r.x.length; j++) {
        if (r.x[j] === null || r.y[j] === null) { open = false; continue; }
        var X = px(r.x[j]), Y = py(r.y[j]);
        if (open) ctx.lineTo(X, Y); else ctx.moveTo(X, Y);
        open = true;
        pts.push({X: X, Y: Y, run: (opts.labels || {})[r.id] || r.id, step: r.step[j], x: r.x[j], y: r.y[j]});
      }
      ctx.stroke();
      if (r.x.length) { ctx.fillStyle = c; ctx.beginPath(); ctx.arc(px(r.x[r.x.length - 1]), py(r.y[r.y.length - 1]), 3.5, 0, 7); ctx.fill(); }
    });
    canvas.addEventListener("mousemove", function (ev) {
      var rect = canvas.getBoundingClientRect(), mx = ev.clientX - rect.left, my = ev.clientY - rect.top;
      var best = null, bd = 400;
      pts.forEach(function (p) { var d = (p.X - mx) * (p.X - mx) + (p.Y - my) * (p.Y - my); if (d < bd) { bd = d; best = p; } });
      tip.textContent = best ? best.run + " · step " + best.step + " · " + payload.x_key + " " + fmt(best.x) + " · " + payload.y_key + " " + fmt(best.y) : "";
    });
    return {node: wrap, points: pts.length};
  }

  /* Histograms over steps as a heatmap: x the logged steps, y the value range, colour the
   * share of that step's values in the bin. items: [{step, counts, edges}]. */
  function histogramChart(node, key, items, opts) {
    opts = opts || {};
    var W = opts.width || 560, H = opts.height || 260;
    var wrap = el("div", {"class": "tm-hist", "data-key": key});
    wrap.appendChild(el("div", {"class": "tm-chart-title"}, key + " · " + items.length + " steps"));
    var canvas = el("canvas", {width: W, height: H});
    var tip = el("div", {"class": "tm-tip"});
    wrap.appendChild(canvas); wrap.appendChild(tip); node.appendChild(wrap);
    var ctx = canvas.getContext("2d");
    var box = {left: 60, top: 20, w: W - 80, h: H - 60};
    var lo = Infinity, hi = -Infinity;
    items.forEach(function (h) { if (h.edges.length) { lo = Math.min(lo, h.edges[0]); hi = Math.max(hi, h.edges[h.edges.length - 1]); } });
    if (!isFinite(lo)) { ctx.fillText("no finite values", 20, 40); return {node: wrap}; }
    if (hi === lo) hi = lo + 1;
    var steps = items.map(function (h) { return h.step; });
    axesFor(ctx, box, [steps[0], steps[steps.length - 1]], [lo, hi], "step", key);
    var colW = box.w / items.length;
    items.forEach(function (h, i) {
      var total = h.counts.reduce(function (a, b) { return a + b; }, 0) || 1;
      var peak = Math.max.apply(null, h.counts) / total || 1;
      for (var b = 0; b < h.counts.length; b++) {
        if (!h.counts[b]) continue;
        var y0 = box.top + (1 - (h.edges[b + 1] - lo) / (hi - lo)) * box.h;
        var y1 = box.top + (1 - (h.edges[b] - lo) / (hi - lo)) * box.h;
        var a = h.counts[b] / total / peak;
        ctx.fillStyle = "rgba(37, 99, 235, " + (0.08 + 0.92 * a).toFixed(3) + ")";
        ctx.fillRect(box.left + i * colW, y0, Math.max(colW, 1), Math.max(y1 - y0, 1));
      }
    });
    canvas.addEventListener("mousemove", function (ev) {
      var rect = canvas.getBoundingClientRect(), i = Math.floor((ev.clientX - rect.left - box.left) / colW);
      var h = items[i];
      tip.textContent = h ? "step " + h.step + " · n=" + h.count + (h.nonfinite ? " · non-finite " + h.nonfinite : "") : "";
    });
    return {node: wrap};
  }

  /* A table payload {columns, rows, offset, total}: numbers right-aligned, text escaped
   * by construction (textContent). */
  function table(node, payload) {
    var t = el("table", {"class": "tm-table"});
    var head = el("tr");
    payload.columns.forEach(function (c) { head.appendChild(el("th", {}, c)); });
    var thead = el("thead"); thead.appendChild(head); t.appendChild(thead);
    var body = el("tbody");
    payload.rows.forEach(function (row) {
      var tr = el("tr");
      row.forEach(function (v) {
        var num = typeof v === "number";
        tr.appendChild(el("td", num ? {"class": "num"} : {}, v === null ? "" : (num ? fmt(v) : String(v))));
      });
      body.appendChild(tr);
    });
    t.appendChild(body); node.appendChild(t);
    if (payload.total > payload.rows.length) {
      var more = el("p", {"class": "hint"}, "rows " + (payload.offset + 1) + ".." +
        (payload.offset + payload.rows.length) + " of " + payload.total);
      if (payload.next) {  // the report's pages beside it (report/table_pages.py)
        more.appendChild(document.createTextNode(" · "));
        more.appendChild(el("a", {href: payload.next}, "next page →"));
      }
      node.appendChild(more);
    }
    return t;
  }

  /* The doctor's findings on a step timeline, one track per run, and as a list.
   * runs: [{id, label, findings: [{rule, severity, step, keys, message}]}]. */
  function findings(node, runs, maxStep) {
    var box = el("div", {"class": "tm-findings"});
    runs.forEach(function (r) {
      var track = el("div", {"class": "tm-track"});
      track.appendChild(el("span", {"class": "tm-track-label"}, r.label));
      var line = el("div", {"class": "tm-track-line"});
      r.findings.forEach(function (f) {
        var m = el("span", {"class": "tm-mark " + f.severity, title: f.rule + " at step " + f.step + ": " + f.message});
        m.style.left = (100 * f.step / Math.max(maxStep || 1, 1)) + "%";
        line.appendChild(m);
      });
      track.appendChild(line); box.appendChild(track);
      var list = el("ul", {"class": "tm-finding-list"});
      r.findings.forEach(function (f) {
        var li = el("li", {"class": "finding " + f.severity});
        li.appendChild(el("b", {}, f.severity + " · " + f.rule + " · step " + f.step + " "));
        li.appendChild(el("span", {}, f.message));
        if (f.keys && f.keys.length) li.appendChild(el("span", {"class": "hint"}, " (" + f.keys.join(", ") + ")"));
        list.appendChild(li);
      });
      if (!r.findings.length) list.appendChild(el("li", {"class": "hint"}, r.label + ": no findings"));
      box.appendChild(list);
    });
    node.appendChild(box);
    return box;
  }

  window.trackmuxCharts = {PALETTE: PALETTE, colour: colour, fmt: fmt, smooth: smooth,
    join: join, lineChart: lineChart, pathChart: pathChart,
    histogramChart: histogramChart, table: table, findings: findings, el: el};
})();
