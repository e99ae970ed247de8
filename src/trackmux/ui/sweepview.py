"""The Sweeps tab: the sweeps stored under the served folders, and in the served team
store, read without writing.

A sweep is an Optuna study in ``ROOT/.sweeps/sweeps.db`` (trackmux/sweeps/storage.py), or
in a PostgreSQL database (``sweep create --storage postgresql://...``). The UI opens an
SQLite file through SQLite's read-only mode (``file:...?mode=ro``, handed to SQLAlchemy
as its connection ``creator``), and the team store (``trackmux ui postgresql://...``) in
read-only transactions (``default_transaction_read_only``): the database itself refuses
any write, so the page can never change a sweep that agents are running, not even an
SQLite file's mtime. Optuna writes on open only into an empty storage (its version rows),
so a database without Optuna's tables is not opened at all: it has no sweeps. The reader
role of ``trackmux store init`` suffices (it may SELECT Optuna's tables). Optuna stays
optional: without it the tab says "not available in this install".

Sweeps are named in URLs by an opaque id (a hash of the storage and the study's name), as
runs are; no path a request carries is ever opened, and a DSN's password is never shown.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trackmux.ui import importance
from trackmux.ui.sources import NOT_AVAILABLE, Unavailable

SWEEPS_DB = Path(".sweeps") / "sweeps.db"
LOCK_WAIT_SECONDS = 10  # an agent holding SQLite's write lock: wait, then a 500
READ_ONLY_OPTIONS = "-c default_transaction_read_only=on"  # PostgreSQL refuses writes
NO_GRANT_HINT = ("the UI's role may not read Optuna's tables: as the database owner, run "
                 "`trackmux store init DSN --reader ROLE` again after the first sweep")
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
                          f"-e '.[sweeps]' in the trackmux checkout; {exc})") from None
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


@dataclass(frozen=True)
class StoreSweeps:
    """The sweeps in one schema of a served store's database (trackmux/store/sweeps.py)."""
    dsn: str
    schema: str

    def options(self) -> str:
        """libpq's ``options``: read-only transactions, Optuna's tables on the path."""
        quoted = '"' + self.schema.replace('"', '""') + '"'
        path = quoted.replace("\\", "\\\\").replace(" ", "\\ ")
        return f"{READ_ONLY_OPTIONS} -c search_path={path}"


Storage = Path | StoreSweeps  # an SQLite file under a served folder, or a store's schema


def label(db: Storage | str) -> str:
    """How a storage is shown and hashed: an SQLite file's path, a DSN without password
    (and the schema when it is not ``public``)."""
    if isinstance(db, Path):
        return str(db)
    from trackmux.store.connect import hide_password

    if isinstance(db, str):
        return hide_password(db)
    shown = hide_password(db.dsn)
    return shown if db.schema == "public" else f"{shown} (schema {db.schema})"


def sweep_key(db: Storage, name: str) -> str:
    return hashlib.sha1(f"{label(db)}\0{name}".encode()).hexdigest()[:12]


@contextlib.contextmanager
def read_only(db: Storage) -> Iterator[Any]:
    """Optuna's storage over ``db`` (an SQLite file, or a schema of a PostgreSQL
    database) opened so that the database refuses any write."""
    optuna = _optuna()
    from sqlalchemy.pool import NullPool

    engine: dict[str, Any] = {"poolclass": NullPool}
    if isinstance(db, Path):
        url, uri = "sqlite://", db.as_uri() + "?mode=ro"

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT_SECONDS,
                                   check_same_thread=False)

        engine["creator"] = connect
    else:
        from trackmux.store.connect import CONNECT_TIMEOUT
        from trackmux.sweeps.storage import resolve_url

        url = resolve_url(db.dsn)
        engine["connect_args"] = {"options": db.options(), "connect_timeout": CONNECT_TIMEOUT,
                                  "application_name": "trackmux-ui-sweeps"}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(url, engine_kwargs=engine,
                                         skip_compatibility_check=True,
                                         skip_table_creation=True)
    try:
        yield storage
    finally:
        storage.engine.dispose()


def store_sweeps(dsn: str) -> list[StoreSweeps]:
    """The schemas of the store's database that hold sweeps Optuna can open without
    writing (its version rows stamped); a role that may not read them raises."""
    from trackmux.store.connect import connect
    from trackmux.store.sweeps import has_version_rows, sweep_schemas

    conn = connect(dsn, autocommit=True, application="trackmux-ui-sweeps")
    try:
        return [StoreSweeps(dsn, schema) for schema in sweep_schemas(conn)
                if has_version_rows(conn, schema)]
    finally:
        conn.close()


def storages(roots: Sequence[Path], stores: Sequence[str],
             errors: list[str] | None = None) -> list[Storage]:
    """Where sweeps are: each root's SQLite file, then each served store's sweep schemas
    (a store that cannot be read is named in ``errors``, or skipped)."""
    found: list[Storage] = list(databases(roots))
    for dsn in stores:
        try:
            found.extend(store_sweeps(dsn))
        except Exception as exc:
            if errors is not None:
                errors.append(f"{label(dsn)}: {_cause(exc)}")
    return found


