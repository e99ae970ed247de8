"""Secrets never reach the spool or a backend.

Applied to the config (and table/text cells are left alone: they are model output).
- A key that names a credential (api_key, token, secret, password, access key, private
  key, credential, auth header, ...) has its value replaced by ``REDACTED``.
- Credentials inside URLs (``https://user:pass@host``) are stripped to ``https://***@host``.
- Any string containing the value of a secret-looking environment variable
  (``WANDB_API_KEY``, ``HF_TOKEN``, ...) is redacted too; environment values are never logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "***REDACTED***"

_SECRET_NAME = re.compile(
    r"(api[_\-. ]?key|apikey|token|secret|passw(or)?d|passwd|pwd|access[_\-. ]?key|"
    r"private[_\-. ]?key|credential|auth(orization)?$|session[_\-. ]?key|cookie|"
    r"client[_\-. ]?secret|signature|bearer)",
    re.IGNORECASE,
)
# Keys that contain a secret-looking word but are not secrets in ML configs.
_NOT_SECRET = re.compile(
    r"(max|min|num|n|total|pad|eos|bos|unk|sep|cls|mask|special|start|end|new|prompt|"
    r"response|input|output|context|generated|batch)[_\-. ]?tokens?|tokens$|"
    r"tokens?[_\-. ]?(len|length|count|num|per|budget|limit|ids?|level|type)|tokeni[sz]",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*://)([^/\s@:]+(:[^/\s@]*)?)@")
_MIN_ENV_SECRET_LENGTH = 8


def is_secret_key(key: str) -> bool:
    """True when a config key names a credential."""
    name = key.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
    if _NOT_SECRET.search(name) and not re.search(r"(api|access|auth|secret|bearer|hf|github)",
                                                  name, re.IGNORECASE):
        return False
    return bool(_SECRET_NAME.search(name))


def _env_secrets() -> list[str]:
    values = []
    for name, value in os.environ.items():
        if len(value) >= _MIN_ENV_SECRET_LENGTH and is_secret_key(name):
            values.append(value)
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, env_secrets: list[str] | None = None) -> str:
    """Strip URL credentials and known secret values from one string."""
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    for secret in _env_secrets() if env_secrets is None else env_secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a JSON-compatible config with every secret replaced."""
    secrets = _env_secrets()

    def walk(value: Any, key: str) -> Any:
        if key and is_secret_key(key) and value not in (None, "", {}, []):
            return REDACTED
        if isinstance(value, Mapping):
            return {k: walk(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, "") for v in value]
        if isinstance(value, str):
            return redact_text(value, secrets)
        return value

    return walk(dict(config), "")  # type: ignore[no-any-return]
