"""Core of trackmux, in the order an event travels:

- the shared words at this level: ``events`` (the event types), ``errors``, ``settings``
  (every ``TRACKMUX_*`` variable), ``configmerge``;
- ``values``: the door, where a trainer's call is checked and converted;
- ``spool``: the durable SQLite file every event passes through;
- ``backends``: the plugin contract a backend implements and the registry that finds it;
- ``delivery``: from the spool to each backend, live or by ``trackmux sync``;
- ``lifecycle``: ``init()`` and ``Run``, which drive the floors above.

Imports run one way: a floor imports only the floors listed before it (lifecycle uses
all, values only the shared words; tests/core/test_house.py checks it). Imports no
backend library, ever.
"""
