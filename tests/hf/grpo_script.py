"""A GRPO run of a tiny model on CPU, tracked by TrackmuxCallback (run as a subprocess).

    python grpo_script.py OUTPUT_DIR MAX_STEPS [--resume] [--hang-at STEP]

``--hang-at N`` writes ``OUTPUT_DIR/hanging`` after logging step N and sleeps, so a test
can SIGKILL the trainer at a known point (a checkpoint is saved every 2 steps).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from tiny_hf import build_dataset, build_model, build_tokenizer, reward_colour, reward_length
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from trackmux.integrations.transformers import TrackmuxCallback


class Hang(TrainerCallback):  # type: ignore[misc]
    def __init__(self, at: int, marker: Path) -> None:
        self.at, self.marker = at, marker

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
        if state.global_step == self.at and "loss" in (logs or {}):
            self.marker.write_text(str(state.global_step))
            time.sleep(600)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("output_dir")
    parser.add_argument("max_steps", type=int)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--hang-at", type=int, default=0)
    opts = parser.parse_args()
    tok = build_tokenizer()
    args = GRPOConfig(output_dir=opts.output_dir, max_steps=opts.max_steps,
                      per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=6, logging_steps=1, save_steps=2,
                      report_to="none", use_cpu=True, learning_rate=1e-3, disable_tqdm=True,
                      run_name="grpo-resume", seed=0)
    trainer = GRPOTrainer(model=build_model(len(tok)), args=args, processing_class=tok,
                          reward_funcs=[reward_length, reward_colour],
                          train_dataset=build_dataset())
    trainer.add_callback(TrackmuxCallback(trainer, project="hf-resume",
                                          backends=["file", "tensorboard", "mlflow"]))
    if opts.hang_at:
        trainer.add_callback(Hang(opts.hang_at, Path(opts.output_dir) / "hanging"))
    trainer.train(resume_from_checkpoint=True if opts.resume else None)


if __name__ == "__main__":
    main()
