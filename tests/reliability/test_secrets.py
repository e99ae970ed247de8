"""Secrets never reach the spool or a backend: credential-named config keys, credentials
inside URLs, and the values of secret environment variables are redacted before the
event exists. Checked in the raw bytes of the spool files and in the file backend's output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import trackmux
from trackmux.core.values.redact import REDACTED, is_secret_key, redact

SECRET_KEYS = [
    "api_key", "apikey", "API_KEY", "wandb_api_key", "openai.api-key", "token", "hf_token",
    "access_token", "refresh_token", "auth_token", "github_token", "secret", "client_secret",
    "aws_secret_access_key", "aws_access_key_id", "access_key", "password", "db_password",
    "passwd", "pwd", "private_key", "ssh_private_key", "credentials", "credential",
    "authorization", "session_key", "cookie", "bearer", "signature", "HF_TOKEN",
    "trainer.logger.wandb.api_key", "mlflow/token", "bearer_token", "api_token",
]
NOT_SECRET = [
    "max_tokens", "max_new_tokens", "min_tokens", "tokenizer", "tokenizer_name",
    "pad_token_id", "eos_token_id", "bos_token", "total_tokens", "num_tokens",
    "max_prompt_tokens", "response_tokens", "tokens_per_second", "token_length",
    "batch_tokens", "tokenize", "learning_rate", "keyword", "author", "passes",
    "key", "monkey",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_credential_named_keys_are_secret(key: str) -> None:
    assert is_secret_key(key)
    assert redact({key: "s3cr3t-value-xyz"}) == {key: REDACTED}


@pytest.mark.parametrize("key", NOT_SECRET)
def test_ml_words_that_merely_contain_token_are_kept(key: str) -> None:
    assert not is_secret_key(key)
    assert redact({key: 4096}) == {key: 4096}


@pytest.mark.parametrize("url", [
    "https://user:hunter2pass@host.example/path", "postgresql://admin:hunter2pass@db:5432/x",
    "http://hunter2pass@proxy:3128", "mlflow+https://u:hunter2pass@127.0.0.1:5000",
])
def test_credentials_in_urls_are_stripped(url: str) -> None:
    cleaned = redact({"uri": url, "nested": [{"endpoint": f"see {url} now"}]})
    assert "hunter2pass" not in orjson.dumps(cleaned).decode()
    assert "***@" in cleaned["uri"]


def _raw_spool_bytes(run_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(run_dir.glob("spool.db*")))


def test_no_secret_reaches_the_spool_bytes_or_the_file_backend(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_backend: Any) -> None:
    env_secret = "hf_ENVSECRET_0123456789abcdef"
    monkeypatch.setenv("HF_TOKEN", env_secret)
    monkeypatch.setenv("MY_SERVICE_API_KEY", "envkey-ABCDEFGH-999")
    secrets = ["sk-KEYVALUE-1234567890", "tok-VALUE-abcdefgh", "p4ssw0rd-VALUE",
               "URLPASS-5678", env_secret, "envkey-ABCDEFGH-999", "AKIAACCESSKEYVALUE"]
    config = {
        "wandb": {"api_key": secrets[0], "project": "p"},
        "hub_token": secrets[1],
        "db": {"password": secrets[2], "uri": f"postgresql://me:{secrets[3]}@db:5432/runs"},
        "note": f"downloaded with token {env_secret} from the hub",
        "list": [f"key={secrets[5]}"],
        "aws_access_key_id": secrets[6],
        "max_new_tokens": 512, "tokenizer": "qwen2", "pad_token_id": 0,
    }
    out = tmp_path / "out.jsonl"
    run = trackmux.init(project="secrets", backends=["file", "memory"], dir=tmp_path / "sp",
                        config=config, backend_options={
                            "file": {"path": str(out)},
                            "memory": {"api_key": "OPTION-SECRET-abcdef12"}})
    assert isinstance(run, trackmux.Run)
    run.log({"loss": 1.0})
    raw_while_running = _raw_spool_bytes(run.dir)
    assert run.finish(timeout=10).complete
    raw = raw_while_running + _raw_spool_bytes(run.dir)
    written = b"".join(p.read_bytes() for p in tmp_path.glob("out*") if p.is_file())
    delivered = orjson.dumps(memory_backend[run.id].of_kind("config")[0].config)
    for secret in [*secrets, "OPTION-SECRET-abcdef12"]:
        assert secret.encode() not in raw, secret
        assert secret.encode() not in written, secret
        assert secret.encode() not in delivered, secret
    stored = orjson.loads(out.with_name("out.config.json").read_bytes())
    assert stored["max_new_tokens"] == 512 and stored["tokenizer"] == "qwen2"
    assert stored["pad_token_id"] == 0 and stored["wandb"]["project"] == "p"
    assert stored["wandb"]["api_key"] == REDACTED
