"""An accelerate loop whose weights go NaN, with the doctor's stop_on: every process reads
``tracker.should_stop`` at its step boundary, saves the state and leaves the loop.

Run as ``python accelerate_stop_script.py OUT`` (one process) or under
``python -m torch.distributed.run --standalone --nproc_per_node=2`` (gloo); each process
writes ``OUT/rank<N>.json``: the step it stopped at and the reason it saw."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
from accelerate import Accelerator

from trackmux.integrations.accelerate import TrackmuxTracker

NAN_AFTER = 5
#: the same limit on every process (a wall-clock one could differ and leave one waiting)
MAX_STEPS = 3000


def main() -> None:
    out = Path(sys.argv[1])
    tracker = TrackmuxTracker("acc-stop", name="nan", backends=[],
                              doctor={"stop_on": "critical"})
    accelerator = Accelerator(log_with=tracker, cpu=True)
    accelerator.init_trackers("acc-stop")
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    stopped_at = None
    for step in range(1, MAX_STEPS + 1):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        if step == NAN_AFTER:
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.fill_(math.nan)
        accelerator.log({"train/loss": loss.item()}, step=step)
        time.sleep(0.01)  # a training step takes time
        if tracker.should_stop:  # the two lines the docs show
            accelerator.save_state(str(out / f"ckpt-{step}"))
            stopped_at = step
            break
    (out / f"rank{accelerator.process_index}.json").write_text(json.dumps(
        {"stopped_at": stopped_at, "reason": tracker.stop_reason}))
    accelerator.end_training()


if __name__ == "__main__":
    main()
