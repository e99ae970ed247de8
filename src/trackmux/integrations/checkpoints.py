"""A trainer's checkpoint never gets ahead of the spool.

Under the default durability a SIGKILL may lose what ``log()`` took in its last 0.5 s
(docs/guarantees.md). A trainer restarted from checkpoint N rewinds its run to N and never
logs the steps up to N again, so whatever the spool lost of them is lost for good, though
the checkpoint says they happened. The integrations therefore commit the spool while the
trainer writes a checkpoint: verl's savers (:mod:`trackmux.integrations.verl_checkpoints`),
the Trainer's ``trainer_state.json`` (the callback's ``state()``) and accelerate's
``save_state`` (the tracker's ``state_dict()``). One commit: milliseconds, beside a
checkpoint's seconds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("trackmux")

#: How long a save waits for the spool; a stuck spool (disk full) is named, not waited on.
FLUSH_TIMEOUT = 10.0


def commit(runs: Iterable[Any], timeout: float = FLUSH_TIMEOUT) -> None:
    """Commit each run's spool; never raises (a checkpoint must not fail for tracking)."""
    for run in runs:
        try:
            if not run.flush(timeout):
                log.warning("trackmux: the spool of run %s did not commit within %.0f s of "
                            "a checkpoint; a kill now may lose its last steps",
                            getattr(run, "id", "?"), timeout)
        except Exception:
            log.exception("trackmux: committing the spool at a checkpoint failed")
