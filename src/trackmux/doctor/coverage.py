"""What the doctor read, said with every result: "healthy" and "nothing to judge" must
never look the same.

A coverage is a dict (``trackmux doctor --json`` prints it under ``"coverage"``)::

    {"judged": bool,            # it read a reward or a KL: its silence means something
     "verdict": "judged on reward, kl" | "not judged: no key for the reward or the KL ...",
     "signals": {signal: [{"key", "from"}]},   # from: a dialect, "user" or "words"
     "not_run": {rule: why},    # "no key for entropy", "no rollout samples or tables"
     "declared_unseen": {signal: [declared key, ...]}}   # declared, never logged

:func:`line` is its one-line text (the live doctor's summary, ``trackmux doctor``, the UI
and the report). The live doctor says it on every run it takes for RL (:func:`said_live`),
as a note where there is nothing to act on (:func:`live_note`): a text event of key
:data:`NOTE_KEY`, not a finding, so no findings count, alert or store of
findings counts it; the console prints it as ``[trackmux doctor] coverage @ step N: ...``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trackmux.core.events import FindingEvent, TextEvent

#: the live doctor's coverage finding (one info finding per run; docs/doctor.md)
RULE = "coverage"
#: the key of the live doctor's coverage note (a text event; the coverage finding's too)
NOTE_KEY = f"doctor/{RULE}"
#: a run is judged when the doctor read one of these
JUDGING = ("reward", "kl")
#: what a rule that reads no metric signal needs, by the event kinds it reads
NEEDS = {"samples": "rollout samples", "table": "rollout tables", "text": "texts",
         "histogram": "histograms", "metrics": "metrics"}


def wanted_signals(params: Mapping[str, Any]) -> list[str]:
    """The ``@signal`` entries of a rule's ``keys`` (what it judges; others, such as
    ``reward_keys``, only add context), else of all its key parameters, in order."""
    out: dict[str, None] = {}
    main = params.get("keys")
    if isinstance(main, (list, tuple)) and any(
            isinstance(k, str) and k.startswith("@") for k in main):
        params = {"keys": main}
    for value in params.values():
        if isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, str) and item.startswith("@"):
                    out[item[1:]] = None
    return list(out)


def why_not(params: Mapping[str, Any], kinds: Iterable[str] | None,
            read: Iterable[str] = (), present: Iterable[str] = ()) -> str:
    """Why a rule that read nothing could not run (``read``: the signals the run has;
    ``present``: the event kinds some other rule read, so the run has them)."""
    wanted = wanted_signals(params)
    if wanted:
        have = set(read)
        missing = [w for w in wanted if w not in have] or wanted
        if len(missing) > 3:
            return f"no key for {missing[0]} or its {len(missing) - 1} other signals"
        return "no key for " + " or ".join(missing)
    kinds = sorted(kinds or ())
    there = [NEEDS.get(k, k) for k in kinds if k in set(present)]
    if there:
        return f"nothing it reads in the run's {' or '.join(there)}"
    needs = [NEEDS.get(k, k) for k in kinds]
    return "no " + " or ".join(needs) if needs else "nothing it reads was logged"


def build(read: Mapping[str, Mapping[str, str]], rules_read: Mapping[str, bool],
          reasons: Mapping[str, str], declared_unseen: Mapping[str, list[str]],
          keys_seen: int) -> dict[str, Any]:
    """The coverage of one run: ``read`` signal -> key -> where its name was read,
    ``rules_read`` rule -> whether it read anything, ``reasons`` why each that did not."""
    signals = {sig: [{"key": k, "from": "words" if d == "generic" else d}
                     for k, d in keys.items()] for sig, keys in sorted(read.items())}
    judged = any(signals.get(s) for s in JUDGING)
    if judged:
        verdict = "judged: read " + " and ".join(s for s in JUDGING if signals.get(s))
    else:
        verdict = (f"not judged: no key for the reward or the KL among the run's "
                   f"{keys_seen} metric key{'s' if keys_seen != 1 else ''}")
        if signals:
            verdict += " (read only " + ", ".join(signals) + ")"
        verdict += "; declare them: trackmux.init(signals={'reward': KEY, 'kl': KEY}) or " \
                   "[signals] in the rules file"
    return {"judged": judged, "verdict": verdict, "signals": signals,
            "not_run": {r: reasons[r] for r in sorted(rules_read) if not rules_read[r]},
            "declared_unseen": {s: list(p) for s, p in declared_unseen.items()}}


def line(coverage: Mapping[str, Any]) -> str:
    """The coverage as one line of text."""
    parts = [str(coverage.get("verdict") or "")]
    signals = coverage.get("signals") or {}
    if signals:
        parts.append("read " + ", ".join(
            f"{sig} <- {', '.join(k['key'] for k in keys)}" for sig, keys in signals.items()))
    unseen = coverage.get("declared_unseen") or {}
    if unseen:
        parts.append("declared but never logged: " + ", ".join(
            f"{sig} <- {', '.join(keys)}" for sig, keys in unseen.items()))
    not_run = coverage.get("not_run") or {}
    if not_run:
        parts.append("not run: " + ", ".join(f"{rule} ({why})"
                                              for rule, why in not_run.items()))
    return "; ".join(p for p in parts if p)


#: signals any training loop logs: a run that logs only these is not taken for RL, and
#: the live doctor does not call it "not judged" nor tell it its coverage
GENERAL = frozenset({"loss", "grad_norm"})


def live_finding(coverage: Mapping[str, Any], step: int, time: float
                 ) -> FindingEvent | None:
    """The live doctor's ``info`` finding of the run's coverage, for a run it cannot judge
    although it logs RL signals it knows, and for a run that declared keys (what was read
    of them, and any never logged): something to act on. None otherwise: the run is told
    by :func:`live_note`, which no findings count sees."""
    if not said_live(coverage) or (coverage.get("judged") and not _declared(coverage)):
        return None
    return FindingEvent(RULE, "info", (), line(coverage), step, time)


def said_live(coverage: Mapping[str, Any]) -> bool:
    """Whether the live doctor tells a run its coverage: a run that logs an RL signal it
    knows (beyond :data:`GENERAL`) or declared keys. Others (a supervised loop's loss, keys
    it reads nothing of) are not told: a line on every script that logs anything would be
    noise, and ``trackmux doctor`` says their coverage ("not judged", exit 3)."""
    signals = coverage.get("signals") or {}
    return _declared(coverage) or bool(set(signals) - GENERAL)


def _declared(coverage: Mapping[str, Any]) -> bool:
    """Whether the run declared keys (read, or never logged)."""
    return bool(coverage.get("declared_unseen")) or any(
        k.get("from") == "user" for keys in (coverage.get("signals") or {}).values()
        for k in keys)


def live_note(coverage: Mapping[str, Any], step: int, time: float) -> TextEvent:
    """The live doctor's coverage of a run as a note: a text event, not a finding (a
    finding would be counted, alerted on and stored as one)."""
    return TextEvent(NOTE_KEY, line(coverage), step, time)
