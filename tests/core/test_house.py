"""The house (docs/architecture.md): core's floors import one way, and nothing loops.

Read from the source with ``ast``, so an import hidden inside a function counts too."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

import trackmux

PKG = Path(trackmux.__file__).parent
FLOORS = ["shared", "values", "spool", "backends", "delivery", "lifecycle"]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def _floor(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["trackmux", "core"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in FLOORS else "shared"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_core_floors_import_only_the_floors_before_them() -> None:
    upward = []
    for path in (PKG / "core").rglob("*.py"):
        me = _floor(_module_name(path)) or "shared"
        for module in _imports(path):
            if module.startswith("trackmux.") and not module.startswith(
                    ("trackmux.core", "trackmux.hookspecs", "trackmux.__version__")):
                upward.append(f"{path.relative_to(PKG)} imports {module} (outside core)")
            floor = _floor(module)
            if floor and FLOORS.index(floor) > FLOORS.index(me):
                upward.append(f"{path.relative_to(PKG)} ({me}) imports {module} ({floor})")
    assert upward == []


def test_no_import_cycle_between_trackmux_modules() -> None:
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph = {name: {m for m in _imports(path) if m in modules and m != name}
             for name, path in modules.items()}
    # a package's __init__ importing its own submodules is not a loop of rooms
    for name in graph:
        graph[name] = {m for m in graph[name] if not m.startswith(name + ".")}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt):], nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


REPO = Path(__file__).resolve().parents[2]
RUN_OUTPUT = (".run-id", ".jsonl", ".db", ".db-wal", ".db-shm", ".tfevents", ".wandb")


def test_no_run_output_is_committed() -> None:
    """Run output (a file backend's ``*.jsonl``/``*.run-id``, a spool, tensorboard events) is
    committed nowhere but under a test's ``data`` folder: a test that wrote into the checkout
    once left 20 such files at the root (issue 33.20)."""
    done = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("not a git checkout (an sdist or an installed copy)")
    stray = [name for name in done.stdout.splitlines()
             if (name.endswith(RUN_OUTPUT) or "tfevents" in name or "/spool.db" in name)
             and "/data/" not in name]
    assert stray == []
