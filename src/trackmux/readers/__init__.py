"""Reading runs wherever they are: a spool folder or the team store, chosen by URI.

    source = open_source("postgresql://reader@db/trackmux")   # or a folder
    for run in source.runs(): source.series(run, "loss")

The CLIs that read one run (show, doctor, samples, diff, report) take ``--store URI``
(or ``TRACKMUX_STORE``): :func:`select_store` records it, and ``resolve_run`` then finds
the run in that store and hands back a local replica of it (trackmux/store/read.py), so
those commands read store runs with the code that reads spools.
"""

from __future__ import annotations

import os
from pathlib import Path

from trackmux.readers.base import RunEntry, RunSource, Series

__all__ = ["RunEntry", "RunSource", "Series", "open_source", "resolve_in_selected_store",
           "select_store", "selected_store"]

_selected: str | None = None
_sources: dict[str, RunSource] = {}


def is_store_uri(value: object) -> bool:
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def open_source(uri: str | os.PathLike[str] | None) -> RunSource:
    """The store for a ``postgresql://`` URI, else the spool folder (None: TRACKMUX_DIR)."""
    if is_store_uri(uri):
        from trackmux.store.read import StoreSource

        return StoreSource(str(uri))
    from trackmux.core import settings
    from trackmux.readers.spool import SpoolSource

    return SpoolSource(settings.spool_root(uri))


def select_store(uri: str | None) -> None:
    """Make ``resolve_run`` read runs from ``uri`` in this process (``--store``)."""
    from trackmux.core.spool.runs import RUN_RESOLVERS

    global _selected
    _selected = uri or None
    if resolve_in_selected_store not in RUN_RESOLVERS:
        RUN_RESOLVERS.insert(0, resolve_in_selected_store)


def selected_store() -> str | None:
    return _selected


def resolve_in_selected_store(arg: str | os.PathLike[str]) -> Path | None:
    """The local folder of run ``arg`` when a store was selected (``--store``): for a
    ``postgresql://`` store a replica brought up to date now; for a folder, the run under
    it. None when no store was selected."""
    uri = _selected
    if uri is None:
        return None
    source = _sources.get(uri)
    if source is None:
        source = _sources[uri] = open_source(uri)
    entry = source.find(str(arg))
    if not is_store_uri(uri):
        return Path(entry.ref)  # a spool is its own replica
    from trackmux.store.read import replica_root

    return source.replica(entry, replica_root(uri))
