/* trackmux drawing pieces, shared by the live UI (trackmux ui) and its frozen export.
 * Each function draws one payload of the UI's API into an element; the data shape is the
 * same whether it came from the server or was embedded in a page.
 * Line charts use uPlot (MIT, vendored in assets/uplot with its license). */
(function () {
  "use strict";
  // twelve colours any two of which tell apart (CIELAB distance >= 31; no two blues, no
  // two violets): a run's colour is one of them whichever slot its id hashes to
  // run colours: none near a severity's (SEVERITY: the onset lines and marks of findings),
  // so a run drawn in red never hides its own critical onset (report/charts.py: the same)
  // The first four (the runs of a usual comparison, in order in the static report) are
  // the farthest apart.
  var PALETTE = ["#2563eb", "#16a34a", "#86198f", "#111827", "#f472b6", "#14b8a6",
                 "#854d0e", "#7c3aed", "#84cc16", "#a3a3a3", "#9d174d", "#1e3a8a"];
  var SEVERITY = new Map([["info", "#0891b2"], ["warning", "#d97706"], ["critical", "#dc2626"]]);

  function colour(i) { return PALETTE[i % PALETTE.length]; }

  /* A run's colour by its id, kept for as long as the page lives: each id's preferred slot
   * is a hash of the id, the next free one when taken, so a run that appears (or moves in
   * the list) changes no other run's colour. Returns function (id) -> colour. */
  function colourKeeper() {
    var given = new Map(), used = new Map();
    return function (id) {
      id = String(id);
      if (given.has(id)) return given.get(id);
      var h = 2166136261;
      for (var i = 0; i < id.length; i++) { h ^= id.charCodeAt(i); h = Math.imul(h, 16777619) >>> 0; }
      var slot = h % PALETTE.length, round = Math.floor(given.size / PALETTE.length);
      for (var k = 0; k < PALETTE.length && (used.get(slot) || 0) > round; k++) slot = (slot + 1) % PALETTE.length;
      used.set(slot, (used.get(slot) || 0) + 1);
      given.set(id, PALETTE[slot]);
      return PALETTE[slot];
    };
  }

  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "";
    var a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1e6 || a < 1e-3) return v.toExponential(2);
    if (a >= 1000) return Math.round(v).toLocaleString("en-US");
    return String(+v.toPrecision(4));
  }

  /* An axis label: short at any size (125k, 3.2M, 1.5e-4), so no axis clips it. */
  function tick(v) {
    if (v === null || v === undefined || !isFinite(v)) return "";
    var a = Math.abs(v);
    if (a === 0) return "0";
    var units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e5, "k"]];
    for (var i = 0; i < units.length; i++) {
      if (a >= units[i][0]) {
        var d = units[i][1] === "k" ? 1e3 : units[i][0];
        return a >= 1e15 ? v.toExponential(1) : String(+(v / d).toPrecision(3)) + units[i][1];
      }
    }
    if (a < 1e-3) return v.toExponential(1);
    if (a >= 1000) return Math.round(v).toLocaleString("en-US");
    return String(+v.toPrecision(4));
  }

  /* An axis's labels in one unit, that of its largest value (25k 50k ... 125k, never
   * 75,000 beside 100k); below 100k each value is labelled as ``tick`` does. */
  function ticks(vals) {
    var top = 0, units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e5, "k"]];
    vals.forEach(function (v) { if (v !== null && v !== undefined && isFinite(v)) top = Math.max(top, Math.abs(v)); });
    for (var i = 0; i < units.length && top < 1e15; i++) {
      if (top >= units[i][0]) {
        var d = units[i][1] === "k" ? 1e3 : units[i][0], unit = units[i][1];
        return vals.map(function (v) {
          if (v === null || v === undefined || !isFinite(v)) return "";
          return v === 0 ? "0" : String(+(v / d).toPrecision(3)) + unit;
        });
      }
    }
    return vals.map(tick);
  }

  /* Round tick values over [lo, hi]: 1, 2, 2.5 or 5 times a power of ten, about ``count``
   * intervals (the same rule as the static report's charts.py). */
  function niceTicks(lo, hi, count) {
    if (!isFinite(lo) || !isFinite(hi)) return [0, 1];
    if (hi < lo) { var t = lo; lo = hi; hi = t; }
    if (hi - lo <= Math.max(Math.abs(lo), Math.abs(hi)) * 1e-12) {
      var pad = Math.abs(lo) * 0.1 || 1; lo -= pad; hi += pad;
    }
    var raw = (hi - lo) / (count || 4), power = Math.pow(10, Math.floor(Math.log10(raw))), step = 10 * power;
    [1, 2, 2.5, 5, 10].some(function (m) { if (m * power >= raw) { step = m * power; return true; } return false; });
    var start = Math.floor(lo / step + 1e-9) * step, out = [];
    for (var v = start; out.length < 50; v = start + step * out.length) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : +v.toPrecision(12));
      if (v >= hi - step * 1e-9) break;
    }
    return out;
  }

  var measurer = null;
  function textWidth(texts, font) {
    measurer = measurer || document.createElement("canvas").getContext("2d");
    measurer.font = font || "12px system-ui, -apple-system, sans-serif";
    var w = 0;
    (texts || []).forEach(function (t) { if (t) w = Math.max(w, measurer.measureText(String(t)).width); });
    return w;
  }

  /* A plain object that no key can reach the prototype of: user data (run ids, keys,
   * group ids such as "__proto__") is never a key of an ordinary {}. */
  function dict() { return Object.create(null); }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
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
        ctx.strokeStyle = SEVERITY.get(f.severity) || "#6b7280";
        ctx.setLineDash([4, 3]); ctx.lineWidth = 1.5 * devicePixelRatio;
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
        ctx.restore();
      });
    }}};
  }

  /* The y range of the values in view, with at most 2% of them at each end left out when
   * they lie far beyond the rest (one spike must not squash every line). Returns
   * {lo, hi, clipLo, clipHi} (clip*: values beyond are drawn as marks at the edge). */
  function robustRange(u) {
    var xs = u.data[0], x0 = u.scales.x.min, x1 = u.scales.x.max, vals = [];
    for (var s = 1; s < u.data.length; s++) {
      if (u.series[s] && u.series[s].show === false) continue;
      var ys = u.data[s];
      for (var i = 0; i < ys.length; i++) {
        var y = ys[i];
        if (y === null || y === undefined || !isFinite(y)) continue;
        if (x0 !== null && x0 !== undefined && (xs[i] < x0 || xs[i] > x1)) continue;
        vals.push(y);
      }
    }
    if (!vals.length) return null;
    vals.sort(function (a, b) { return a - b; });
    var n = vals.length, lo = vals[0], hi = vals[n - 1];
    var out = {lo: lo, hi: hi, clipLo: false, clipHi: false};
    if (n < 20) return out;
    var qlo = vals[Math.floor(0.02 * (n - 1))], qhi = vals[Math.ceil(0.98 * (n - 1))];
    var span = Math.max(qhi - qlo, Math.abs(qhi) * 1e-9, 1e-300);
    if (hi > qhi + 3 * span) { out.hi = qhi + 0.25 * span; out.clipHi = true; }
    if (lo < qlo - 3 * span) { out.lo = qlo - 0.25 * span; out.clipLo = true; }
    return out;
  }

  /* A line chart of one metric for several runs.
   * payload: {key, x_mode, runs: [{id, x: [...], y: [...]}]}; opts: {labels: {id: name},
   * colours: {id: colour}, smoothing: 0..0.99, findings: [{step, severity}], onZoom(lo, hi),
   * width, height, log: bool (log y axis), robust: bool (default true: far outliers are
   * marks at the edge, not the range), zoom: [lo, hi] (open zoomed), evidence:
   * [{step, value}] (points ringed)}. Returns a handle with update(payload), destroy() ... */
  function lineChart(node, payload, opts) {
    opts = opts || {};
    var state = {payload: payload, findings: opts.findings || [], evidence: opts.evidence || [],
                 log: !!opts.log, robust: opts.robust !== false, clip: null};
    var labels = opts.labels || {}, colours = opts.colours || {};
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
      var clip = state.clip && (state.clip.clipHi || state.clip.clipLo);
      title.textContent = payload.key + (bad ? " · " + bad + " non-finite value" + (bad > 1 ? "s" : "") + " not drawn" : "") +
        (drawn ? "" : " · no finite values") + (clip ? " · outliers beyond the range marked ▲" : "") +
        (state.log ? " · log y" : "");
      wrap.setAttribute("data-clipped", clip ? "1" : "0");
    }
    var timeAxis = payload.x_mode === "time";
    function data() {
      var joined = join(state.payload.runs);
      var w = opts.smoothing || 0;
      for (var i = 1; i < joined.length; i++) joined[i] = smooth(joined[i], w);
      return joined;
    }
    var xLabel = payload.x_mode === "relative" ? "seconds" : payload.x_mode;
    function xValue(u, v) { return v === null ? "" : (timeAxis ? new Date(v * 1000).toLocaleTimeString() : fmt(v)); }
    // many runs: 1 px lines. A canvas strokes a hairline on its fast path: 100 runs draw
    // in tens of ms instead of hundreds (docs/performance.md), and stay legible overlaid.
    var many = payload.runs.length > 12;
    var strokes = [null].concat(payload.runs.map(function (r, i) { return colours[r.id] || colour(i); }));
    function makeSeries() {  // fresh objects for each uPlot (it keeps what it is given)
      return [{label: xLabel, value: xValue}].concat(payload.runs.map(function (r, i) {
        return {label: labels[r.id] || r.id, stroke: strokes[i + 1], width: many ? 1 : 1.5,
                spanGaps: false, points: {show: false}, value: function (u, v) { return fmt(v); }};
      }));
    }
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
      readout.textContent = xLabel + " " + xValue(u, u.data[0][i]) + " · " +
        near.slice(0, 6).map(function (n) { return n[1] + " " + fmt(n[2]); }).join(" · ") +
        (near.length > 6 ? " · " + (near.length - 6) + " more" : "");
    }
    /* The value of an outlier marked at the plot's edge: beside its triangle, on the side
     * that keeps it inside the plot (never cut at the right edge, never over the y axis's
     * ticks), on a white ground so grid lines do not cross it. */
    function edgeLabel(ctx, text, X, baseline, box, r) {
      var w = ctx.measureText(text).width, pad = 2 * r;
      var left = X + 7 * r + w + pad <= box.left + box.width ? X + 7 * r : X - 7 * r - w;
      left = Math.max(box.left + pad, Math.min(left, box.left + box.width - w - pad));
      var fill = ctx.fillStyle;
      ctx.fillStyle = "rgba(255, 255, 255, 0.85)";
      ctx.fillRect(left - pad, baseline - 10 * r, w + 2 * pad, 13 * r);
      ctx.fillStyle = fill;
      ctx.textAlign = "left";  // uPlot leaves its axes' alignment on the canvas
      ctx.textBaseline = "alphabetic";
      ctx.fillText(text, left, baseline);
      state.edgeLabels.push({text: text, left: left, right: left + w, top: baseline - 10 * r,
                             bottom: baseline + 3 * r, plot: [box.left, box.left + box.width]});
    }
    /* What a line cannot show: a point with no neighbour (a metric logged once) is a dot;
     * values beyond a clipped range are triangles at the edge with the largest value
     * written; evidence of a finding is ringed. */
    /* A run that never logged the key is left out of the legend (eight chosen runs gave
     * every chart eight names); one that logged only NaN stays. Once seen, a run stays
     * listed (a zoom into a range it has no point in does not drop it). */
    var seen = {};
    function legendOfLogged(u) {
      if (many) return;
      var rows = u.root.querySelectorAll(".u-legend .u-series");
      state.payload.runs.forEach(function (r) {
        if (!seen[r.id] && (r.nonfinite || r.y.some(function (v) { return v !== null && v !== undefined; }))) seen[r.id] = true;
      });
      payload.runs.forEach(function (r, i) {
        if (rows[i + 1]) rows[i + 1].classList.toggle("tm-absent", !seen[r.id]);
      });
    }
    function overlay(u) {
      legendOfLogged(u);
      var ctx = u.ctx, r = devicePixelRatio || 1, box = u.bbox, xs = u.data[0];
      var x0 = u.scales.x.min, x1 = u.scales.x.max;
      state.edgeLabels = [];
      ctx.save();
      for (var s = 1; s < u.data.length; s++) {
        if (u.series[s].show === false) continue;
        var ys = u.data[s], top = null, bottom = null;
        ctx.fillStyle = strokes[s] || "#374151";
        for (var i = 0; i < ys.length; i++) {
          var y = ys[i];
          if (y === null || y === undefined || xs[i] < x0 || xs[i] > x1) continue;
          var X = u.valToPos(xs[i], "x", true);
          if (state.clip && state.clip.clipHi && y > state.clip.hi) {
            if (top === null || y > ys[top]) top = i;
            ctx.beginPath(); ctx.moveTo(X, box.top + 2 * r); ctx.lineTo(X - 5 * r, box.top + 10 * r);
            ctx.lineTo(X + 5 * r, box.top + 10 * r); ctx.fill();
            continue;
          }
          if (state.clip && state.clip.clipLo && y < state.clip.lo) {
            if (bottom === null || y < ys[bottom]) bottom = i;
            var B = box.top + box.height;
            ctx.beginPath(); ctx.moveTo(X, B - 2 * r); ctx.lineTo(X - 5 * r, B - 10 * r);
            ctx.lineTo(X + 5 * r, B - 10 * r); ctx.fill();
            continue;
          }
          var prev = i > 0 ? ys[i - 1] : null, next = i < ys.length - 1 ? ys[i + 1] : null;
          if (prev === null && next === null) {
            ctx.beginPath(); ctx.arc(X, u.valToPos(y, "y", true), 3.5 * r, 0, 2 * Math.PI); ctx.fill();
          }
        }
        ctx.font = (11 * r) + "px system-ui, sans-serif";
        if (top !== null) edgeLabel(ctx, fmt(ys[top]), u.valToPos(xs[top], "x", true), box.top + 11 * r, box, r);
        if (bottom !== null) edgeLabel(ctx, fmt(ys[bottom]), u.valToPos(xs[bottom], "x", true), box.top + box.height - 4 * r, box, r);
      }
      state.evidence.forEach(function (e) {
        if (e.step < x0 || e.step > x1 || e.value === null || e.value === undefined || !isFinite(e.value)) return;
        var v = state.clip && state.clip.clipHi ? Math.min(e.value, state.clip.hi) : e.value;
        ctx.strokeStyle = "#111827"; ctx.lineWidth = 2 * r;
        ctx.beginPath(); ctx.arc(u.valToPos(e.step, "x", true), u.valToPos(v, "y", true), 7 * r, 0, 2 * Math.PI); ctx.stroke();
      });
      ctx.restore();
    }
    function yScale(joined) {
      if (state.log) {
        var positive = true, small = Infinity;
        for (var s = 1; s < joined.length; s++) joined[s].forEach(function (v) {
          if (v === null || v === undefined || !isFinite(v)) return;
          if (v <= 0) positive = false;
          if (v !== 0) small = Math.min(small, Math.abs(v));
        });
        // a log axis needs positive values; zero or negatives get the symmetric log (asinh)
        return positive ? {distr: 3} : {distr: 4, asinh: isFinite(small) ? small : 1};
      }
      return {range: function (u, dmin, dmax) {
        state.clip = state.robust ? robustRange(u) : null;
        note(state.payload);
        var lo = state.clip ? state.clip.lo : dmin, hi = state.clip ? state.clip.hi : dmax;
        if (lo === null || hi === null || !isFinite(lo) || !isFinite(hi)) return [0, 1];
        return uPlot.rangeNum(lo, hi, 0.1, true);
      }};
    }
    var plot = null;
    function build(joined) {
      var xr = plot && zoomed ? [plot.scales.x.min, plot.scales.x.max] : opts.zoom || null;
      if (plot) plot.destroy();
      var uopts = {
        width: opts.width || 560, height: opts.height || 260, series: makeSeries(),
        scales: {x: {time: timeAxis}, y: yScale(joined)},
        axes: [timeAxis ? {} : {values: function (u, vals) { return ticks(vals); }}, {values: function (u, vals) { return ticks(vals); },
                    size: function (u, values) { return Math.ceil(textWidth(values)) + 20; }}],
        cursor: {drag: {x: true, y: false}},
        legend: {show: !many, live: true},
        plugins: [findingsPlugin(function () { return payload.x_mode === "step" ? state.findings : []; })],
        hooks: {draw: [overlay], setCursor: many ? [showNearest] : [], setSelect: [function (u) {
          if (u.select.width < 4) return;
          var lo = u.posToVal(u.select.left, "x"), hi = u.posToVal(u.select.left + u.select.width, "x");
          zoomed = true;
          if (opts.onZoom) opts.onZoom(lo, hi);
        }]}
      };
      plot = new uPlot(uopts, joined, wrap);
      if (many) wrap.appendChild(readout);  // after the plot (moved there when rebuilt)
      if (xr) { zoomed = true; plot.setScale("x", {min: xr[0], max: xr[1]}); }
      handle.plot = plot;
    }
    // new data: with the zoom kept, uPlot's setData(data, false) draws nothing by itself
    function refresh(keepScale) {
      plot.setData(data(), !keepScale);
      if (keepScale) plot.redraw();
    }
    var handle = {
      plot: null, node: wrap,
      update: function (p, keepScale) { state.payload = p; note(p); refresh(keepScale); },
      setFindings: function (f) { state.findings = f || []; plot.redraw(false); },
      findings: function () { return state.findings; },
      setEvidence: function (e) { state.evidence = e || []; plot.redraw(false); },
      evidence: function () { return state.evidence; },
      setSmoothing: function (w) { opts.smoothing = w; refresh(zoomed); },
      setYMode: function (mode) {
        if (mode.log !== undefined) state.log = !!mode.log;
        if (mode.robust !== undefined) state.robust = !!mode.robust;
        state.clip = null; build(data()); note(state.payload);
      },
      zoomTo: function (lo, hi) { zoomed = true; plot.setScale("x", {min: lo, max: hi}); },
      clipped: function () { return state.clip; },
      // the outlier values written at the edges: [{text, left, right, top, bottom}] in canvas pixels,
      // with the plot's own [left, right]
      edgeLabels: function () { return state.edgeLabels || []; },
      zoomed: function () { return zoomed; },
      destroy: function () { plot.destroy(); wrap.remove(); }
    };
    build(data());
    note(payload);
    wrap.addEventListener("dblclick", function () {
      if (zoomed && opts.onZoom) { zoomed = false; opts.onZoom(null, null); }
    });
    return handle;
  }

  /* Round ticks on both axes of a canvas chart; returns the ticks' ranges (the data's
   * ranges widened to the outer ticks), so the caller maps values with them. */
  function axesFor(ctx, box, xr, yr, xLabel, yLabel) {
    var xt = niceTicks(xr[0], xr[1], 4), yt = niceTicks(yr[0], yr[1], 4);
    var X = [xt[0], xt[xt.length - 1]], Y = [yt[0], yt[yt.length - 1]];
    ctx.font = "11px system-ui, sans-serif"; ctx.strokeStyle = "#e5e7eb"; ctx.fillStyle = "#6b7280";
    var yl = ticks(yt), xl = ticks(xt);
    yt.forEach(function (v, i) {
      var fy = box.top + (1 - (v - Y[0]) / (Y[1] - Y[0])) * box.h, text = yl[i];
      ctx.beginPath(); ctx.moveTo(box.left, fy); ctx.lineTo(box.left + box.w, fy); ctx.stroke();
      ctx.fillText(text, box.left - 6 - ctx.measureText(text).width, fy + 4);
    });
    xt.forEach(function (v, i) {
      var fx = box.left + (v - X[0]) / (X[1] - X[0]) * box.w, text = xl[i];
      ctx.beginPath(); ctx.moveTo(fx, box.top); ctx.lineTo(fx, box.top + box.h); ctx.stroke();
      ctx.fillText(text, fx - ctx.measureText(text).width / 2, box.top + box.h + 14);
    });
    ctx.fillStyle = "#1f2937";
    ctx.fillText(xLabel + " →", box.left + box.w - ctx.measureText(xLabel + " →").width, box.top + box.h + 28);
    ctx.fillText("↑ " + yLabel, box.left + 4, box.top - 6);
    return {x: X, y: Y};
  }

  /* The left margin that fits the y labels of ``yr``'s round ticks. */
  function leftFor(yr) {
    return Math.ceil(textWidth(ticks(niceTicks(yr[0], yr[1], 4)), "11px system-ui, sans-serif")) + 14;
  }

  function range(values) {
    var lo = Infinity, hi = -Infinity;
    values.forEach(function (v) { if (v !== null && isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    if (!isFinite(lo)) return [0, 1];
    if (hi === lo) { hi += Math.abs(lo) * 0.1 || 1; lo -= Math.abs(lo) * 0.1 || 1; }
    return [lo, hi];
  }

  /* A legend of runs: a coloured dot and the run's label each. */
  function legendOf(runs, opts) {
    var box = el("div", {"class": "tm-legend"});
    runs.forEach(function (r, i) {
      var item = el("span", {"class": "tm-legend-item", "data-run": r.id});
      var dot = el("i", {"class": "dot"}); dot.style.background = (opts.colours || {})[r.id] || colour(i);
      item.appendChild(dot); item.appendChild(document.createTextNode(" " + ((opts.labels || {})[r.id] || r.id)));
      box.appendChild(item);
    });
    return box;
  }

  /* One metric against another as a path per run (reward vs KL); hover names the step.
   * payload: {x_key, y_key, runs: [{id, step, x, y}]}. */
  function pathChart(node, payload, opts) {
    opts = opts || {};
    var W = opts.width || 560, H = opts.height || 360;
    var wrap = el("div", {"class": "tm-path", "data-x": payload.x_key, "data-y": payload.y_key});
    var canvas = el("canvas", {width: W, height: H});
    var tip = el("div", {"class": "tm-tip"});
    wrap.appendChild(legendOf(payload.runs, opts));
    wrap.appendChild(canvas); wrap.appendChild(tip); node.appendChild(wrap);
    var ctx = canvas.getContext("2d");
    var xr = range([].concat.apply([], payload.runs.map(function (r) { return r.x; })));
    var yr = range([].concat.apply([], payload.runs.map(function (r) { return r.y; })));
    var left = leftFor(yr), box = {left: left, top: 20, w: W - left - 20, h: H - 60};
    var scale = axesFor(ctx, box, xr, yr, payload.x_key, payload.y_key);
    xr = scale.x; yr = scale.y;
    function px(v) { return box.left + (v - xr[0]) / (xr[1] - xr[0]) * box.w; }
    function py(v) { return box.top + (1 - (v - yr[0]) / (yr[1] - yr[0])) * box.h; }
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
    var lo = Infinity, hi = -Infinity;
    items.forEach(function (h) { if (h.edges.length) { lo = Math.min(lo, h.edges[0]); hi = Math.max(hi, h.edges[h.edges.length - 1]); } });
    if (!isFinite(lo)) { ctx.fillText("no finite values", 20, 40); return {node: wrap}; }
    if (hi === lo) hi = lo + 1;
    var left = leftFor([lo, hi]), box = {left: left, top: 20, w: W - left - 20, h: H - 60};
    var steps = items.map(function (h) { return h.step; });
    var yr = axesFor(ctx, box, [steps[0], steps[steps.length - 1]], [lo, hi], "step", key).y;
    lo = yr[0]; hi = yr[1];
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
      // the report holds the first rows only and says so (payload.note)
      node.appendChild(el("p", {"class": "hint tm-cap"}, payload.note || "rows " + (payload.offset + 1) + ".." +
        (payload.offset + payload.rows.length) + " of " + payload.total.toLocaleString("en-US")));
    }
    return t;
  }

  /* The doctor's findings on a step timeline (one track per run, a step axis under them)
   * and as a list. runs: [{id, label, findings: [{rule, severity, step, keys, message,
   * evidence?: [{key, step, value}]}], coverage?: {judged, verdict, line, read?, not_run?}}]: what the doctor
   * read of the run, said under its name (a run it could not judge is never "no findings").
   * opts.open(finding, runId, key): where a click on a mark, an onset, a key or the
   * evidence leads (none: the list is plain text). */
  /* What the doctor read of run ``r`` in one line, and the rules that could not run (often
   * twenty, the same for every run of a trainer) folded under a count. */
  function coverage(box, r) {
    var c = r.coverage, notRun = c.not_run ? Object.keys(c.not_run) : [];
    box.appendChild(el("p", {"class": "hint tm-coverage" + (c.judged ? "" : " unjudged"), "data-run": r.id},
                       "doctor coverage: " + (c.not_run ? c.read : c.line)));
    if (!notRun.length) return;
    var folded = el("details", {"class": "hint tm-not-run", "data-run": r.id}), rules = el("ul");
    folded.appendChild(el("summary", {}, notRun.length + " rule" + (notRun.length > 1 ? "s" : "") +
                          " could not run on this run"));
    notRun.forEach(function (rule) { rules.appendChild(el("li", {}, rule + ": " + c.not_run[rule])); });
    folded.appendChild(rules);
    box.appendChild(folded);
  }

  function findings(node, runs, maxStep, opts) {
    opts = opts || {};
    var box = el("div", {"class": "tm-findings"}), top = Math.max(maxStep || 1, 1);
    function link(text, f, rid, key, cls) {
      if (!opts.open) return el("span", {"class": cls || ""}, text);
      var a = el("a", {href: "#", "class": "tm-go " + (cls || ""), "data-rule": f.rule, "data-step": String(f.step)}, text);
      if (key) a.setAttribute("data-key", key);
      a.addEventListener("click", function (ev) { ev.preventDefault(); opts.open(f, rid, key); });
      return a;
    }
    var tracks = el("div", {"class": "tm-tracks"}); box.appendChild(tracks);
    runs.forEach(function (r) {
      var track = el("div", {"class": "tm-track"});
      track.appendChild(el("span", {"class": "tm-track-label"}, r.label));
      var line = el("div", {"class": "tm-track-line"});
      r.findings.forEach(function (f) {
        var m = link("", f, r.id, (f.keys || [])[0] || null, "tm-mark " + f.severity);
        m.setAttribute("title", f.rule + " at step " + f.step + ": " + f.message);
        m.style.left = (100 * f.step / top) + "%";
        line.appendChild(m);
      });
      track.appendChild(line); tracks.appendChild(track);
    });
    var axis = el("div", {"class": "tm-track"});  // the step axis under the tracks
    axis.appendChild(el("span", {"class": "tm-track-label hint"}, "step"));
    var scale = el("div", {"class": "tm-axis"});
    niceTicks(0, top, 5).filter(function (v) { return v <= top; }).forEach(function (v) {
      var t = el("span", {"class": "tm-axis-tick"}, tick(v)); t.style.left = (100 * v / top) + "%"; scale.appendChild(t);
    });
    axis.appendChild(scale); tracks.appendChild(axis);
    runs.forEach(function (r) {
      var list = el("ul", {"class": "tm-finding-list", "data-run": r.id});
      r.findings.forEach(function (f) {
        var li = el("li", {"class": "finding " + f.severity});
        li.appendChild(el("b", {}, f.severity + " · " + f.rule + " · "));
        li.appendChild(link("step " + f.step, f, r.id, (f.keys || [])[0] || null, "onset"));
        li.appendChild(document.createTextNode(" "));
        li.appendChild(el("span", {}, f.message));
        if (f.keys && f.keys.length) {
          li.appendChild(document.createTextNode(" ("));
          f.keys.forEach(function (k, i) {
            if (i) li.appendChild(document.createTextNode(", "));
            li.appendChild(link(k, f, r.id, k, "key"));
          });
          li.appendChild(document.createTextNode(")"));
        }
        if (f.evidence && f.evidence.length) {
          li.appendChild(document.createTextNode(" · "));
          li.appendChild(link("evidence: " + f.evidence.length + " point" + (f.evidence.length > 1 ? "s" : ""),
                              f, r.id, f.evidence[0].key || (f.keys || [])[0] || null, "evidence"));
        }
        list.appendChild(li);
      });
      var unjudged = r.coverage && !r.coverage.judged;
      if (!r.findings.length) list.appendChild(el("li", {"class": "hint"}, r.label + (unjudged ? ": not judged" : ": no findings")));
      box.appendChild(el("h4", {}, r.label));
      if (r.coverage) coverage(box, r);
      box.appendChild(list);
    });
    node.appendChild(box);
    return box;
  }

  window.trackmuxCharts = {PALETTE: PALETTE, SEVERITY: Object.fromEntries(SEVERITY), colour: colour, colourKeeper: colourKeeper, fmt: fmt,
    tick: tick, ticks: ticks, niceTicks: niceTicks, dict: dict, smooth: smooth, join: join, lineChart: lineChart,
    pathChart: pathChart, legendOf: legendOf,
    histogramChart: histogramChart, table: table, findings: findings, el: el};
})();