def _is_sweep(study: Any) -> bool:
    return isinstance(study.user_attrs.get("sweep"), dict)


def _load(storage: Any, db: Storage, name: str) -> dict[str, Any]:
    """``trackmux sweep show --json`` of one study (trackmux/sweeps/show.py)."""
    optuna = _optuna()
    from trackmux.sweeps import show
    from trackmux.sweeps.spec import parse
    from trackmux.sweeps.study import Sweep

    study = optuna.load_study(study_name=name, storage=storage,
                              sampler=optuna.samplers.RandomSampler())
    url = f"sqlite:///{db}" if isinstance(db, Path) else label(db)  # no password
    sweep = Sweep(name, parse(study.user_attrs.get("sweep") or {}), study, url)
    data = show.summary(sweep)
    data["created_at"] = study.user_attrs.get("created_at")
    data["params"] = [p.name for p in sweep.spec.params]
    return data


def list_sweeps(roots: Sequence[Path], stores: Sequence[str] = ()) -> dict[str, Any]:
    """Every sweep under the roots and in the served stores, newest first: id, sweep id,
    method, metric, counts."""
    try:
        optuna = _optuna()
    except Unavailable as exc:
        return {"available": False, "message": str(exc), "sweeps": [], "errors": []}
    from trackmux.sweeps import show

    out: list[dict[str, Any]] = []
    errors: list[str] = []
    for db in storages(roots, stores, errors):
        try:
            out.extend(_summaries(optuna, show, db))
        except Exception as exc:  # a damaged file: say so, list the other roots' sweeps
            errors.append(f"{label(db)}: {_cause(exc)}")
    out.sort(key=lambda s: -(s["created_at"] or 0))
    return {"available": True, "message": "", "sweeps": out, "errors": errors}


def _cause(exc: BaseException) -> str:
    """The first cause (Optuna wraps SQLite's own message in a generic one)."""
    while (exc.__cause__ or exc.__context__) is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    lines = str(exc).splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return f"{text} ({NO_GRANT_HINT})" if type(exc).__name__ == "InsufficientPrivilege" else text


def _summaries(optuna: Any, show: Any, db: Storage) -> list[dict[str, Any]]:
    """The trackmux sweeps in one storage (other Optuna studies are left out)."""
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
                        "storage": label(db), "method": raw.get("method"),
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


def detail(roots: Sequence[Path], key: str, runs: dict[Path, str],
           stores: Sequence[str] = ()) -> dict[str, Any]:
    """One sweep as ``sweep show --json`` gives it, each trial's ``run`` (its UI run id
    when the run is among the served runs, else null) and the parameters' importance.

    ``runs``: the served runs' resolved folders -> their UI ids."""
    _optuna()  # Unavailable (a 404 saying so) before looking for a sweep
    for db in storages(roots, stores):
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
    raise LookupError("no such sweep under the served folders or stores")


@functools.lru_cache(maxsize=32)
def _importance(given: str) -> list[dict[str, Any]]:
    """Importance of (configs, targets) as JSON: the page asks again every 5 s while the
    tab is open, and the bootstrap is most of the answer's time (~0.1 s per parameter)."""
    configs, goals = json.loads(given)
    return [imp.as_json() for imp in importance.importances(configs, goals)]


def _complete(data: dict[str, Any], key: str, db: Storage,
              runs: dict[Path, str]) -> dict[str, Any]:
    data["id"] = key
    data["storage"] = label(db)
    replicas = _by_store_run_id(runs) if isinstance(db, StoreSweeps) else {}
    for trial in data["trials"]:
        trial["run"] = None
        if trial.get("run_dir"):
            with contextlib.suppress(OSError):
                trial["run"] = runs.get(Path(trial["run_dir"]).resolve())
        if trial["run"] is None and trial.get("run_id"):  # ran on another machine
            trial["run"] = replicas.get(str(trial["run_id"]))
    configs = [dict(t["params"]) for t in data["trials"]]
    data["importance"] = _importance(json.dumps(
        [configs, targets(data["trials"], data["metric"]["goal"])], default=str))
    data["importance_method"] = METHOD
    return data


def _by_store_run_id(runs: dict[Path, str]) -> dict[str, str]:
    """Store replicas' run ids -> their UI ids (a replica's folder is ``HOST--RUN_ID``,
    trackmux/store/read.py); a run id two hosts share is left out (no guess)."""
    out: dict[str, str] = {}
    shared: set[str] = set()
    for folder, rid in runs.items():
        if "--" not in folder.name:
            continue
        run_id = folder.name.rsplit("--", 1)[1]
        if run_id in out:
            shared.add(run_id)
        out[run_id] = rid
    for run_id in shared:
        del out[run_id]
    return out
