"""`import trackmux` stays light: no backend library, no numpy, no torch, no Pillow."""

from __future__ import annotations

import subprocess
import sys

HEAVY = "{'wandb','mlflow','swanlab','tensorboard','torch','numpy','PIL','click','tqdm','ray'}"


def test_import_trackmux_loads_no_backend_library_numpy_or_torch() -> None:
    code = (f"import trackmux, sys; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_listing_plugins_imports_no_backend_library() -> None:
    code = ("from trackmux.core.backends.registry import get_registry; import sys; "
            "names = sorted(get_registry().backends); "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout
