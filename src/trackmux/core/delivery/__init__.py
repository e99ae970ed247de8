"""Delivery: from the spool to each backend, exactly once. One worker per backend reads
from its acknowledged cursor (worker), where the workers live for a live run (host: the
delivery process or threads; process: that process's main), what a backend cannot show
natively (fallbacks, rebuild), offline resync over the same worker (sync), and problems
reported once (reporting). Calls backends only through ``core.backends.contract``.
"""
