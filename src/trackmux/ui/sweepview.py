"""The Sweeps tab: the sweeps stored under the served folders, read without writing.

A sweep is an Optuna study in ``ROOT/.sweeps/sweeps.db`` (trackmux/sweeps/storage.py).
The UI opens that file through SQLite's read-only mode (``file:...?mode=ro``, handed to
SQLAlchemy as its connection ``creator``): SQLite itself refuses any write, so the page
can never change a sweep that agents are running, not even its file's mtime. Optuna
stays optional: without it the tab says "not available in this install".

Sweeps are named in URLs by an opaque id (a hash of the storage file and the study's
name), as runs are; no path a request carries is ever opened.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from trackmux.ui import importance
from trackmux.ui.sources import NOT_AVAILABLE, Unavailable

SWEEPS_DB = Path(".sweeps") / "sweeps.db"
LOCK_WAIT_SECONDS = 10  # an agent holding SQLite's write lock: wait, then a 500
METHOD = ("Target: each trial's value of the sweep metric; a pruned trial counts as worse "
          "than every complete one, as the sampler counts it (pruned trials tie below the "
          "worst); failed trials are left out. Numeric parameters: Spearman's rank "
          "correlation with the target (signed); others: the correlation ratio eta of the "
          "target's ranks over their values. Importance is the absolute value; the interval "
          "is a 90% percentile bootstrap over trials (1,000 resamples). Few trials give "
          "wide intervals.")


def available() -> bool:
    try:
        _optuna()
    except Unavailable:
        return False
    return True


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as exc:
        raise Unavailable(f"sweeps: {NOT_AVAILABLE} (Optuna is missing: pip install "
                          f"'trackmux[sweeps]'; {exc})") from None
    return optuna


def databases(roots: Sequence[Path]) -> list[Path]:
    """Each root's sweep storage: a regular file (no symlink) inside the root."""
    out = []
    for root in roots:
        path = root / SWEEPS_DB
        if path.is_symlink() or path.parent.is_symlink() or not path.is_file():
            continue
        with contextlib.suppress(OSError):
            if path.resolve().is_relative_to(root):
                out.append(path.resolve())
    return out


def sweep_key(db: Path, name: str) -> str:
    return hashlib.sha1(f"{db}\0{name}".encode()).hexdigest()[:12]


@contextlib.contextmanager
def read_only(db: Path) -> Iterator[Any]:
    """Optuna's storage over ``db`` opened read-only by SQLite (any write is refused)."""
    optuna = _optuna()
    from sqlalchemy.pool import NullPool

    uri = db.as_uri() + "?mode=ro"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT_SECONDS,
                               check_same_thread=False)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(
        "sqlite://", engine_kwargs={"creator": connect, "poolclass": NullPool},
        skip_compatibility_check=True, skip_table_creation=True)
    try:
        yield storage
    finally:
        storage.engine.dispose()


def _is_sweep(study: Any) -> bool:
    return isinstance(study.user_attrs.get("sweep"), dict)


def _load(storage: Any, db: Path, name: str) -> dict[str, Any]:
    """``trackmux sweep show --json`` of one study (trackmux/sweeps/show.py)."""
    optuna = _optuna()
    from trackmux.sweeps import show
    from trackmux.sweeps.spec import parse
    from trackmux.sweeps.study import Sweep

    study = optuna.load_study(study_name=name, storage=storage,
                              sampler=optuna.samplers.RandomSampler())
    sweep = Sweep(name, parse(study.user_attrs.get("sweep") or {}), study, f"sqlite:///{db}")
    data = show.summary(sweep)
    data["created_at"] = study.user_attrs.get("created_at")
    data["params"] = [p.name for p in sweep.spec.params]
    return data


def list_sweeps(roots: Sequence[Path]) -> dict[str, Any]:
    """Every sweep under the roots, newest first: id, sweep id, method, metric, counts."""
    try:
        optuna = _optuna()
    except Unavailable as exc:
        return {"available": False, "message": str(exc), "sweeps": [], "errors": []}
    from trackmux.sweeps import show

    out, errors = [], []
    for db in databases(roots):
        try:
            out.extend(_summaries(optuna, show, db))
        except Exception as exc:  # a damaged file: say so, list the other roots' sweeps
            errors.append(f"{db}: {_cause(exc)}")
    out.sort(key=lambda s: -(s["created_at"] or 0))
    return {"available": True, "message": "", "sweeps": out, "errors": errors}


