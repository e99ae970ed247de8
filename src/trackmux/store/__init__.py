"""The team store: runs of many machines in one PostgreSQL database (issue 35).

- :mod:`trackmux.store.connect`: DSNs, connections, and the errors a person can act on;
- :mod:`trackmux.store.schema`: versioned migrations (table ``trackmux_schema``);
- :mod:`trackmux.store.ingest`: events to rows, one transaction per batch (the backend,
  trackmux/plugins/postgres.py, is a thin shell over it);
- :mod:`trackmux.store.read`: the store side of the reader interface (trackmux/readers/);
- :mod:`trackmux.store.goals`: the team's targets per project.

psycopg 3 is imported only here, and only when a store is used (``pip install -e
'.[postgres]'`` in the trackmux checkout).
"""
