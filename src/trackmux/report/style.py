"""The ``--static`` report's stylesheet (and its table pages'), inlined into the page
(self-contained: no external files)."""

CSS = """
:root { --ink: #1f2937; --muted: #6b7280; --line: #e5e7eb; --panel: #ffffff;
        --bg: #f6f7f9; --ok: #047857; --warn: #b45309; --bad: #b91c1c; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--ink); background: var(--bg); }
header { padding: 18px 28px 10px; background: var(--panel); border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 4px; font-size: 20px; }
header .sub { color: var(--muted); }
nav { position: sticky; top: 0; z-index: 2; background: var(--panel);
      border-bottom: 1px solid var(--line); padding: 6px 28px; }
nav a { margin-right: 14px; color: #2563eb; text-decoration: none; font-size: 13px; }
nav a:hover { text-decoration: underline; }
main { padding: 8px 28px 40px; max-width: 1500px; }
section { margin-top: 22px; }
h2 { font-size: 17px; margin: 0 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 15px; margin: 16px 0 8px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
         padding: 12px 14px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(430px, 1fr)); gap: 12px; }
.charts .panel { padding: 6px; overflow: hidden; }
svg.chart { display: block; width: 100%; height: auto; }
svg.chart .grid { stroke: #eef0f3; stroke-width: 1; }
svg.chart .tick { fill: var(--muted); font-size: 10.5px; }
svg.chart .axis-label { fill: var(--muted); font-size: 10.5px; }
svg.chart .chart-title { fill: var(--ink); font-size: 13px; font-weight: 600; }
svg.chart .empty { fill: var(--muted); font-size: 12px; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; margin: 4px 0 6px; }
.legend span { display: inline-flex; align-items: center; gap: 6px; }
.legend i { display: inline-block; width: 18px; height: 3px; border-radius: 2px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 5px 9px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { background: #f9fafb; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
tr.diff td { background: #fffbeb; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
         font-weight: 600; }
.badge.ok { color: var(--ok); background: #d1fae5; }
.badge.warn { color: var(--warn); background: #fef3c7; }
.badge.bad { color: var(--bad); background: #fee2e2; }
.hint { color: var(--muted); font-size: 12.5px; }
details { margin: 6px 0; }
summary { cursor: pointer; font-weight: 600; }
.gallery { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
         padding: 8px; max-width: 100%; }
figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 12.5px; color: var(--muted); margin-top: 6px; max-width: 560px; }
pre { background: #f9fafb; border: 1px solid var(--line); border-radius: 6px; padding: 8px;
      overflow: auto; max-height: 420px; }
.warning { color: var(--bad); }
footer { color: var(--muted); font-size: 12px; padding: 0 28px 24px; }
tr.finding { color: inherit; }
.sev { display: inline-block; padding: 1px 7px; border-radius: 9px; font-size: 12px;
       color: #fff; background: #6b7280; }
.sev.warning { background: #d97706; color: #fff; }
.sev.critical { background: #dc2626; }
line.onset { stroke: #d97706; stroke-width: 1.4; stroke-dasharray: 4 3; }
line.onset.critical { stroke: #dc2626; }
line.onset.info { stroke: #6b7280; }
"""
