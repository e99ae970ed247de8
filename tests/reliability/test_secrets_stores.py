"""Secrets under every name the outside suite tried (issue 27 items 3 and 8): vendor and
crypto keys (``wandb_key``, ``hf_key``, ``openai_key``, ``anthropic_key``,
``encryption_key``), session-style tokens (``admin_token``, ``login_token``,
``n_token``) and W&B Server keys by shape (``local-<40 hex>``) never reach the disk: not
the spool, not the file backend, mlflow's store, tensorboard's event file, swanlab's or
wandb's offline run. Every byte under the run's folders is searched. ML words that
merely contain "token" or "key" arrive unchanged."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

pytest.importorskip("mlflow", reason="needs mlflow, tensorboard, wandb and swanlab (tox -e stores)")
pytest.importorskip("tensorboard", reason="needs tensorboard (tox -e stores)")
pytest.importorskip("wandb", reason="needs wandb (tox -e stores)")
pytest.importorskip("swanlab", reason="needs swanlab (tox -e stores)")

import trackmux

WANDB_SERVER_KEY = "local-" + "0123456789abcdef" * 2 + "01234567"
SECRETS = {
    "wandb_key": "WANDBKEY-aaaa-1111-secret",
    "hf_key": "HFKEY-bbbb-2222-secret",
    "openai_key": "OPENAIKEY-cccc-3333-secret",
    "anthropic_key": "ANTHROPICKEY-dddd-4444-secret",
    "encryption_key": "ENCRYPTIONKEY-eeee-5555",
    "admin_token": "ADMINTOKEN-ffff-6666",
    "login_token": "LOGINTOKEN-gggg-7777",
    "n_token": "NTOKEN-hhhh-8888-secret",
    "session_token": "SESSIONTOKEN-iiii-9999",
}
KEPT = {"max_new_tokens": 512, "num_tokens": 1024, "max_tokens": 64, "n_tokens": 8,
        "tokenizer": "qwen2", "key_padding": "left", "prompt_key": "prompt",
        "pad_token": "<pad>", "ppo_max_token_len_per_gpu": 16384}


def test_no_credential_reaches_any_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("MLFLOW_TRACKING_URI", "TENSORBOARD_DIR", "SWANLAB_LOG_DIR", "WANDB_DIR",
                 "VERL_FILE_LOGGER_PATH", "VERL_FILE_LOGGER_ROOT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("SWANLAB_MODE", "offline")
    config = {"api": dict(SECRETS), "logger": {"server": WANDB_SERVER_KEY,
                                              "note": f"key {WANDB_SERVER_KEY} in text"},
              "rollout": dict(KEPT)}
    run = trackmux.init(project="sec", backends=["file", "tensorboard", "mlflow", "swanlab",
                                                 "wandb"], dir=tmp_path / "trackmux",
                        config=config)
    run.log({"loss": 1.0}, step=1)
    raw_live = b"".join(p.read_bytes() for p in run.dir.glob("spool.db*"))
    assert run.finish(timeout=240).complete
    everything = raw_live + b"".join(p.read_bytes() for p in tmp_path.rglob("*")
                                     if p.is_file())
    for secret in [*SECRETS.values(), WANDB_SERVER_KEY, WANDB_SERVER_KEY[6:]]:
        assert secret.encode() not in everything, secret
    stored = orjson.loads((run.dir / "file" / f"{run.name}.config.json").read_bytes())
    assert stored["rollout"] == KEPT
    assert set(stored["api"].values()) == {"***REDACTED***"}


def test_no_secret_of_the_working_tree_reaches_any_store(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """Issue 34 items 1-3: a trainer in a git tree whose uncommitted change holds secrets
    (config literals, ``sk-``/``hf_`` keys, a URL password, an environment value), with a
    changed tracked ``.env``, a staged new ``creds.yaml`` and secrets nested in JSON and
    Hydra command-line values (trackmux/testing/secrets.py), with ``save_code=True``.
    Every file of the spool and of every backend's store is searched."""
    import shutil

    from trackmux.testing.secrets import leaks, make_repo, run_trainer

    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "WANDB_MODE": "offline", "SWANLAB_MODE": "offline",
           "TMPDIR": str(home)}
    for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):
        env[name] = str(home / name.lower())
    for name in ("MLFLOW_TRACKING_URI", "TENSORBOARD_DIR", "SWANLAB_LOG_DIR", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "trackmux"
    done = run_trainer(repo, out, ["file", "tensorboard", "mlflow", "wandb", "swanlab"], env)
    assert done.returncode == 0 and "True" in done.stdout, done.stderr
    stores = {p.name for p in next(out.glob("sec/*")).iterdir() if p.is_dir()}
    assert {"file", "mlflow", "tensorboard", "wandb"} <= stores | {
        p.name for p in out.iterdir()}, stores
    untracked = [p for p in repo.root.iterdir() if p.name not in (
        ".git", "train.py", ".env", "config.yaml", "creds.yaml")]
    assert leaks([out, home, *untracked]) == []
    wandb_code = [p for p in out.rglob("train.py") if "trackmux-code-" in str(p)]
    assert wandb_code, "the wandb code record should carry the script (save_code=True)"
    assert all("***REDACTED***" in p.read_text() for p in wandb_code)
