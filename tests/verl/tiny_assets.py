"""A tiny random Qwen2 model, a byte-level BPE tokenizer and chat parquet files, built locally.

Nothing comes from a hub: the tokenizer is trained on a few lines with ``tokenizers``, the
model is a randomly initialised ``Qwen2ForCausalLM`` a few hundred kB in size.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QUESTIONS = [
    ("What is 2 plus 3?", "2 plus 3 is 5."),
    ("Name a colour.", "Blue is a colour."),
    ("What is the capital of France?", "The capital of France is Paris."),
    ("Count to three.", "One, two, three."),
    ("Is ice cold?", "Yes, ice is cold."),
    ("What is 10 minus 4?", "10 minus 4 is 6."),
    ("Say hello.", "Hello there!"),
    ("What do cows drink?", "Cows drink water."),
]


def build_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    lines = [f"user\n{q}\nassistant\n{a}\nsystem" for q, a in QUESTIONS]
    tok.train_from_iterator(lines * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", bos_token=None)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(path))


def build_model(path: Path, vocab_size: int) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=256, tie_word_embeddings=True,
                         torch_dtype="float32")
    Qwen2ForCausalLM(config).save_pretrained(str(path))


def build_data(path: Path, rows: int) -> None:
    import pandas as pd

    records = []
    for i in range(rows):
        q, a = QUESTIONS[i % len(QUESTIONS)]
        records.append({"messages": [{"role": "user", "content": q},
                                     {"role": "assistant", "content": a}]})
    pd.DataFrame(records).to_parquet(str(path))


def build_all(root: Path) -> dict[str, Path]:
    """Tokenizer and model in ``root/model``, ``train.parquet`` and ``val.parquet``."""
    from transformers import AutoTokenizer

    model_dir = root / "model"
    build_tokenizer(model_dir)
    vocab = len(AutoTokenizer.from_pretrained(str(model_dir)))
    build_model(model_dir, vocab)
    build_data(root / "train.parquet", 16)
    build_data(root / "val.parquet", 4)
    return {"model": model_dir, "train": root / "train.parquet", "val": root / "val.parquet"}
