"""Issue 27 item 3: more credential names, and the explicit list of ML words that only
look like them (verl's configs are full of ``*_token*`` and ``*_key`` names)."""

from __future__ import annotations

import orjson
import pytest

from trackmux.core.values.redact import REDACTED, is_secret_key, redact

NEW_SECRET_NAMES = [
    # session-style tokens, including a name ending in "n_token"
    "session_token", "admin_token", "login_token", "n_token", "auth.n_token", "x_n_token",
    "user_token", "csrf_token", "id_token", "bot_token", "deploy_token", "session_tokens",
    "refresh_tokens", "sessionToken", "ADMIN_TOKEN",
    # a vendor's, a service's or a crypto key
    "encryption_key", "openai_key", "anthropic_key", "wandb_key", "hf_key", "HF_KEY",
    "WANDB_KEY", "openai_api_key", "azure_openai_key", "gemini_key", "mlflow_key",
    "swanlab_key", "github_key", "aws_key", "ssh_key", "signing_key", "master_key",
    "license_key", "decryption_key", "jwt_key", "hmac_key", "openaiKey", "wandbKey",
    "dashscope_key", "deepseek_key", "groq_key", "service_key", "admin_key",
]
# What verl's (and HF's) configs name with "token" or "key" that is not a credential.
NOT_SECRET_NAMES = [
    "max_new_tokens", "num_tokens", "max_tokens", "n_tokens", "total_tokens",
    "max_num_batched_tokens", "ppo_max_token_len_per_gpu", "log_prob_max_token_len_per_gpu",
    "forward_max_token_len_per_gpu", "max_token_len", "token_level_scores", "token_mean",
    "tokens_per_second", "response_tokens", "prompt_tokens", "batch_tokens",
    "tokenizer", "tokenizer_name", "skip_tokenizer_init", "tokenization_sanity_check_mode",
    "pad_token", "eos_token", "bos_token", "unk_token", "pad_token_id", "eos_token_id",
    "image_token", "video_token", "think_token", "vision_start_token", "stop_token_ids",
    "special_tokens", "mask_token",
    "key_padding", "prompt_key", "response_key", "reward_fn_key", "image_key", "video_key",
    "messages_key", "tools_key", "enable_thinking_key", "data_source_key", "input_key",
    "label_key", "sort_key", "cache_key", "loss_key", "task_key", "mask_key", "key",
    "keyword", "monkey", "hotkey",
]


@pytest.mark.parametrize("key", NEW_SECRET_NAMES)
def test_more_credential_names_are_redacted(key: str) -> None:
    assert is_secret_key(key)
    assert redact({"cfg": {key: "s3cr3t-value-xyz"}}) == {"cfg": {key: REDACTED}}


@pytest.mark.parametrize("key", NOT_SECRET_NAMES)
def test_ml_words_with_token_or_key_are_kept(key: str) -> None:
    assert not is_secret_key(key)
    assert redact({key: "left"}) == {key: "left"}


@pytest.mark.parametrize("prefix", ["local", "prod", "acme_corp"])
def test_wandb_server_keys_are_recognised_by_shape(prefix: str) -> None:
    secret = f"{prefix}-" + "a1b2c3d4e5" * 4
    out = redact({"logger": {"server": secret, "note": f"use {secret} here",
                             "list": [secret]}})
    assert secret.encode() not in orjson.dumps(out)
    assert secret[len(prefix) + 1:].encode() not in orjson.dumps(out)


def test_a_hash_named_key_keeps_a_prefixed_hex_value() -> None:
    value = "build-" + "a1b2c3d4e5" * 4
    assert redact({"git_commit": value, "sha": value}) == {"git_commit": value, "sha": value}
