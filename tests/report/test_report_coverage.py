"""Both reports say what the doctor read of each run in a line and fold the rules that
could not run under their count (a look at the demo's report found about twenty "rule
(why)" entries per run, longer than the findings themselves)."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import trackmux
from trackmux.report import build_report


def _run(root: Path) -> Path:
    run = trackmux.init(project="p", name="judged", backends=[], dir=root, doctor=False)
    assert isinstance(run, trackmux.Run)
    for step in range(20):
        run.log({"reward/mean": step / 20, "kl/divergence": 0.01 * step}, step=step)
    assert run.finish(timeout=30).complete
    return run.dir


def test_the_static_report_folds_the_rules_that_could_not_run(tmp_path: Path) -> None:
    page = build_report([_run(tmp_path)], tmp_path / "s.html", static=True).read_text()
    [item] = re.findall(r'<li class="coverage">(.*?)</li>(?=</ul>)', page, re.S)
    line, folded = item.split('<details class="tm-not-run">')
    said = unescape(line)
    assert said.startswith("<b>judged</b>: judged: read reward and kl; read ")
    assert "kl <- kl/divergence" in said and "not run" not in said
    count = int(re.match(r"<summary>(\d+) rules could not run on this run</summary>",
                         folded).group(1))  # type: ignore[union-attr]
    assert folded.count("<li>") == count > 5
    assert "<li>entropy_collapse: no key for entropy</li>" in folded


def test_the_scripted_report_carries_what_was_read_and_what_could_not_run(
        tmp_path: Path) -> None:
    page = build_report([_run(tmp_path)], tmp_path / "r.html").read_text()
    assert '"read":"judged: read reward and kl; read kl \\u003c- kl/divergence' in page
    assert '"entropy_collapse":"no key for entropy"' in page
