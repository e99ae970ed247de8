"""The report's sample browser: every samples key of every run, one step at a time.

Each step's payload (:func:`trackmux.samples.read.step_payload`) is embedded gzip'd and
base64'd in a non-executed ``<script type="application/json">`` and decompressed in the
browser only when the step slider reaches it (``DecompressionStream``), so a big run does
not make one huge page to parse. A run with more steps than ``MAX_STEPS`` embeds that
many, spread evenly (first and last kept; ``trackmux samples`` reads any step), each with
its first ``MAX_ROWS`` samples (whole groups as logged) and their token arrays.

The browser itself is ``assets/samples.js`` + ``assets/samples.css`` (conversations drawn
by ``assets/conversation.js`` + ``.css``), the same files
``trackmux ui`` serves; the page's content policy allows exactly this inline script (by
its sha256) and nothing else.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from collections.abc import Sequence
from html import escape
from importlib import resources

import orjson

from trackmux.report.load import RunData
from trackmux.samples.read import list_sample_keys, step_payload

MAX_STEPS = 40
MAX_ROWS = 64
#: samples of each embedded step of a key whose samples are conversations (a step of
#: 64 agentic trajectories embeds ~1 MB of JSON; 16 keep a 40-step report near 5 MB)
MAX_CONVERSATION_ROWS = 16

BOOT = """
(function () {
  function load(id) {
    var node = document.getElementById(id);
    if (!node) return Promise.reject(new Error("step not in this report"));
    var text = atob(node.textContent.trim());
    var bytes = Uint8Array.from(text, function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }
  document.querySelectorAll(".tms-mount").forEach(function (root) {
    var prefix = root.getAttribute("data-prefix");
    var steps = JSON.parse(root.getAttribute("data-steps"));
    var loader = function (step) { return load(prefix + step); };
    loader(steps[steps.length - 1]).then(function (payload) {
      window.trackmuxSamples.mount(root, payload, {steps: steps, load: loader});
      root.setAttribute("data-ready", "1");
    }).catch(function (e) { root.textContent = "samples could not be read: " + e.message; });
  });
})();
"""


def asset(name: str) -> str:
    """The text of ``assets/<name>`` (shipped in the wheel)."""
    return (resources.files("trackmux.report") / "assets" / name).read_text("utf-8")


def spread(steps: list[int], most: int) -> list[int]:
    if len(steps) <= most:
        return steps
    return sorted({steps[round(i * (len(steps) - 1) / (most - 1))] for i in range(most)})


def samples_section(runs: Sequence[RunData]) -> tuple[str, str]:
    """The section's HTML and the inline script it needs ("" and "" without samples)."""
    blocks: list[str] = []
    for r, run in enumerate(runs):
        try:
            keys = list_sample_keys(run.run_dir)
        except (FileNotFoundError, OSError):
            continue
        for k, (key, all_steps) in enumerate(keys.items()):
            steps = spread(all_steps, MAX_STEPS)
            prefix = f"tms-{r}-{k}-"
            data = []
            cap = MAX_ROWS
            for step in steps:
                payload = step_payload(run.run_dir, key, step, max_rows=cap)
                if payload.get("trajectories") and cap > MAX_CONVERSATION_ROWS:
                    cap = MAX_CONVERSATION_ROWS
                    payload = step_payload(run.run_dir, key, step, max_rows=cap)
                payload["steps"] = steps
                packed = base64.b64encode(gzip.compress(orjson.dumps(payload), 6, mtime=0))
                data.append(f'<script type="application/json" id="{prefix}{step}">'
                            f"{packed.decode()}</script>")
            note = (f" · {len(steps)} of {len(all_steps)} steps embedded"
                    if len(steps) < len(all_steps) else "")
            blocks.append(
                f'<div class="panel"><h3>{escape(key)} <span class="hint">{escape(run.label)}'
                f"{note} · first {cap} samples a step · every sample: "
                f"<code>trackmux samples {escape(run.run_id)} --key {escape(key)} --step N"
                f'</code></span></h3><div class="tms-mount" data-prefix="{prefix}" '
                f"data-steps='{orjson.dumps(steps).decode()}'></div>{''.join(data)}</div>")
    if not blocks:
        return "", ""
    html = (f'<section id="samples"><h2>Samples</h2><style>{asset("samples.css")}'
            f'{asset("conversation.css")}</style>' + "".join(blocks) + "</section>")
    return html, asset("conversation.js") + asset("samples.js") + BOOT


def script_hash(script: str) -> str:
    """The CSP source that allows exactly ``script`` inline."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
