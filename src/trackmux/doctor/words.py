"""Signals from the words of a key's name, for loops that name their keys as they like.

A loop written against ``run.log()`` names its keys its own way: ``score_mean``,
``mean_return``, ``kl_to_ref``, ``ent``, ``gen_len``, ``acc``. No table of spellings
keeps up with that, so a key is split into words (on ``/ _ - . :`` and camelCase,
lowercased), each word mapped to a concept (``score``, ``return``, ``rew`` are the
*reward* concept), and the signal read off the concepts present, whatever their order.

This is the last tier (dialects.py tries the user's declaration and the framework
dialects first, and a signal any of those fed is never read from words). When several
keys could feed one signal the one with the best :func:`classify` rank wins, run-wide
(docs/doctor.md "Signal names and precedence"):

- a mean (``mean``, ``avg``) before a key with no statistic, before a median, a sum, then
  a min or max; a spread (``std``, ``var``) is never the signal;
- a training key before a validation one (validation keys feed only ``val_reward`` and,
  where no training key names the response length, ``response_length``: a validation
  split's answers are the policy's answers, and a loop that measures their length only
  there, as Stanford CS336's GRPO loops do, logs no other);
- a total before a component: ``reward/format`` and ``format_reward`` are components
  (a word besides the reward's own in its path segment or after it), ``train/reward`` and
  ``my/return`` are totals (words in earlier segments are namespaces; ``rollout`` says
  whose reward it is, and an accuracy of the ``answer`` or ``response`` is the
  correctness itself: ``rollout_answer_accuracy`` is a total, ``rollout_format_accuracy``
  a component);
- for the reward, a reward word (``reward``, ``score``) before a return (PPO libraries
  log their value targets as ``returns``) before an accuracy (``acc``, ``success``,
  ``pass``); for the entropy, a plain entropy before an entropy loss (often its
  negative); for the length, a key naming the response
  (``response``, ``gen``, ``completion``) before a bare ``len``/``length``; for the grad
  norm, the policy's before a critic's.

Keys that are settings or bookkeeping (a coefficient, a target, a learning rate, a time,
a count, a smoothed copy such as ``reward_ema``) feed nothing.
"""

from __future__ import annotations

import re

#: word -> concept
CONCEPTS: dict[str, str] = {}


def _words(concept: str, words: str) -> None:
    for word in words.split():
        CONCEPTS[word] = concept


_words("reward", "reward rewards rew rwd score scores return returns")
_words("acc", "acc accuracy correct correctness solved solve success pass passed")
_words("kl", "kl kld kldiv")
_words("entropy", "entropy entropies ent")
_words("length", "len length lengths")
_words("response", "response responses resp completion completions generation generations "
                   "gen generated output outputs answer answers")
_words("prompt", "prompt prompts input inputs query queries context")
_words("trunc", "truncated truncation trunc truncate overlong cutoff")
_words("clip", "clip clipped clipping")
_words("clipfrac", "clipfrac clipfraction")
_words("frac", "frac fraction ratio rate share prop proportion")
_words("percent", "pct percent percentage")
_words("flat", "flat")
_words("grad", "grad grads gradient gradients")
_words("norm", "norm norms normalized normalised unnormalized")
_words("gradnorm", "gnorm gradnorm")
_words("loss", "loss losses")
_words("zero", "zero")
_words("std", "std stdev stddev sd")
_words("spread", "var variance iqr")
_words("val", "val valid validation eval evaluation test heldout dev")
_words("mean", "mean avg average mu")
_words("median", "median p50")
_words("sum", "sum")
_words("extreme", "min max minimum maximum")
_words("low", "low lower lo")
_words("high", "high upper hi")
_words("setting", "coef coeff coefficient beta ctrl controller target weight weights "
                  "threshold lr learning temperature alpha lambda scale eps epsilon "
                  "limit budget cap")
_words("resource", "time timing sec secs seconds ms throughput speed latency duration "
                   "memory mem gb mb perf mfu tflops")
_words("count", "count counts num number nums")
_words("derived", "last ema smooth smoothed running moving rolling window cum cumulative "
                  "best prev previous delta diff change improvement slope")
_words("rm", "rm proxy orm prm")
_words("model", "model")
_words("value", "advantage advantages adv value values vf critic")
_words("penalty", "penalty penalties")
_words("stale", "staleness stale")
_words("episode", "episode episodic ep")
_words("mismatch", "rollout sampling vllm sglang engine inference mismatch error behavior "
                   "behaviour")
#: words that change no meaning: namespaces, fillers, aggregation wording
NEUTRAL = frozenset(str.split(
    "train training batch total overall policy actor env environment "
    "step steps global raw final per token tokens seq sequence sample samples of the on to "
    "at all agg aggregate metric metrics task trajectory traj group groups r my custom "
    "ppo grpo rl pg ref reference divergence approx before after pre post"))

