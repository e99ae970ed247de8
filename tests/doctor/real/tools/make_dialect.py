"""Write the synthetic dialect corpus (tests/doctor/real/dialect/*.json).

These runs are made up, and marked so (``"synthetic": true``): each uses the metric keys
one framework really logs (``keys_from`` cites the source file they were read from) with
one fault shape, or a healthy shape, so the doctor is tried on the dialects for which no
public faulty log was found. Deterministic (seeded); run from the repository root:
``python tests/doctor/real/tools/make_dialect.py``.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "dialect"

VERL_RC = ("https://github.com/verl-project/verl/blob/20c30bf8b70e37fae4b38f5ccf170f20e349395d/"
           "verl/trainer/ppo/rollout_corr_helper.py")
VERL_METRICS = ("https://github.com/verl-project/verl/blob/12cd10637654369d87b987c83b6df016df635ab8/"
                "verl/trainer/ppo/metric_utils.py")
OPENRLHF = ("https://github.com/OpenRLHF/OpenRLHF/blob/c250c21a72176720e11aaf4fedcd6cf853d3df8b/"
            "openrlhf/trainer/ray/ppo_actor.py")
NEMO = ("https://github.com/NVIDIA-NeMo/RL/blob/b816b57be28b177ace79c363c73ee79ddbc4b309/"
        "nemo_rl/algorithms/loss_functions.py")
SLIME = ("https://github.com/THUDM/slime/blob/03b11f41fc733922b5c59badd8845810f00af8b8/"
         "slime/backends/megatron_utils/data.py")
TRL = ("https://github.com/huggingface/trl/blob/d2b69d769dab6f77acbfd33252bcd7d22765571b/"
       "trl/trainer/grpo_trainer.py")
SWIFT = ("https://github.com/modelscope/ms-swift/blob/1d1bb2fec6a8fa70c8a69a7932615618d665388e/"
         "swift/trainers/rlhf_trainer/grpo_trainer.py")


def sig(x: float) -> float:
    return float(f"{x:.6g}")


def ramp(i: int, start: int, end: int) -> float:
    """0 before ``start``, 1 after ``end``, linear between."""
    if i <= start:
        return 0.0
    if i >= end:
        return 1.0
    return (i - start) / (end - start)


def learn(i: int, n: int, lo: float, hi: float, rate: float = 3.0) -> float:
    """A saturating learning curve from ``lo`` towards ``hi``."""
    return lo + (hi - lo) * (1 - math.exp(-rate * i / n))


Gen = Callable[[int, random.Random], dict[str, float]]


def series(steps: Sequence[int], gen: Gen, seed: int) -> dict[str, list[list[Any]]]:
    rng = random.Random(seed)
    out: dict[str, list[list[Any]]] = {}
    for step in steps:
        for key, value in gen(step, rng).items():
            out.setdefault(key, []).append([step, sig(value)])
    return out


def g(rng: random.Random, sigma: float) -> float:
    return rng.gauss(0.0, sigma)


# --- faults --------------------------------------------------------------------------

def openrlhf_kl_runaway(i: int, r: random.Random) -> dict[str, float]:
    blow = math.exp(0.06 * (i - 90)) - 1 if i > 90 else 0.0
    kl = 0.002 + 0.012 * min(i, 90) / 90 + 0.01 * blow + abs(g(r, 0.0015))
    reward = learn(i, 150, -0.4, 0.6) - 0.9 * ramp(i, 110, 150) + g(r, 0.05)
    length = 310 + 0.6 * i + 4 * blow + g(r, 12)
    return {"policy_loss": g(r, 0.05), "actor_lr": 5e-7, "kl": kl, "reward": reward,
            "return": reward - 0.01 * kl, "response_length": length,
            "total_length": length + 180 + g(r, 5)}


def nemo_mismatch(i: int, r: random.Random) -> dict[str, float]:
    drift = ramp(i, 60, 90)
    tmpe = 1.008 + 0.25 * drift + abs(g(r, 0.004 + 0.03 * drift))
    gen_kl = 0.0007 + 0.06 * drift + abs(g(r, 0.0002 + 0.01 * drift))
    reward = learn(i, 120, 0.2, 0.7) - 0.35 * ramp(i, 80, 120) + g(r, 0.03)
    return {"train/loss": g(r, 0.02), "train/reward": reward, "train/grad_norm":
            0.25 + 0.6 * drift + abs(g(r, 0.05)), "train/token_mult_prob_error": tmpe,
            "train/gen_kl_error": gen_kl, "train/approx_entropy": 0.55 - 0.1 * i / 120
            + g(r, 0.02), "train/mean_gen_tokens_per_sample": 900 + 2 * i + g(r, 30)}


def slime_entropy_collapse(i: int, r: random.Random) -> dict[str, float]:
    fall = ramp(i, 50, 80)
    ent = (0.62 - 0.002 * min(i, 50)) * (1 - 0.96 * fall) + abs(g(r, 0.01))
    reward = learn(i, 120, 0.25, 0.55) + g(r, 0.03)
    return {"rollout/raw_reward": reward, "rollout/response_lengths": 1400 + 3 * i
            - 500 * fall + g(r, 40), "train/loss": g(r, 0.02), "train/pg_loss": g(r, 0.02),
            "train/entropy_loss": ent, "train/pg_clipfrac": 0.002 + 0.001 * fall
            + abs(g(r, 0.0005)), "train/ppo_kl": abs(g(r, 0.0003)), "train/kl_loss":
            0.001 + 0.0002 * i + abs(g(r, 0.0005)), "train/grad_norm": 0.2 + abs(g(r, 0.03))}


def verl_rollout_corr(i: int, r: random.Random) -> dict[str, float]:
    d = ramp(i, 70, 110)
    kl = 0.0012 + 0.06 * d + abs(g(r, 0.0003 + 0.008 * d))
    ess = 0.985 - 0.5 * d + g(r, 0.004)
    score = learn(i, 150, 0.15, 0.62) - 0.4 * ramp(i, 100, 150) + g(r, 0.03)
    return {"actor/entropy": 0.42 - 0.08 * i / 150 + g(r, 0.01), "actor/ppo_kl":
            abs(g(r, 0.0004)), "actor/pg_clipfrac": 0.001 + 0.01 * d + abs(g(r, 0.0005)),
            "actor/grad_norm": 0.18 + 0.9 * d + abs(g(r, 0.03)), "critic/score/mean": score,
            "response_length/mean": 1200 + 2 * i + g(r, 40), "response_length/clip_ratio":
            0.02 + abs(g(r, 0.005)), "rollout_corr/kl": kl,
            "rollout_corr/rollout_is_eff_sample_size": ess,
            "rollout_corr/rollout_is_mean": 1.0 + 0.12 * d + g(r, 0.003),
            "rollout_corr/rollout_is_std": 0.05 + 0.9 * d + abs(g(r, 0.01)),
            "rollout_corr/chi2_token": 0.002 + 0.4 * d + abs(g(r, 0.001)),
            "training/rollout_probs_diff_mean": 0.004 + 0.03 * d + abs(g(r, 0.0005))}


def trl_sparse_length(i: int, r: random.Random) -> dict[str, float]:
    grow = ramp(i, 300, 760)
    length = 410 + 1500 * grow + g(r, 15)
    clipped = min(1.0, 0.01 + 0.62 * grow ** 2 + abs(g(r, 0.005)))
    acc = 0.41 + 0.04 * min(i, 300) / 300 + g(r, 0.015)
    return {"loss": g(r, 0.01), "grad_norm": 0.3 + abs(g(r, 0.04)), "learning_rate": 1e-6,
            "num_tokens": 2.5e5 * i / 20, "completions/mean_length": length,
            "completions/max_length": min(2048.0, length * 1.8 + 200),
            "completions/clipped_ratio": clipped, "rewards/accuracy_reward/mean": acc,
            "reward": acc, "reward_std": 0.38 + g(r, 0.01), "frac_reward_zero_std":
            0.3 + g(r, 0.02), "kl": 0.01 + 0.00002 * i + abs(g(r, 0.001)), "entropy":
            0.5 + g(r, 0.01), "clip_ratio/region_mean": 0.001 + abs(g(r, 0.0003)),
            "epoch": i / 1000}


def trl_train_flat_groups(i: int, r: random.Random) -> dict[str, float]:
    sat = ramp(i, 40, 55)
    acc = min(1.0, learn(i, 40, 0.55, 0.9) * (1 - sat) + sat + g(r, 0.02) * (1 - sat))
    zero = min(1.0, 0.32 + 0.68 * sat + g(r, 0.03) * (1 - sat))
    return {"train/loss": g(r, 0.01) * (1 - sat), "train/grad_norm": 0.35 * (1 - sat)
            + abs(g(r, 0.03)) * (1 - sat), "train/reward": acc, "train/reward_std":
            0.3 * (1 - sat), "train/frac_reward_zero_std": zero,
            "train/rewards/accuracy_reward/mean": acc, "train/completions/mean_length":
            240 - 60 * sat + g(r, 6), "train/kl": 0.02 + 0.001 * i + abs(g(r, 0.002)),
            "train/entropy": 0.4 - 0.15 * sat + g(r, 0.01)}


def swift_reward_hacking(i: int, r: random.Random) -> dict[str, float]:
    fmt = min(1.0, learn(i, 60, 0.3, 1.0, 2.5) + g(r, 0.02))
    acc = learn(i, 55, 0.15, 0.45, 3.0) - 0.35 * ramp(i, 55, 110) + g(r, 0.02)
    return {"loss": g(r, 0.01), "grad_norm": 0.4 + abs(g(r, 0.05)), "reward": fmt + acc,
            "reward_std": 0.5 + g(r, 0.02), "frac_reward_zero_std": 0.2 + 0.3 * ramp(i, 55, 110)
            + g(r, 0.02), "rewards/Format/mean": fmt, "rewards/MathAccuracy/mean": acc,
            "completions/mean_length": 520 - 200 * ramp(i, 55, 110) + g(r, 10),
            "completions/clipped_ratio": 0.01 + abs(g(r, 0.003)), "kl": 0.01 + 0.001 * i
            + abs(g(r, 0.002)), "entropy/mean": 0.6 - 0.001 * i + g(r, 0.01)}


def verl_old_entropy_collapse(i: int, r: random.Random) -> dict[str, float]:
    fall = ramp(i, 30, 45)
    ent = 1.22 - 0.004 * min(i, 30) - 1.05 * fall + abs(g(r, 0.015))
    score = learn(i, 100, 0.03, 0.09) + g(r, 0.004)
    return {"actor/entropy_loss": ent, "actor/pg_loss": g(r, 0.03), "actor/pg_clipfrac":
            abs(g(r, 0.0005)), "actor/ppo_kl": abs(g(r, 0.0002)), "actor/grad_norm":
            1.2 + abs(g(r, 0.2)), "critic/kl": 0.01 + 0.002 * i + abs(g(r, 0.002)),
            "critic/score/mean": score, "critic/rewards/mean": score - 0.002,
            "response_length/mean": 180 - 110 * fall + g(r, 6), "response_length/clip_ratio":
            max(0.0, 0.35 - 0.34 * fall + g(r, 0.02))}


# --- healthy ---------------------------------------------------------------------------

def trl_train_length_penalty_healthy(i: int, r: random.Random) -> dict[str, float]:
    acc = learn(i, 1000, 0.2, 0.8) + g(r, 0.03)
    pen = -0.05 - 0.22 * i / 1000 + g(r, 0.01)
    length = 300 + 0.2 * i + g(r, 12)
    return {"train/loss": g(r, 0.01), "train/grad_norm": 0.3 + abs(g(r, 0.05)),
            "train/learning_rate": 1e-6, "train/reward": acc + pen,
            "train/reward_std": 0.35 + g(r, 0.02), "train/frac_reward_zero_std":
            0.25 + g(r, 0.03), "train/rewards/accuracy_reward/mean": acc,
            "train/rewards/length_penalty/mean": pen, "train/completions/mean_length": length,
            "train/completions/clipped_ratio": 0.02 + abs(g(r, 0.005)), "train/kl":
            0.05 * (1 - math.exp(-3 * i / 1000)) + abs(g(r, 0.002)), "train/entropy":
            0.9 - 0.3 * i / 1000 + g(r, 0.015), "train/clip_ratio/region_mean":
            0.001 + abs(g(r, 0.0003)), "train/epoch": i / 1000}


def openrlhf_healthy(i: int, r: random.Random) -> dict[str, float]:
    kl = 0.08 * math.sqrt(i / 150) + abs(g(r, 0.003))
    reward = learn(i, 150, -0.4, 0.55) + g(r, 0.05)
    length = 320 + 0.5 * i + g(r, 12)
    return {"policy_loss": g(r, 0.05), "actor_lr": 5e-7, "kl": kl, "reward": reward,
            "return": reward - 0.01 * kl, "response_length": length,
            "total_length": length + 180 + g(r, 5)}


def nemo_healthy(i: int, r: random.Random) -> dict[str, float]:
    return {"train/loss": g(r, 0.02), "train/reward": learn(i, 120, 0.2, 0.75) + g(r, 0.03),
            "train/grad_norm": 0.25 + abs(g(r, 0.05)), "train/token_mult_prob_error":
            1.008 + abs(g(r, 0.004)), "train/gen_kl_error": 0.0007 + abs(g(r, 0.0002)),
            "train/approx_entropy": 0.55 - 0.1 * i / 120 + g(r, 0.02),
            "train/mean_gen_tokens_per_sample": 900 + 2 * i + g(r, 30)}


def slime_healthy(i: int, r: random.Random) -> dict[str, float]:
    return {"rollout/raw_reward": learn(i, 150, 0.3, 0.7) + g(r, 0.03),
            "rollout/response_lengths": 1500 + 4 * i + g(r, 45), "train/loss": g(r, 0.02),
            "train/pg_loss": g(r, 0.02), "train/entropy_loss": 0.55 - 0.15 * i / 150
            + g(r, 0.01), "train/pg_clipfrac": 0.002 + abs(g(r, 0.0005)),
            "train/ppo_kl": abs(g(r, 0.0003)), "train/kl_loss": 0.001 + 0.0002 * i
            + abs(g(r, 0.0005)), "train/grad_norm": 0.2 + abs(g(r, 0.03))}


CASES: list[dict[str, Any]] = [
    dict(id="openrlhf-kl-runaway", framework="openrlhf", keys_from=OPENRLHF,
         label="failure", fault="kl_blowup", onset_step=90, steps=range(1, 151),
         gen=openrlhf_kl_runaway,
         notes="kl creeps to 0.014 by step 90, then grows exponentially; reward falls "
               "from step 110"),
    dict(id="nemo-rl-logprob-mismatch", framework="nemo-rl", keys_from=NEMO,
         label="failure", fault="mismatch", onset_step=60, steps=range(1, 121), gen=nemo_mismatch,
         notes="train/token_mult_prob_error leaves ~1.01 at step 60 and passes NeMo-RL's "
               "1.05 plot threshold (grpo.py) by step 66; gen_kl_error rises with it"),
    dict(id="slime-entropy-collapse", framework="slime", keys_from=SLIME,
         label="failure", fault="entropy_collapse", onset_step=50, steps=range(1, 121),
         gen=slime_entropy_collapse,
         notes="train/entropy_loss falls from ~0.52 to ~0.02 between steps 50 and 80"),
    dict(id="verl-rollout-corr-mismatch", framework="verl", keys_from=VERL_RC,
         label="failure", fault="mismatch", onset_step=70, steps=range(1, 151),
         gen=verl_rollout_corr,
         notes="rollout_corr/kl rises from 0.001 and the IS effective sample size falls "
               "from 0.985 to 0.49 between steps 70 and 110; the score falls from 100"),
    dict(id="trl-sparse-length-runaway", framework="trl", keys_from=TRL,
         label="failure", fault="length_runaway", onset_step=300, steps=range(20, 1001, 20),
         gen=trl_sparse_length,
         notes="logging_steps=20 (50 points); completions/mean_length grows slowly from "
               "410 to 1910 over steps 300-760 while the reward is flat and the clipped "
               "ratio rises to 0.63"),
    dict(id="trl-train-flat-groups", framework="trl", keys_from=TRL,
         label="failure", fault="flat_groups", onset_step=40, steps=range(1, 101),
         gen=trl_train_flat_groups,
         notes="keys under trackmux's TrackmuxCallback (train/...); every group becomes "
               "flat from step 40-55: train/frac_reward_zero_std reaches 1.0, the reward "
               "std and the gradient norm reach 0"),
    dict(id="swift-format-up-accuracy-down", framework="ms-swift", keys_from=SWIFT,
         label="failure", fault="reward_hacking", onset_step=55, steps=range(1, 121),
         gen=swift_reward_hacking,
         notes="rewards/Format/mean keeps rising to 1.0 while rewards/MathAccuracy/mean "
               "falls from 0.45 (step 55) to 0.1; the total reward drifts down ~20% (1.37 -> "
               "1.1); reward names as ms-swift logs its MathAccuracy and Format rewards "
               "(e.g. the jsonl of ms-swift issue 9261)"),
    dict(id="verl-old-entropy-collapse", framework="verl", keys_from=VERL_METRICS,
         label="failure", fault="entropy_collapse", onset_step=30, steps=range(1, 101),
         gen=verl_old_entropy_collapse,
         notes="older verl key actor/entropy_loss falls from 1.1 to 0.05 between steps 30 "
               "and 45 while the score plateaus"),
    dict(id="trl-train-length-penalty-healthy", framework="trl", keys_from=TRL,
         label="healthy", fault=None, onset_step=None, steps=range(10, 1001, 10),
         gen=trl_train_length_penalty_healthy,
         notes="logging_steps=10 under TrackmuxCallback; accuracy rises 0.2->0.8 while the "
               "length-penalty component falls (it must not be read as the total reward); "
               "kl rises gently to 0.05"),
    dict(id="openrlhf-healthy", framework="openrlhf", keys_from=OPENRLHF,
         label="healthy", fault=None, onset_step=None, steps=range(1, 151), gen=openrlhf_healthy,
         notes="kl rises smoothly to 0.08 (sqrt shape), reward rises, length grows 25%"),
    dict(id="nemo-rl-healthy", framework="nemo-rl", keys_from=NEMO,
         label="healthy", fault=None, onset_step=None, steps=range(1, 121), gen=nemo_healthy,
         notes="token_mult_prob_error stays ~1.01, gen_kl_error ~7e-4, reward rises"),
    dict(id="slime-healthy", framework="slime", keys_from=SLIME,
         label="healthy", fault=None, onset_step=None, steps=range(1, 151), gen=slime_healthy,
         notes="raw reward rises 0.3->0.7, entropy declines slowly, response length grows 40%"),
]


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for n, spec in enumerate(CASES):
        spec = dict(spec)
        steps, gen = spec.pop("steps"), spec.pop("gen")
        case = {"id": spec["id"], "framework": spec["framework"], "synthetic": True,
                "source": spec["keys_from"], "source_title": "synthetic run with the "
                "framework's real key names", **{k: v for k, v in spec.items()
                                                 if k not in ("id", "framework")},
                "series": series(list(steps), gen, seed=1000 + n)}
        (OUT / f"{case['id']}.json").write_text(json.dumps(case, indent=1) + "\n",
                                                 encoding="utf-8")
        print(f"{case['id']}: {len(case['series'])} keys, {len(list(steps))} steps")


if __name__ == "__main__":
    main()