def _cause(exc: BaseException) -> str:
    """The first cause (Optuna wraps SQLite's own message in a generic one)."""
    while (exc.__cause__ or exc.__context__) is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _summaries(optuna: Any, show: Any, db: Path) -> list[dict[str, Any]]:
    """The trackmux sweeps in one storage file (other Optuna studies are left out)."""
    out = []
    with read_only(db) as storage:
        for study in storage.get_all_studies():
            if not _is_sweep(study):
                continue
            trials = storage.get_all_trials(study._study_id, deepcopy=False)
            counts: dict[str, int] = {}
            for trial in trials:
                state = show.STATES.get(trial.state.name, trial.state.name.lower())
                counts[state] = counts.get(state, 0) + 1
            raw = study.user_attrs["sweep"]
            metric = raw.get("metric") if isinstance(raw.get("metric"), dict) else {}
            out.append({"id": sweep_key(db, study.study_name), "sweep": study.study_name,
                        "storage": str(db), "method": raw.get("method"),
                        "metric": metric.get("name"), "goal": (
                            "maximize" if study.direction ==
                            optuna.study.StudyDirection.MAXIMIZE else "minimize"),
                        "trials": len(trials), "counts": counts,
                        "created_at": study.user_attrs.get("created_at")})
    return out


def targets(trials: list[dict[str, Any]], goal: str) -> list[float | None]:
    """Each trial's target for importance: its value when complete; a pruned trial ties
    below (for ``minimize`` above) the worst complete one; a failed trial has none."""
    def finite(value: Any) -> bool:
        return isinstance(value, (int, float)) and math.isfinite(value)

    done = [t["value"] for t in trials if t["state"] == "complete" and finite(t["value"])]
    maximize = goal == "maximize"
    worst = (min(done) if maximize else max(done)) if done else 0.0
    below = worst - 1.0 if maximize else worst + 1.0
    out: list[float | None] = []
    for trial in trials:
        if trial["state"] == "complete" and finite(trial["value"]):
            out.append(float(trial["value"]))
        elif trial["state"] == "pruned":
            out.append(below)
        else:
            out.append(None)
    return out


def detail(roots: Sequence[Path], key: str, runs: dict[Path, str]) -> dict[str, Any]:
    """One sweep as ``sweep show --json`` gives it, each trial's ``run`` (its UI run id
    when the run is among the served runs, else null) and the parameters' importance.

    ``runs``: the served runs' resolved folders -> their UI ids."""
    _optuna()  # Unavailable (a 404 saying so) before looking for a sweep
    for db in databases(roots):
        try:
            with read_only(db) as storage:
                names = [s.study_name for s in storage.get_all_studies() if _is_sweep(s)]
        except Exception:  # a damaged file (named by /api/sweeps): look in the others
            continue
        for name in names:
            if sweep_key(db, name) == key:
                with read_only(db) as storage:
                    data = _load(storage, db, name)
                return _complete(data, key, db, runs)
    raise LookupError("no such sweep under the served folders")


@functools.lru_cache(maxsize=32)
def _importance(given: str) -> list[dict[str, Any]]:
    """Importance of (configs, targets) as JSON: the page asks again every 5 s while the
    tab is open, and the bootstrap is most of the answer's time (~0.1 s per parameter)."""
    configs, goals = json.loads(given)
    return [imp.as_json() for imp in importance.importances(configs, goals)]


def _complete(data: dict[str, Any], key: str, db: Path,
              runs: dict[Path, str]) -> dict[str, Any]:
    data["id"] = key
    data["storage"] = str(db)
    for trial in data["trials"]:
        trial["run"] = None
        if trial.get("run_dir"):
            with contextlib.suppress(OSError):
                trial["run"] = runs.get(Path(trial["run_dir"]).resolve())
    configs = [dict(t["params"]) for t in data["trials"]]
    data["importance"] = _importance(json.dumps(
        [configs, targets(data["trials"], data["metric"]["goal"])], default=str))
    data["importance_method"] = METHOD
    return data
