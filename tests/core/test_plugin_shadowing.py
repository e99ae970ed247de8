"""A third party's plugin that uses a built-in's names (entry point ``file``, backends
``file`` and ``console``), installed for real by pip: nothing is dropped silently. The
third party's serves by default, ``trackmux plugins`` lists both and says which serves,
and the backend option ``provider`` or ``TRACKMUX_BACKEND_PROVIDERS`` picks the other,
also in the delivery process and in ``trackmux sync``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trackmux.core import settings

SHADOW = Path(__file__).parent / "data" / "shadow_plugin"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(target), str(SHADOW)], check=True)
    assert list(target.glob("trackmux_shadow-0.3.0.dist-info"))
    return target


def run_python(site: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(site)}
    environ.pop("TRACKMUX_BACKEND_PROVIDERS", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**environ, **env}, timeout=120)


def test_plugins_lists_both_providers_and_says_which_serves(site: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "trackmux", "plugins"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "file@trackmux-shadow (trackmux-shadow 0.3.0)" in out, out
    assert out.count("backend file:") == 2 and out.count("backend console:") == 2
    assert "SERVES 'file' (also provided by trackmux" in out
    assert "does not serve 'file': trackmux-shadow does" in out
    assert "TRACKMUX_BACKEND_PROVIDERS=file=trackmux" in out
    assert "does not serve 'console': trackmux-shadow does" in out
    assert "provided by trackmux-shadow" in done.stderr  # said in the log too


CODE = """
import json, trackmux
run = trackmux.init(project="p", backends=["file"], dir={dir!r}, backend_options={opts})
run.log({{"x": 1.0}}, step=1)
assert run.finish(timeout=60).complete
print(run.dir)
"""


def test_the_third_party_serves_by_default(site: Path, tmp_path: Path) -> None:
    done = run_python(site, CODE.format(dir=str(tmp_path / "a"), opts="{}"))
    assert done.returncode == 0, done.stderr
    run_dir = Path(done.stdout.split()[-1])
    lines = (run_dir / "shadow-file.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"step": 1, "data": {"x": 1.0}}


@pytest.mark.parametrize("how", ["option", "env"])
def test_a_setting_picks_the_builtin(site: Path, tmp_path: Path, how: str) -> None:
    out = tmp_path / "out.jsonl"
    opts = {"file": {"path": str(out)}}
    env = {}
    if how == "option":
        opts["file"]["provider"] = "trackmux"
    else:
        env["TRACKMUX_BACKEND_PROVIDERS"] = "file=trackmux"
    done = run_python(site, CODE.format(dir=str(tmp_path / "a"), opts=repr(opts)), **env)
    assert done.returncode == 0, done.stderr
    run_dir = Path(done.stdout.split()[-1])
    assert not (run_dir / "shadow-file.jsonl").exists()
    assert json.loads(out.read_text().splitlines()[0])["data"] == {"x": 1.0}
    if how == "option":  # kept with the run: a later sync uses the same provider
        out.unlink()
        sync = subprocess.run([sys.executable, "-m", "trackmux", "sync", str(run_dir),
                               "--no-progress"], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
        assert sync.returncode == 0, sync.stderr
        assert out.exists() and not (run_dir / "shadow-file.jsonl").exists()


def test_an_unknown_provider_is_a_clear_error(site: Path, tmp_path: Path) -> None:
    opts = {"file": {"provider": "nobody"}}
    done = run_python(site, CODE.format(dir=str(tmp_path / "a"), opts=repr(opts)))
    assert done.returncode != 0
    assert "backend 'file' has no provider 'nobody'" in done.stderr
    assert "trackmux-shadow" in done.stderr and "trackmux" in done.stderr
    assert not (tmp_path / "a").exists()


def test_the_providers_setting_is_checked() -> None:
    assert settings.backend_providers("file=trackmux, console = x") == {
        "file": "trackmux", "console": "x"}
    with pytest.raises(ValueError, match="TRACKMUX_BACKEND_PROVIDERS must be name=provider"):
        settings.backend_providers("file")
