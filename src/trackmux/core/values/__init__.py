"""The door: what a trainer's call may contain and how it is converted before it becomes an
event. Keys and numbers (normalize), images (media), secrets (redact), histograms binned
in the caller's thread (histogram), artifact files hashed (artifacts). Pure functions over
the caller's data; nothing here touches the spool or a backend. Next stop: ``core.spool``.
"""
