"""The spool: one SQLite file per run, the only channel between the trainer and delivery.
The writer thread group-commits events (writer), rows are encoded and checked (codec),
read back in order with per-backend cursors (reader), resumed attempts and rewinds are
recorded (attempts), and run folders are found and summarised (runs). The only modules
that run SQL. Next stop: ``core.delivery``.
"""
