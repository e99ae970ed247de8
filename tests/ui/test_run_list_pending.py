"""The run list's pending counts follow delivery: cursors live in the run's delivery.db
(core/spool/acks.py), which a run list kept by the spool's stamp alone never re-read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trackmux
from trackmux.core.spool.acks import DeliveryFile
from trackmux.ui.store import Store


def _backends(store: Store, run_dir: Path) -> dict[str, Any]:
    row = next(r for r in store.rows() if r["dir"] == str(run_dir.resolve()))
    return {b["name"]: b["pending"] for b in row["backends"]}


def test_pending_moves_when_only_delivery_wrote(tmp_path: Path) -> None:
    run = trackmux.init("p", "r", backends=[], dir=tmp_path, delivery="thread")
    for step in range(5):
        run.log({"loss": float(step)}, step=step)
    run.finish(timeout=30)
    run_dir = Path(run.dir)
    store = Store([tmp_path])
    store.scan(force=True)
    assert _backends(store, run_dir) == {}
    acks = DeliveryFile(run_dir)
    try:
        acks.ack("file", 3, None, {})
        last = _backends(store, run_dir)["file"]
        assert last > 0
        acks.ack("file", 3 + last, None, {})
        assert _backends(store, run_dir) == {"file": 0}
    finally:
        acks.close()
