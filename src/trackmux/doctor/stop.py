"""The doctor's stop policy: which findings ask the trainer to stop (issue 45, docs/doctor.md).

Opt-in, off by default. ``stop_on`` takes ``"critical"`` (any critical finding), a list of
rule names (a finding of any of them, at any severity) or False. It is given as the key
``stop_on`` of ``init(doctor={...})`` or of a rules file, else by ``TRACKMUX_DOCTOR_STOP_ON``.

Stopping is cooperative: the policy runs in the trainer's process where the doctor's
findings arrive (``Run._found``), and only sets ``run.should_stop`` and ``run.stop_reason``.
The loop, or an integration, reads the flag at a step boundary, saves a checkpoint and ends
the run, which then ends ``stopped``. Nothing here signals or interrupts the trainer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: the key in ``init(doctor={...})`` and in a rules file
KEY = "stop_on"
CHOICES = "'critical', a list of rule names, or False"


@dataclass(frozen=True)
class StopPolicy:
    """A checked ``stop_on``: ``critical`` stops on any critical finding, ``rules`` on any
    finding of these rules. Called with a finding as ``run.findings()`` gives it."""

    critical: bool = False
    rules: frozenset[str] = frozenset()

    def __call__(self, finding: Mapping[str, Any]) -> bool:
        if self.critical and finding.get("severity") == "critical":
            return True
        return finding.get("rule") in self.rules

    def describe(self) -> str:
        """As the user wrote it: ``critical`` or the comma list of rules."""
        return "critical" if self.critical else ",".join(sorted(self.rules))


def split(setting: Any) -> tuple[Any, Any]:
    """``(doctor setting without stop_on, stop_on or None)``; a rules file is read here."""
    if isinstance(setting, (str, os.PathLike)) and str(setting).lower() not in ("on", "off"):
        from trackmux.doctor.config import load_file

        setting = load_file(setting)
    if isinstance(setting, Mapping) and KEY in setting:
        return {k: v for k, v in setting.items() if k != KEY}, setting[KEY]
    return setting, None


def check(value: Any, known: Iterable[str], enabled: Iterable[str] | None = None,
          source: str = "doctor stop_on") -> StopPolicy | None:
    """The policy for ``value`` (None or False: none), or ``ValueError`` in one line naming
    ``source``, the choices and the known rules. ``enabled``: the rules this run runs; a
    rule named here that is switched off would never stop anything, so it is refused."""
    known = sorted(known)
    if value is None or value is False:
        return None
    if isinstance(value, str) and value.strip().lower() == "critical":
        return StopPolicy(critical=True)
    if isinstance(value, (list, tuple, set, frozenset)) and value and all(
            isinstance(v, str) for v in value):
        unknown = sorted(v for v in value if v not in known)
        if unknown:
            raise ValueError(f"{source}: unknown rule(s) {unknown}; {source} takes {CHOICES}; "
                             f"known rules: {known}")
        off = sorted(v for v in value if enabled is not None and v not in set(enabled))
        if off:
            raise ValueError(f"{source} names rule(s) {off} that this run switches off; "
                             f"enable them or leave them out of {source}")
        return StopPolicy(rules=frozenset(value))
    raise ValueError(f"{source} takes {CHOICES}, got {value!r}; known rules: {known}")
