"""Session-wide test settings: nothing reaches the network, spools go to tmp dirs."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("SWANLAB_MODE", "offline")
os.environ.setdefault("DO_NOT_TRACK", "1")
# Provenance (issue 25, on by default) adds one event per run; suites that count a run's
# events exactly run without it. tests/provenance turns it back on (and checks the default).
os.environ.setdefault("TRACKMUX_PROVENANCE", "0")

try:  # CI (tox sets HYPOTHESIS_PROFILE=ci) replays the same examples on every run, so a
    # landing never hinges on a random draw; a developer's runs keep exploring new ones.
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("ci", derandomize=True)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
except ImportError:
    pass


@pytest.fixture(scope="session", autouse=True)
def _session_working_directory_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The same for session fixtures (a server, an mlflow client made once)."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("session-cwd"))
    yield
    os.chdir(before)


@pytest.fixture(autouse=True)
def _working_directory_in_tmp(tmp_path_factory: pytest.TempPathFactory,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """What a library writes relative to the working directory (mlflow's ``./mlruns``
    artifact root, ``tensorboard_log/``, ``./trackmux``) lands in the test's own temporary
    folder, never in the checkout. A folder apart from ``tmp_path``, whose contents some
    tests count."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


CHECKOUT = Path(__file__).resolve().parents[1]


def _checkout_entries() -> set[str]:
    # dot names are tools' caches (.tox, .pytest_cache, .mypy_cache), never run output
    return {name for name in os.listdir(CHECKOUT) if not name.startswith(".")}


@pytest.fixture(autouse=True)
def _nothing_written_into_the_checkout() -> Iterator[None]:
    """A test that writes run output into the checkout fails, naming what it wrote: a file
    backend once wrote ``p/`` and ``w/`` at the repository root, and they were committed
    (issue 33.20). The working directory is already a temporary folder (above); this
    catches absolute paths and subprocesses started in the checkout."""
    before = _checkout_entries()
    yield
    new = sorted(_checkout_entries() - before)
    if new:
        pytest.fail(f"the test wrote {new} into the checkout {CHECKOUT}; write under "
                    "tmp_path instead", pytrace=False)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mounts a real tmpfs of a given size (``"1m"``, ``"2m"``) that a test can fill, and
    unmounts it afterwards; the test is skipped where mount is refused."""
    mounts: list[Path] = []

    def mount(size: str) -> Path:
        where = tmp_path / f"tmpfs{len(mounts)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                               str(where)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a {size} tmpfs here: {done.stderr.strip()}")
        mounts.append(where)
        return where

    try:
        yield mount
    finally:
        for where in mounts:
            subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_tmpfs(tmpfs: Callable[[str], Path]) -> Path:
    """A real 1 MB filesystem (tmpfs) that a test can fill."""
    return tmpfs("1m")


@pytest.fixture
def fill_disk() -> Callable[[Path], None]:
    """Write zeros to ``path`` until its filesystem is full (unbuffered: nothing is left to
    flush at close); delete the file to free the space again."""
    def fill(path: Path) -> None:
        try:
            with open(path, "wb", buffering=0) as handle:
                while True:
                    handle.write(b"\0" * 65536)
        except OSError:
            pass

    return fill


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad input raises in this test (``TRACKMUX_STRICT=1``), as in development: for tests
    that check the error's words. The default (drop, name once, count) has its own tests."""
    monkeypatch.setenv("TRACKMUX_STRICT", "1")


#: Debian's Chromium (``apt-get install chromium``; CI installs it), driven by the
#: ``playwright`` pip package with ``executable_path`` (never ``playwright install``)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for every browser test of the session (a page each), here
    once for every suite: a second session fixture would start a second sync Playwright
    while the first one's event loop runs, which Playwright refuses."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()
