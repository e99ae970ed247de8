"""A tiny random Llama model, a word-level tokenizer and a prompt dataset, built locally.

Nothing comes from a hub: the tokenizer is a ``tokenizers`` WordLevel model over a few
words wrapped in ``PreTrainedTokenizerFast``; the model is a randomly initialised
``LlamaForCausalLM`` (2 layers, hidden 32), a few hundred kB.
"""

from __future__ import annotations

from typing import Any

WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "red",
         "blue", "green", "cat", "dog", "sun", "moon", "is", "the", "a", "what", "colour",
         "number", "count", "say", "yes", "no"]
SPECIAL = ["<pad>", "<eos>", "<unk>"]
PROMPTS = ["count one two", "say red blue", "what colour is the sun", "a cat is a",
           "number five six", "the dog is", "say yes no", "what is the moon"]


def build_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>")
    fast.padding_side = "left"
    return fast


def build_model(vocab_size: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=64, pad_token_id=0, eos_token_id=1,
                         bos_token_id=None)
    return LlamaForCausalLM(config)


def build_dataset(rows: int = 64) -> Any:
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [PROMPTS[i % len(PROMPTS)] for i in range(rows)]})


def reward_length(completions: list[str], **kwargs: Any) -> list[float]:
    """Shorter completions score higher (a reward from a plain Python function)."""
    return [1.0 / (1 + len(c.split())) for c in completions]


def reward_colour(completions: list[str], **kwargs: Any) -> list[float]:
    return [float(sum(w in ("red", "blue", "green") for w in c.split())) for c in completions]
