"""No secret of the working tree, the environment or the command line reaches the disk
through provenance (issue 34 items 1-3): a trainer runs in a git tree whose uncommitted
change holds secrets in the shapes scripts hold them, with a changed tracked ``.env``, a
staged new ``creds.yaml`` and secrets nested in JSON and Hydra command-line values
(trackmux/testing/secrets.py). Every byte of the spool, the file backend, the code
artifact of ``save_code=True`` and what ``show``, ``diff`` and ``report`` write is
searched. The same tree goes through tensorboard, mlflow and wandb in
tests/reliability/test_secrets_stores.py (tox env ``stores``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from trackmux.core.values.redact import REDACTED
from trackmux.provenance.git import drop_secret_files, is_secret_file
from trackmux.testing.secrets import KEPT, SECRETS, leaks, make_repo, run_trainer

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "trackmux", *args], capture_output=True,
                          text=True, timeout=120, check=False)
    return done.stdout + done.stderr


def test_no_secret_of_the_tree_reaches_the_spool_the_file_backend_or_the_cli(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    out = tmp_path / "out"
    done = run_trainer(repo, out, ["file"])
    assert done.returncode == 0 and "True" in done.stdout, done.stderr
    run_dir = Path(done.stdout.split("RUN ")[1].split()[0])
    cli = tmp_path / "cli"
    cli.mkdir()
    (cli / "show.txt").write_text(_cli("show", str(run_dir)))
    (cli / "diff.txt").write_text(_cli("diff", str(run_dir), str(run_dir), "--json"))
    _cli("report", str(run_dir), "-o", str(cli / "report.html"))
    assert leaks([out, cli, tmp_path / "repo" / "mlruns"]) == []
    # the search finds what is there: the tree itself holds the secrets of its files
    assert {"assigned", "sk", "hf", "dotenv_plain", "creds_yaml", "config_yaml"} <= {
        name for name, _ in leaks([repo.root])}

    # and what should arrive did: the change, redacted; the secret files named, left out
    [record] = out.rglob("*.provenance.json")
    data = orjson.loads(record.read_bytes())
    assert data["git"]["diff_left_out"] == [".env", "creds.yaml"]
    assert data["save_code"] is True
    assert data["git"]["diff_redacted"] is True  # by the probe process, not in the GIL
    argv = " ".join(data["command"]["argv"])
    assert f'"api_key": "{REDACTED}"' in argv and f"api_key:{REDACTED}" in argv
    diff = record.with_name(record.name.replace(".json", ".diff")).read_text()
    assert all(line in diff for line in KEPT)
    assert "# trackmux: .env left out of this record: secret by its name" in diff
    assert "# trackmux: creds.yaml left out of this record: secret by its name" in diff
    assert f'API_KEY = "{REDACTED}"' in diff and f'password: str = "{REDACTED}"' in diff
    [code] = [p for p in out.rglob("train.py")]  # the save_code artifact's copy
    assert "learning_rate = 0.25" in code.read_text() and REDACTED in code.read_text()
    assert (cli / "report.html").stat().st_size > 0
    assert "left out:  .env, creds.yaml (secret by name)" in (cli / "show.txt").read_text()


def test_secret_files_by_name() -> None:
    for name in (".env", ".env.local", "prod.env", "aws_credentials", "creds.yaml",
                 "server.pem", "tls.key", "id_rsa", "id_ed25519.pub", "cert.p12",
                 "secrets.yaml", "deploy/.netrc", "sub/dir/.git-credentials"):
        assert is_secret_file(name), name
    for name in ("train.py", "config.yaml", "tokenizer.json", "keys.py", "README.md",
                 "environment.yml"):
        assert not is_secret_file(name), name


def test_a_renamed_secret_file_is_left_out_under_either_name() -> None:
    raw = (b"diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
           b"diff --git a/old.txt b/.env.prod\nsimilarity index 90%\nrename from old.txt\n"
           b"rename to .env.prod\n--- a/old.txt\n+++ b/.env.prod\n@@ -1 +1 @@\n"
           b"-X=1\n+X=" + SECRETS["dotenv_plain"].encode() + b"\n")
    kept, left_out = drop_secret_files(raw)
    assert left_out == [".env.prod"]
    assert SECRETS["dotenv_plain"].encode() not in kept and b"+b\n" in kept


def test_a_spool_recorded_before_these_rules_is_redacted_by_its_readers(
        tmp_path: Path) -> None:
    """A provenance event written unredacted (a spool from before issue 34): delivery to
    a backend, show, diff and the report redact its diff and argv on the way out."""
    import time

    import trackmux
    from trackmux.core.events import ProvenanceEvent

    old = {"argv_json": "olderargvsecret0001", "diff_assigned": "olderdiffsecret0001",
           "diff_sk": "sk-OLDERSPOOLKEY0000000001"}
    out = tmp_path / "out"
    run = trackmux.init(project="old", backends=["file"], dir=out, provenance=False)
    assert isinstance(run, trackmux.Run)
    data = {"command": {"argv": ["train.py", f'--config={{"api_key": "{old["argv_json"]}"}}'],
                        "entry": "train.py", "cwd": str(tmp_path)},
            "git": {"available": True, "commit": "abc", "dirty": True, "diff_bytes": 10}}
    diff = f'+API_KEY = "{old["diff_assigned"]}"\n+KEY2 = "{old["diff_sk"]}"\n+lr = 0.5\n'
    run._append(ProvenanceEvent(data, diff, 0, time.time()))
    run.log({"x": 1.0}, step=0)
    assert run.finish(timeout=60).complete
    cli = tmp_path / "cli"
    cli.mkdir()
    (cli / "show.txt").write_text(_cli("show", str(run.dir)))
    (cli / "diff.txt").write_text(_cli("diff", str(run.dir), str(run.dir), "--json"))
    _cli("report", str(run.dir), "-o", str(cli / "report.html"))
    readers = [p for p in out.rglob("*") if p.is_file() and "spool.db" not in p.name]
    assert leaks([cli], old) == []
    assert [hit for hit in leaks([out], old) if Path(hit[1]) in readers] == []
    [written] = out.rglob("*.provenance.diff")
    assert "+lr = 0.5" in written.read_text()
    assert leaks([out], old), "the spool itself keeps what an older trackmux wrote"
