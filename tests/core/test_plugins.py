"""Plugin discovery through real entry points: a third-party distribution installed with
pip, a broken one, the allow-list and the autoload switch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import trackmux
from trackmux.core.backends.registry import Registry, get_registry

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trackmux-csv"
BROKEN = Path(__file__).parent / "data" / "broken_plugin"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example and the broken distribution, installed for real by pip into a folder."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(target), str(EXAMPLE), str(BROKEN)], check=True)
    assert list(target.glob("trackmux_csv-1.0.0.dist-info"))
    return target


def run_python(site: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(site), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, timeout=120)


def test_third_party_backend_used_without_changing_trackmux(site: Path, tmp_path: Path) -> None:
    code = f"""
import trackmux
run = trackmux.init(project="ext", backends=["csv"], dir={str(tmp_path)!r})
for step in range(5):
    run.log({{"reward/mean": step / 10}}, step=step)
print(run.dir)
print(run.finish().pending)
"""
    done = run_python(site, code)
    assert done.returncode == 0, done.stderr
    run_dir, pending = done.stdout.split()[:2]
    assert pending == "{}"
    rows = (Path(run_dir) / "csv").glob("*.csv").__next__().read_text().splitlines()
    assert rows[0] == "step,time,key,value"
    assert [r.split(",")[0] for r in rows[1:]] == ["0", "1", "2", "3", "4"]
    assert rows[-1].endswith("reward/mean,0.4")


def test_example_distribution_passes_conformance_suite(site: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(EXAMPLE / "tests")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)}, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout


def test_plugins_command_reports_broken_plugin_once_and_lists_the_rest(site: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "trackmux", "plugins"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for name in ("console", "file", "wandb", "mlflow", "swanlab", "tensorboard", "csv"):
        assert f"backend {name}:" in out, out
    assert "csv (trackmux-csv 1.0.0)" in out
    assert ("broken (trackmux-broken 0.0.7): FAILED TO LOAD: ImportError: this plugin is "
            "broken on purpose") in out
    warnings = [line for line in done.stderr.splitlines() if "broken" in line]
    assert len(warnings) == 1 and "trackmux-broken 0.0.7" in warnings[0]


def test_allow_list_and_autoload_switch(site: Path) -> None:
    code = ("from trackmux.core.backends.registry import get_registry; "
            "print(sorted(get_registry().backends))")
    allowed = run_python(site, code, TRACKMUX_PLUGINS="csv")
    assert "'csv'" in allowed.stdout and "broken" not in allowed.stderr
    assert "'console'" in allowed.stdout  # built-ins always load
    disabled = run_python(site, code, TRACKMUX_DISABLE_PLUGIN_AUTOLOAD="1")
    assert "'csv'" not in disabled.stdout and "'file'" in disabled.stdout
    assert "broken" not in disabled.stderr


def test_unknown_backend_lists_installed_and_names_the_extra(tmp_path: Path) -> None:
    with pytest.raises(trackmux.UnknownBackendError) as info:
        trackmux.init(backends=["console", "clearml-nope"], dir=tmp_path)
    message = str(info.value)
    assert "'clearml-nope'" in message and "console" in message and "file" in message
    assert not list(tmp_path.iterdir()), "nothing may be created for a bad backend list"


def test_backend_with_missing_library_names_the_extra() -> None:
    registry = Registry(get_registry().manager)

    class Plugin:
        @staticmethod
        @trackmux.hookimpl
        def trackmux_register_backends(register: object) -> None:
            register("needs-lib", trackmux.Backend, requires=("no_such_module_xyz",),  # type: ignore[operator]
                     extra="needslib")

    registry.register_plugin(Plugin(), "needs-lib-plugin")
    with pytest.raises(trackmux.UnknownBackendError,
                       match=r"registered, but .*pip install no_such_module_xyz .*pip "
                             r"install -e '\.\[needslib\]'.*ready to use: (?!.*needs-lib)"):
        registry.backend("needs-lib")
    with pytest.raises(trackmux.UnknownBackendError, match=r"Installed backends: .*needs-lib"):
        registry.backend("wandbx")
