"""The verl drop-in's doctor option (docs/doctor.md): ``+trainer.trackmux.doctor=...``."""

from __future__ import annotations

from pathlib import Path

import pytest

import trackmux


def test_verl_option_reaches_init_and_is_checked(tmp_path: Path) -> None:
    """``+trainer.trackmux.doctor=...``: the drop-in's option table hands it to init()
    (importing the drop-in needs verl: this runs where verl is installed)."""
    pytest.importorskip("verl.utils")
    from trackmux.integrations.verl import trackmux_options

    config = {"trainer": {"trackmux": {"dir": str(tmp_path),
                                       "doctor": {"kl_blowp": {"ratio": 5}}}}}
    with pytest.raises(ValueError, match="kl_blowp"):
        trackmux.init(project="p", backends=["file"], **trackmux_options(config))
    config["trainer"]["trackmux"]["doctor"] = {"kl_blowup": {"ratio": 5}}
    run = trackmux.init(project="p", backends=["file"], **trackmux_options(config),
                        backend_options={"file": {"root": str(tmp_path / "o")}})
    run.finish(timeout=30)
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run.dir)
    assert reader.meta()["watchers"] == ["trackmux.doctor.live:watcher"]
    reader.close()
