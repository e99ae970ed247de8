"""The run's life: ``init()`` and ``Run`` (the trainer's API, which drives values -> spool ->
delivery), signals and exit handling, and system metrics sampled into the run. The top of
core: it imports the floors below, nothing below imports it. Wings (Ray attach, doctor,
UI) join a run through ``run.on_run_start``, never the other way round.
"""
