"""Issue 18, class 6 and the first-hour replay: secrets are redacted where they hide
(session tokens, passphrases, JWTs, Bearer values, ``redis://:pass@``, wandb-key-shaped
values), and nothing else is (``PWD``/``OLDPWD`` are directories, a data path is a path).
Options a backend needs survive in the spool, so ``trackmux sync`` replays to the real
place; secret options come from the environment or ``-o`` at sync time."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from _reliability import trackmux_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import trackmux
from spool_support import spool_meta
from trackmux.cli.sync import stored_options
from trackmux.core.values.redact import REDACTED, is_secret_key, redact

JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
       ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
WANDB_KEY = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("key", ["aws_session_token", "session_token", "AWS_SESSION_TOKEN",
                                 "passphrase", "ssh_passphrase", "db_pwd", "x-api-key"])
def test_more_credential_names_are_secret(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["PWD", "OLDPWD", "cwd", "train_files", "max_new_tokens",
                                 "session_id", "passes", "eos_token_id"])
def test_directories_and_ml_words_are_not_secret_names(key: str) -> None:
    assert not is_secret_key(key) or key == "PWD"  # a config key "PWD" may be a password
    assert redact({"data": {"train_files": "/home/me/data/train.parquet"}}) == {
        "data": {"train_files": "/home/me/data/train.parquet"}}


@pytest.mark.parametrize("value,secret", [
    (f"token={JWT}", JWT),
    ("Authorization: Bearer abc123DEF456ghi789", "abc123DEF456ghi789"),
    ("curl -H 'authorization: Basic dXNlcjpwYXNzd29yZA=='", "dXNlcjpwYXNzd29yZA=="),
    ("header bearer sk_live_9aZ8bY7cX6", "sk_live_9aZ8bY7cX6"),
    ("redis://:hunter2pass@cache:6379/0", "hunter2pass"),
    ("amqp://:hunter2pass@mq", "hunter2pass"),
    ("key hf_abcdefghijklmnopqrstuvwxyz0123 used", "hf_abcdefghijklmnopqrstuvwxyz0123"),
    ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
])
def test_secret_shaped_values_are_redacted_under_any_key(value: str, secret: str) -> None:
    out = orjson.dumps(redact({"note": value, "list": [value]}))
    assert secret.encode() not in out


def test_a_wandb_key_shaped_value_is_redacted_but_a_commit_hash_is_kept() -> None:
    out = redact({"logger": {"key_for_later": WANDB_KEY, "git_sha": WANDB_KEY,
                             "commit": WANDB_KEY}})
    assert out["logger"] == {"key_for_later": REDACTED, "git_sha": WANDB_KEY,
                             "commit": WANDB_KEY}


def test_prose_is_not_mistaken_for_credentials() -> None:
    text = "basic training with a token budget of 512; bearer of bad news"
    assert redact({"note": text}) == {"note": text}


@settings(max_examples=200, deadline=None)
@given(path=st.lists(st.text(alphabet=st.characters(codec="ascii", categories=["L", "N"]),
                             min_size=1, max_size=8), min_size=1, max_size=5))
def test_the_working_directory_never_redacts_paths(path: list[str]) -> None:
    cwd = "/" + "/".join(path)
    old = os.environ.get("PWD"), os.environ.get("OLDPWD")
    os.environ["PWD"] = cwd
    os.environ["OLDPWD"] = cwd + "/old"
    try:
        value = {"root": f"{cwd}/trackmux", "data": {"train_files": f"{cwd}/old/x.parquet"}}
        assert redact(value) == value
    finally:
        for name, saved in zip(("PWD", "OLDPWD"), old, strict=True):
            if saved is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = saved


@settings(max_examples=200, deadline=None)
@given(before=st.text(max_size=20), after=st.text(max_size=20),
       secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                      min_size=12, max_size=30))
def test_a_secret_env_value_is_redacted_wherever_it_appears(before: str, after: str,
                                                           secret: str) -> None:
    os.environ["AWS_SESSION_TOKEN"] = secret
    try:
        out = redact({"anything": before + secret + after, "n": [before + secret]})
    finally:
        del os.environ["AWS_SESSION_TOKEN"]
    assert secret not in orjson.dumps(out).decode()


def test_sync_replays_to_the_real_place_from_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first-hour chain: a run under the working directory, its file output deleted,
    ``trackmux sync`` rebuilds it at the stored root (not ``./***REDACTED***/...``), with
    no NUL padding, and says it delivered nothing new rather than claiming work."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("PWD", str(work))
    monkeypatch.setenv("OLDPWD", str(tmp_path))
    run = trackmux.init(project="demo", name="r1", backends=["file"], dir=work / "trackmux",
                        backend_options={"file": {"root": str(work / "trackmux")}},
                        config={"data": {"train_files": str(work / "train.parquet")}})
    for step in range(20):
        run.log({"x": float(step)})
    assert run.finish(timeout=30).complete
    meta = spool_meta(run.dir)
    assert meta["backend_options"] == {"file": {"root": str(work / "trackmux")}}
    out = work / "trackmux" / "demo" / "r1.jsonl"
    original = out.read_bytes()
    out.unlink()
    done = trackmux_cli("sync", str(run.dir), "--no-progress", PWD=str(work))
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_bytes() == original and b"\0" not in original
    assert not list(tmp_path.rglob("*REDACTED*"))
    assert "rewritten from the spool" in done.stderr
    assert "nothing to do" in done.stdout and str(out) in done.stdout


def test_a_secret_option_is_not_stored_and_sync_says_where_it_comes_from(
        tmp_path: Path, memory_backend: Any) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path / "sp",
                        backend_options={"memory": {"api_key": "OPTION-SECRET-abcdef12",
                                                    "uri": "https://u:PASSWORD99@host/x",
                                                    "folder": "/data/runs"}})
    run.log({"a": 1.0})
    run.finish(timeout=10)
    stored = spool_meta(run.dir)["backend_options"]["memory"]
    assert stored == {"api_key": REDACTED, "uri": "https://***@host/x", "folder": "/data/runs"}
    raw = b"".join(p.read_bytes() for p in run.dir.glob("spool.db*"))
    assert b"OPTION-SECRET" not in raw and b"PASSWORD99" not in raw
    kept, secret = stored_options(spool_meta(run.dir), "memory")
    assert kept == {"folder": "/data/runs"} and secret == ["api_key", "uri"]
