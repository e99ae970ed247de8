"""What a backend shows of a batch of samples: the one projection every plugin uses.

Core applies it to every backend without native samples support (delivery's fallback,
core/delivery/sample_rows.py): the backend's cap (``sample_rows``) and policy
(``sample_policy``, ``sample_seed``) choose whole GRPO groups, and the chosen samples
become a table with ``step`` and ``sample`` columns, so a backend's table history shows
every step. A plugin that shows samples natively (``"samples"`` in its capabilities)
calls :func:`chosen` and :func:`records` with its own options for the same rows.
"""

from __future__ import annotations

from typing import Any

from trackmux.core.backends.contract import SAMPLE_POLICIES, Backend
from trackmux.core.delivery.fallbacks import samples_table
from trackmux.core.delivery.sample_rows import select, to_table
from trackmux.core.events import SamplesEvent, TableEvent

__all__ = ["SAMPLE_POLICIES", "chosen", "records", "samples_table", "select", "to_table"]


def chosen(event: SamplesEvent, backend: Backend) -> list[int]:
    """The indices of the samples ``backend`` shows (its cap, policy and seed)."""
    caps = [c for c in (event.max_rows, backend.sample_cap) if c is not None]
    return select(event, min(caps) if caps else None, backend.sample_policy,
                  backend.sample_seed)


def records(event: SamplesEvent, rows: list[int]) -> list[dict[str, Any]]:
    """The chosen samples as JSON-able dicts (the table's columns, one dict per sample)."""
    table: TableEvent = to_table(event, rows)
    return [dict(zip(table.columns, row, strict=True)) for row in table.rows]