SPLIT = re.compile(r"[/.:]+")
WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
STAT_RANK = {"mean": 0, None: 1, "median": 2, "sum": 3, "extreme": 4}
REWARD_WORDS = frozenset({"reward", "rewards", "rew", "rwd", "score", "scores"})
#: words that say whose reward it is, not which part of it: ``rollout_reward``,
#: ``rollout_answer_accuracy`` (a hand-written loop's batch of rollouts)
SCOPE_WORDS = frozenset({"rollout", "rollouts"})


def segments(key: str) -> list[list[str]]:
    """The key's path segments (split on ``/ . :``), each as lowercase words (split on
    ``_ - @`` spaces and camelCase): ``train/respLen_mean`` -> [[train], [resp, len, mean]]."""
    return [[w.lower() for w in WORD.findall(part)] for part in SPLIT.split(key) if part]


def classify(key: str) -> tuple[str, tuple[int, int]] | None:
    """(signal, rank) of a key read from its words (lower rank wins), or None."""
    parts = segments(key)
    words = [w for part in parts for w in part]
    if not words:
        return None
    concepts = [CONCEPTS.get(w) for w in words]
    has = set(concepts)
    if has & {"setting", "resource", "count", "derived"}:
        return None
    stats = [c for c in concepts if c in STAT_RANK]
    stat = STAT_RANK[stats[-1]] if stats else STAT_RANK[None]
    if "val" in has:  # a held-out reward feeds val_reward, never a training signal
        if has & {"reward", "acc"} and not has & {"std", "spread", "value", "loss"}:
            return "val_reward", (0, 0 if stat <= 2 else 1)
        if "length" in has and "response" in has and not has & {
                "std", "spread", "prompt", "episode", "reward", "acc"} and "total" not in words:
            return "response_length", (2, stat)  # the policy's own answers all the same
        return None
    if ("zero" in has and "std" in has) or ("flat" in has and "group" in words + [
            w.rstrip("s") for w in words]):
        return None if "percent" in has else ("zero_std_frac", (0, stat))
    if has & {"std", "spread"}:
        return None
    if "rm" in has or ("model" in has and "reward" in has):
        return None if "loss" in has else ("rm_score", (0, stat))
    if has & {"trunc", "clip", "clipfrac"} and "percent" in has:
        return None  # a share in percent: the rules' thresholds are fractions
    if "trunc" in has or ("clip" in has and has & {"length", "response"}):
        return "truncation", (0, stat)
    if "clipfrac" in has or ("clip" in has and "frac" in has):
        side = "clip_frac_low" if "low" in has else "clip_frac_high" if "high" in has \
            else "clip_frac"
        return side, (0, stat)
    if "gradnorm" in has or ("grad" in has and "norm" in has):
        return "grad_norm", (1 if "value" in has else 0, stat)
    if "kl" in has:
        return None if "mismatch" in has else ("kl", (0, stat))
    if "entropy" in has:  # an entropy loss may be its negative: a plain entropy first
        return "entropy", (1 if "loss" in has else 0, stat)
    if "length" in has:
        if "prompt" in has or has & {"episode"} or "total" in words:
            return None  # a prompt, prompt + response, or an environment episode's length
        return "response_length", (0 if "response" in has else 1, stat)
    if "loss" in has:
        others = [w for w, c in zip(words, concepts, strict=True)
                  if c is None and w not in NEUTRAL and not w.isdigit()]
        return None if others or has & {"value", "reward", "rm"} else ("loss", (0, stat))
    if "stale" in has:
        return "staleness", (0, stat)
    if "value" in has:
        return None
    if "reward" in has:
        return _reward(parts, "reward", stat)
    if "acc" in has:
        return _reward(parts, "acc", stat)
    return None


def _reward(parts: list[list[str]], concept: str, stat: int) -> tuple[str, tuple[int, int]]:
    """A total (``reward``) or a component (``reward_component``): a component has words
    besides the reward's own in the segment of its first reward word or after it."""
    first = next(i for i, part in enumerate(parts)
                 if any(CONCEPTS.get(w) == concept for w in part))
    own = {concept, "mean", "median", "sum", "extreme", "frac", "percent", "norm", "episode"}
    if concept == "acc":  # the accuracy of the answers is the correctness, not a part
        own.add("response")
    qualifiers = [w for part in parts[first:] for w in part
                  if CONCEPTS.get(w) not in own and w not in NEUTRAL and not w.isdigit()
                  and w not in SCOPE_WORDS]
    if qualifiers:  # every component is read: their ranks tell only a min or max apart
        return "reward_component", (0, 0 if stat <= 2 else 1)
    words = {w for part in parts for w in part}
    # a reward or score before a return (PPO libraries log the value targets as returns),
    # before an accuracy
    rank = 2 if concept == "acc" else 0 if words & REWARD_WORDS else 1
    return "reward", (rank, stat)
