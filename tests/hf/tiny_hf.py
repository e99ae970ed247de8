"""A tiny random Llama model, a word-level tokenizer and a prompt dataset, built locally.

Nothing comes from a hub: the tokenizer is a ``tokenizers`` WordLevel model over a few
words wrapped in ``PreTrainedTokenizerFast``; the model is a randomly initialised
``LlamaForCausalLM`` (2 layers, hidden 32), a few hundred kB. :func:`grpo_trainer` puts
them in a TRL ``GRPOTrainer`` on CPU.
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


def grpo_trainer(output_dir: Any, max_steps: int, reward_funcs: list[Any] | None = None,
                 **config: Any) -> Any:
    """A GRPOTrainer on CPU: 4 completions of one prompt a step, 6 tokens at most, a log
    every step; ``config`` overrides any GRPOConfig argument."""
    from trl import GRPOConfig, GRPOTrainer

    tok = build_tokenizer()
    options: dict[str, Any] = dict(
        output_dir=str(output_dir), max_steps=max_steps, per_device_train_batch_size=4,
        num_generations=4, max_completion_length=6, logging_steps=1, report_to="none",
        use_cpu=True, learning_rate=1e-3, disable_tqdm=True, seed=0, save_strategy="no")
    args = GRPOConfig(**{**options, **config})
    return GRPOTrainer(model=build_model(len(tok)), args=args, processing_class=tok,
                       reward_funcs=reward_funcs or [reward_length, reward_colour],
                       train_dataset=build_dataset(), eval_dataset=build_dataset(4))


def reward_length(completions: list[str], **kwargs: Any) -> list[float]:
    """Shorter completions score higher (a reward from a plain Python function)."""
    return [1.0 / (1 + len(c.split())) for c in completions]


def reward_colour(completions: list[str], **kwargs: Any) -> list[float]:
    return [float(sum(w in ("red", "blue", "green") for w in c.split())) for c in completions]


def reward_answer_tag(completions: list[str], **kwargs: Any) -> list[float]:
    """A format reward whose pattern the policy can never produce (``<answer>`` is no word
    of the vocabulary): every completion scores 0, the broken-verifier fault."""
    return [1.0 if "<answer>" in c else 0.0 for c in completions]
