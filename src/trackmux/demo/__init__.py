"""``trackmux demo``: a small, real RL post-training loop (GRPO on a toy task) on CPU.

numpy is the only extra it needs (the ``demo`` extra); nothing here is imported by
``import trackmux``.
"""

from trackmux.demo.loop import DemoConfig, DemoResult, train

__all__ = ["DemoConfig", "DemoResult", "train"]
