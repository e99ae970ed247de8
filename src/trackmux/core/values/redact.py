"""Secrets never reach the spool or a backend.

Applied to the config and the stored backend options (table/text cells are left alone:
they are model output).
- A key that names a credential (api_key, token, secret, password, passphrase, access key,
  private key, credential, session token, auth header, a vendor's or a crypto key such as
  ``openai_key``, ``wandb_key``, ``hf_key``, ``encryption_key``, ...) has its value
  replaced by ``REDACTED``. ML words that merely contain "token" or "key" are kept, by an
  explicit list (``max_new_tokens``, ``num_tokens``, ``pad_token``, ``image_token``,
  ``tokenizer``, ``prompt_key``, ``key_padding``, ...; tests/reliability/test_secrets*).
- Credentials inside URLs (``https://user:pass@host``, ``redis://:pass@host``) are
  stripped to ``scheme://***@host``; so is a user name alone (``https://TOKEN@host`` is a
  common way to pass a token), except in a database URL (``postgresql://``,
  ``postgres://``, ``mysql://``), where it is a role name (``postgresql://ro@db/x`` is
  kept: a sync can reuse it, and saying it "held a secret" would be false).
- Secret-shaped values are redacted wherever they appear: JWTs, ``Bearer``/``Basic``
  credentials and ``Authorization:`` headers inside a string, well-known key prefixes
  (``sk-``, ``hf_``, ``ghp_``, ``AKIA``, ...) and a value shaped like a wandb API key (40
  hex digits, or a W&B Server key ``<prefix>-<40 hex>`` such as ``local-...``) unless its
  key names a commit or hash.
- Inside any text (a command line, a diff, a script, a config string), a value assigned to
  a credential-named key is redacted whatever its shape: ``API_KEY = "..."``,
  ``token="..."``, ``password: ...`` (YAML), ``"api_key": "..."`` (JSON),
  ``api_key: str = "..."``, ``export HF_TOKEN=...``, ``os.environ["X_SECRET"] = "..."``,
  ``{project:x,api_key:...}`` (Hydra); a code expression (``token = get_token()``,
  ``key = os.environ["K"]``) is not a literal and stays. PEM private-key blocks go whole.
- Any string containing the value of a secret-looking environment variable
  (``WANDB_API_KEY``, ``HF_TOKEN``, ``AWS_SESSION_TOKEN`` ...) is redacted too; environment
  values are never logged. ``PWD``/``OLDPWD`` are directories, not passwords.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "***REDACTED***"

_SECRET_NAME = re.compile(
    r"(api[_\-. ]?key|apikey|token|secret|passw(or)?d|passwd|passphrase|(^|[^a-z])pwd|"
    r"access[_\-. ]?key|private[_\-. ]?key|credential|auth(orization)?$|session[_\-. ]?key|"
    r"cookie|client[_\-. ]?secret|signature|bearer)",
    re.IGNORECASE,
)
# Keys that contain a secret-looking word but are not secrets in ML configs. The prefix
# words start the name or follow a separator, so ``session_token`` is not "n_token".
_NOT_SECRET = re.compile(
    # counts of tokens (plural): max_new_tokens, num_tokens, n_tokens, total_tokens
    r"(^|[_\-. ])(max|min|num|n|total|new|prompt|response|input|output|context|generated|"
    r"batch)[_\-. ]?tokens|tokens$|"
    # special tokens of a tokenizer: pad_token, eos_token, image_token, think_token
    r"(^|[_\-. ])(pad|eos|bos|unk|sep|cls|mask|special|start|end|stop|image|video|audio|"
    r"vision|think|placeholder|added)[_\-. ]?tokens?|"
    r"tokens?[_\-. ]?(len|length|count|num|per|budget|limit|ids?|level|type|mean|sum)|"
    r"tokeni[sz]",
    re.IGNORECASE,
)
# A name ending in "key" is a credential when the word before it names a vendor, a
# service or a cryptographic use (openai_key, wandb_key, hf_key, encryption_key); data
# keys (prompt_key, reward_fn_key, image_key, sort_key, key_padding) are not.
_SECRET_KEY_WORD = re.compile(
    r"(^|[_\-. ])(encryption|decryption|encrypt|crypt|crypto|signing|sign|master|"
    r"license|licence|ssh|gpg|pgp|rsa|ecdsa|ed25519|hmac|jwt|jwe|aes|fernet|admin|root|"
    r"service|account|subscription|app|client|bot|webhook|deploy|login|session|auth|"
    r"openai|azure|anthropic|claude|wandb|hf|huggingface|hugging[_\-. ]?face|github|gh|"
    r"gitlab|aws|gcp|gcs|google|gemini|vertex|mistral|cohere|groq|deepseek|dashscope|qwen|"
    r"moonshot|kimi|zhipu|glm|openrouter|together|replicate|fireworks|perplexity|xai|grok|"
    r"swanlab|comet|neptune|clearml|mlflow|databricks|slack|discord|telegram|stripe|"
    r"pinecone|langsmith|langchain|tavily|serpapi|serper|brave|modal|minimax|baidu|"
    r"volc|volcengine|ark|tencent|aliyun|alibaba|oss|s3|r2|minio|sentry|datadog|"
    r"openai[_\-. ]?api|secret|storage|redis|db|database)[_\-. ]?keys?$",
    re.IGNORECASE,
)
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
# Special words whose "token" is a credential even in the plural.
_SECRET_TOKENS = re.compile(r"(api|access|auth|secret|bearer|hf|github|session|refresh|"
                            r"login|admin|oauth|jwt|csrf|deploy|private|personal)",
                            re.IGNORECASE)
# Environment variables whose names look secret but whose values are not.
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})
# the scheme starts where no scheme character precedes it and is at most 32 long: a long
# run of letters is then scanned once, not once per start position (quadratic)
_URL_CREDENTIALS = re.compile(r"(?<![a-zA-Z0-9+.\-])([a-zA-Z][a-zA-Z0-9+.\-]{0,31}://)"
                              r"([^/\s@?#]*)@")
_SECRET_VALUES = re.compile(
    r"eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"  # JWT
    r"|\b(sk|rk|pk)-[A-Za-z0-9_\-]{16,}"                             # OpenAI-style keys
    r"|\bhf_[A-Za-z0-9]{20,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|\b(AKIA|ASIA)[0-9A-Z]{16}\b|\bwandb_v\d+_[A-Za-z0-9_]{20,}"
    r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)"
)
# ``KEY <sep> VALUE`` inside text. The key may be quoted or an index (``env["KEY"]``), may
# carry a type annotation (``api_key: str = ...``); the separator is ``=`` (not ``==``,
# ``=>``) or ``:`` (not ``::``, not ``://``). The value is a quoted literal (with an
# optional ``b``/``f``/``r`` prefix) or a bare word that ends at a delimiter: a bare word
# followed by ``(``, ``[`` or ``.`` is code, not a literal, and is left alone.
_ASSIGNED = re.compile(
    r"""(?<![\w.])(?P<q>["']?)(?P<key>[A-Za-z_][\w.\-]*)(?P=q)\]?"""
    r"""(?P<sep>(?:\s*:\s*[A-Za-z_][\w.]*(?:\[[\w.\[\], |]*\])?"""
    r"""(?:\s*\|\s*[A-Za-z_][\w.]*)*)?\s*(?:=(?![=>~])|:(?![:=]|//))[ \t]*)"""
    r"""(?:(?P<pre>[rbfuRBFU]{0,2})(?P<vq>["'])(?P<val>(?:\\.|(?!(?P=vq))[^\\\n])*)(?P=vq)"""
    r"""|(?P<bare>[^\s,;{}\[\]()'"<>]+)(?=[\s,;}\])'"]|$))"""
)
_NOT_A_VALUE = frozenset({"", "none", "null", "nil", "true", "false", "~", REDACTED.lower(),
                          "***"})
_AUTH_IN_TEXT = re.compile(
    r"(\b(?i:authorization|x-api-key|api-key)\s*[:=]\s*)(?:(?i:bearer|basic|token)\s+)?"
    r"(?!\*\*\*)[^\s,;\"']+"
    # "Bearer <credential>": a credential has a digit, a case change or base64 padding,
    # so prose ("basic training") is left alone.
    r"|(\b(?i:bearer|basic)\s+)(?=\S*(?:\d|[a-z][A-Z]|[=+/]))[A-Za-z0-9._~+/=\-]{8,}",
)
_WANDB_KEY = re.compile(r"[0-9a-f]{40}")
# W&B Server (and dedicated cloud) API keys: "<prefix>-<40 hex>", e.g. "local-<40 hex>".
_WANDB_SERVER_KEY = re.compile(r"\b[A-Za-z][A-Za-z0-9_]{0,31}-[0-9a-f]{40}\b")
_HASH_NAME = re.compile(r"sha|commit|hash|rev|digest|checksum|git|hexsha", re.IGNORECASE)
_MIN_ENV_SECRET_LENGTH = 8


def is_secret_key(key: str) -> bool:
    """True when a config key names a credential."""
    name = key.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
    if _SECRET_KEY_WORD.search(_CAMEL.sub(r"\1_\2", name)):
        return True
    if _NOT_SECRET.search(name) and not _SECRET_TOKENS.search(name):
        return False
    return bool(_SECRET_NAME.search(name))


def _env_secrets() -> list[str]:
    values = []
    for name, value in os.environ.items():
        if (len(value) >= _MIN_ENV_SECRET_LENGTH and name.upper() not in _NOT_SECRET_ENV
                and is_secret_key(name)):
            values.append(value)
    return sorted(values, key=len, reverse=True)


def _auth_sub(match: re.Match[str]) -> str:
    return (match.group(1) or match.group(2)) + REDACTED


def _assigned_sub(match: re.Match[str]) -> str:
    if not is_secret_key(match.group("key")):
        return match.group(0)
    value = match.group("val") if match.group("vq") else match.group("bare")
    if value is None or value.strip().lower() in _NOT_A_VALUE:
        return match.group(0)
    head = match.group(0)[:match.start("sep") - match.start(0)] + match.group("sep")
    if match.group("vq"):
        quote = match.group("vq")
        return f"{head}{match.group('pre')}{quote}{REDACTED}{quote}"
    return head + REDACTED


_ROLE_NAME_SCHEMES = frozenset({"postgresql://", "postgres://", "mysql://"})


def _url_credentials_sub(match: re.Match[str]) -> str:
    scheme, userinfo = match.group(1), match.group(2)
    if scheme.lower() in _ROLE_NAME_SCHEMES and userinfo and ":" not in userinfo:
        return match.group(0)  # a role name, no password
    return f"{scheme}***@"


def redact_assignments(text: str) -> str:
    """Values assigned to credential-named keys inside ``text`` replaced (module doc)."""
    return _ASSIGNED.sub(_assigned_sub, text) if ("=" in text or ":" in text) else text


def redact_text(text: str, env_secrets: list[str] | None = None) -> str:
    """Strip URL credentials, secret-shaped values, values assigned to credential-named
    keys and known secret values from a string."""
    text = _URL_CREDENTIALS.sub(_url_credentials_sub, text)
    text = _SECRET_VALUES.sub(REDACTED, text)
    text = _AUTH_IN_TEXT.sub(_auth_sub, text)
    text = redact_assignments(text)
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
            return [walk(v, key) for v in value]
        if isinstance(value, str):
            if not _HASH_NAME.search(key):
                if _WANDB_KEY.fullmatch(value):
                    return REDACTED
                value = _WANDB_SERVER_KEY.sub(REDACTED, value)
            return redact_text(value, secrets)
        return value

    return walk(dict(config), "")  # type: ignore[no-any-return]
