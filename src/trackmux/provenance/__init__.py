"""Provenance (issue 25): what produced a run, recorded once at ``init()``.

Joins every run through core's start and finish hooks; importing it is light (the git,
metadata and NVML work is imported and done on a thread). See docs/provenance.md.
"""

from __future__ import annotations

from trackmux.core.lifecycle.run import on_run_finish, on_run_start
from trackmux.provenance import record

on_run_start(record.start)
on_run_finish(record.finish)
