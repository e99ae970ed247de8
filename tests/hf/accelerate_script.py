"""An accelerate loop over two CPU processes (gloo), tracked by TrackmuxTracker.

Run with ``python -m torch.distributed.run --standalone --nproc_per_node=2``; each process
writes ``OUT/rank<N>.txt`` with what its tracker holds."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from accelerate import Accelerator

from trackmux.integrations.accelerate import TrackmuxTracker


def main() -> None:
    out = Path(sys.argv[1])
    tracker = TrackmuxTracker("acc-ddp", name="two-procs", backends=["file", "tensorboard"])
    accelerator = Accelerator(log_with=tracker, cpu=True)
    accelerator.init_trackers("acc-ddp", config={"world": accelerator.num_processes})
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    torch.manual_seed(accelerator.process_index)
    for step in range(1, 4):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        accelerator.log({"loss": loss.item()}, step=step)
        tracker.log({"direct": float(step)}, step=step)  # called on every process
        tracker.tracker.log_text("who", f"rank {accelerator.process_index}", step=step)
    (out / f"rank{accelerator.process_index}.txt").write_text(type(tracker.tracker).__name__)
    accelerator.end_training()


if __name__ == "__main__":
    main()
