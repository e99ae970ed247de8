"""The doctor: watches an RL run's events and says what went wrong (issue 22, docs/doctor.md).

Detectors are pure, streaming objects fed events in spool order; they run once per run in
the delivery process (core/delivery/watch.py runs them), or offline over any spool with the
same code (``trackmux doctor``). Findings are appended to the spool as ``FindingEvent``s so
every backend, a resync and every reader (``trackmux.doctor.read.load_findings``) see them.

Kept light: importing this package imports no detector (``import trackmux`` stays fast).
"""
