"""Secrets in the shapes code and command lines hold them (issue 34 items 2 and 3): each
is redacted as text (the diff, the entry script of ``save_code``, config strings), and
credential-named keys nested in JSON and Hydra command-line values lose their values."""

from __future__ import annotations

import pytest

from trackmux.core.values.argv import redact_argv, redact_value
from trackmux.core.values.redact import REDACTED, redact_text

# (line, the secret in it): 24 shapes of secrets in a training script's config literals
SHAPES = [
    ('API_KEY = "a1b2c3d4e5f6g7h8"', "a1b2c3d4e5f6g7h8"),
    ('OPENAI_API_KEY="sk-proj-abcdefghijklmnop1234"', "abcdefghijklmnop1234"),
    ('token="hf_abcdefghijklmnopqrstuvwxyz12"', "abcdefghijklmnopqrstuvwxyz12"),
    ("password = 'hunter2hunter2'", "hunter2hunter2"),
    ('db_url = "postgresql://admin:s3cr3tpass@db:5432/x"', "s3cr3tpass"),
    ('WANDB_API_KEY = "0123456789abcdef0123456789abcdef01234567"', "0123456789abcdef0123"),
    ('headers = {"Authorization": "Bearer abcDEF123456789"}', "abcDEF123456789"),
    ('cfg = {"api_key": "plainsecretvalue99"}', "plainsecretvalue99"),
    ('os.environ["MY_SECRET"] = "plainvalue42"', "plainvalue42"),
    ('aws_secret_access_key = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"', "wJalrXUtnFEMIK7MD"),
    ('AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"', "AKIAIOSFODNN7EXAMPLE"),
    ('github_token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"', "abcdefghijklmnopqrstuvw"),
    ('slack_token = "xoxb-1234567890-abcdefghij"', "1234567890-abcdefghij"),
    ('client_secret: str = "cs-plain-value-123"', "cs-plain-value-123"),
    ('def login(user, password="defaultpass123"):', "defaultpass123"),
    ("export HF_TOKEN=hfplainvalue777", "hfplainvalue777"),
    ('"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEabc\\n-----END PRIVATE KEY-----"',
     "MIIEabc"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpemblock\n-----END RSA PRIVATE KEY-----",
     "MIIEpemblock"),
    ('jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc123def"', "eyJzdWIiOiIxIn0"),
    ('cache = "redis://:redispass99@localhost:6379"', "redispass99"),
    ('ANTHROPIC_API_KEY = "sk-ant-api03-abcdefghijkl"', "abcdefghijkl"),
    ('passwd = "x9x9x9x9"', "x9x9x9x9"),
    ('secret_key=b"bytes-secret-123"', "bytes-secret-123"),
    ("mlflow_tracking_password: mlpass1234", "mlpass1234"),
    ('    api_key: Optional[str] = "annotated-secret-1"', "annotated-secret-1"),
    ("+  HF_TOKEN: hf_diffline_value_9", "hf_diffline_value_9"),
]


@pytest.mark.parametrize(("line", "secret"), SHAPES)
def test_each_shape_is_redacted_as_text(line: str, secret: str) -> None:
    out = redact_text(line, [])
    assert secret not in out and (REDACTED in out or "://***@" in out), out


def test_code_expressions_and_ml_words_are_kept() -> None:
    kept = ('tok = tokenizer(x); token = get_token(); key = os.environ["K"]; '
            "max_new_tokens=512; pad_token: <pad>; if token == 'a': pass; "
            'url = "https://example.com/path"; prompt_key: prompt; password = None')
    assert redact_text(kept, []) == kept


@pytest.mark.parametrize(("arg", "secret"), [
    ('--config={"api_key": "argvjson1", "lr": 0.1}', "argvjson1"),
    ('{"nested": {"deep": {"password": "argvjson2"}}}', "argvjson2"),
    ("+trainer.logger.wandb={project:x,api_key:hydra1}", "hydra1"),
    ("data.cfg={credentials:{user:a,pass:hydra2},paths:['a b',c]}", "hydra2"),
    ("model.kw={url:http://x,secret_token:hydra3}", "hydra3"),
    ("x=[{name:a,token:hydra4}]", "hydra4"),
])
def test_structured_argv_values_lose_their_credential_keys(arg: str, secret: str) -> None:
    [out] = redact_argv([arg])
    assert secret not in out and REDACTED in out, out


def test_argv_keeps_what_is_not_secret_and_its_syntax() -> None:
    argv = ["train.py", "x=[1,2]", "--lr=0.1", "data.paths={a:1,b:'c d'}",
            '--config={"lr": 0.1}', "--api_key", "k1secret"]
    assert redact_argv(argv) == [*argv[:-1], REDACTED]
    assert redact_value("{project:x,api_key:s}") == f"{{project:x,api_key:{REDACTED}}}"
    assert redact_value('{"a": [1, {"token": "t"}]}') == \
        f'{{"a": [1, {{"token": "{REDACTED}"}}]}}'


def test_config_strings_lose_values_assigned_to_credential_keys() -> None:
    from trackmux.core.values.redact import redact

    config = {"cmd": "python x.py --api_key=cfgsecret1 --lr 0.1",
              "yaml": "model: qwen\nhf_token: cfgsecret2\n", "note": "tokenizer: qwen"}
    out = redact(config)
    assert "cfgsecret" not in str(out)
    assert "--lr 0.1" in out["cmd"] and "model: qwen" in out["yaml"]
    assert out["note"] == "tokenizer: qwen"
