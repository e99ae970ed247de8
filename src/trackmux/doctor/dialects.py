"""Dialects: which key of which framework carries which canonical signal.

Every trainer names the same quantity its own way: verl's ``critic/score/mean`` is TRL's
``reward`` (``train/reward`` under trackmux's ``TrackmuxCallback``), NeMo-RL's
``train/reward`` and slime's ``rollout/raw_reward``. Rules read *signals* (``@reward``,
``@kl`` ... in a rule's ``keys``); :class:`Signals` maps a run's keys to them, once per key
set. A key of a known dialect wins over a key read from the words of its name
(words.py: ``score_mean``, ``kl_to_ref``, ``gen_len``), which counts for a signal only
while the run has no dialect key for it, so a per-function reward
(``rewards/length_penalty/mean``) is a component, never the total. docs/doctor.md lists
every key, with where each name was read.

Users declare keys in the rules file (``[signals] reward = ["my/total"]``) or with
``trackmux.init(signals=...)``; a declared signal is read from those keys only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trackmux.doctor.patterns import compile_pattern

#: signal -> what it is (docs/doctor.md has the table)
SIGNALS: dict[str, str] = {
    "reward": "the total reward of a training batch (higher is better)",
    "reward_component": "one term of the reward (one reward function's mean)",
    "val_reward": "a held-out (validation) reward, score or accuracy",
    "rm_score": "the score of a learned reward model the policy is trained on (a proxy "
                "for the reward that is checked)",
    "kl": "KL of the policy to its reference or old policy",
    "entropy": "policy entropy",
    "grad_norm": "gradient norm",
    "response_length": "mean response length",
    "truncation": "share of responses cut at the length limit",
    "clip_frac": "share of tokens whose PPO ratio was clipped",
    "clip_frac_low": "share clipped at the low end (1 - eps)",
    "clip_frac_high": "share clipped at the high end (1 + eps)",
    "zero_std_frac": "share of GRPO groups whose rewards are all equal",
    "loss": "the policy loss",
    "mismatch_kl": "KL between the inference engine's and the trainer's token probabilities",
    "mismatch_is_mean": "mean training/inference importance weight",
    "mismatch_is_std": "std of the training/inference importance weights",
    "mismatch_ess": "effective sample size of those weights (share of the batch)",
    "mismatch_chi2": "chi-squared divergence of those weights (token level)",
    "mismatch_veto": "share of sequences vetoed for a catastrophic token ratio",
    "mismatch_logp_diff": "mean absolute log-probability difference, trainer vs engine",
    "mismatch_mult_prob_error": "NeMo-RL's token multiplicative probability error",
    "staleness": "age of the rollouts trained on, in policy versions",
}


def _with_train_prefix(table: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """TRL's names and the same under ``train/`` (trackmux's TrackmuxCallback, wandb)."""
    return {sig: tuple(p for name in names for p in (name, f"train/{name}"))
            for sig, names in table.items()}


#: dialect -> signal -> key patterns (globs, ``re:``), in the order tried
DIALECTS: dict[str, dict[str, tuple[str, ...]]] = {
    # verl: verl/trainer/ppo/metric_utils.py, dp_actor.py, rollout_corr_helper.py;
    # older verl logged the entropy as actor/entropy_loss
    "verl": {
        "reward": ("critic/score/mean", "critic/rewards/mean"),
        "val_reward": ("val-core/*/reward/mean@*", "val-core/*/acc/mean@*", "val-core/*/score/*",
                       "val/test_score/*"),
        "kl": ("actor/ppo_kl", "actor/kl_loss"),
        "entropy": ("actor/entropy", "actor/entropy_loss"),
        "grad_norm": ("actor/grad_norm", "train/grad_norm"),
        "response_length": ("response_length/mean",),
        "truncation": ("response_length/clip_ratio",),
        "clip_frac": ("actor/pg_clipfrac",),
        "clip_frac_low": ("actor/pg_clipfrac_lower",),
        # verl/trainer/sft_trainer.py logs train/loss, train/grad_norm, train/lr and
        # val/loss (names other trainers share: its markers below tell it apart)
        "loss": ("actor/pg_loss", "train/loss"),
        "mismatch_kl": ("rollout_corr/kl",),
        "mismatch_is_mean": ("rollout_corr/rollout_is_mean",),
        "mismatch_is_std": ("rollout_corr/rollout_is_std",),
        "mismatch_ess": ("rollout_corr/rollout_is_eff_sample_size",),
        "mismatch_chi2": ("rollout_corr/chi2_token",),
        "mismatch_veto": ("rollout_corr/rollout_is_veto_fraction",),
        "mismatch_logp_diff": ("training/rollout_probs_diff_mean",),
    },
    # TRL's GRPOTrainer (trl/trainer/grpo_trainer.py); ms-swift's GRPO logs the same names
    "trl": _with_train_prefix({
        "reward": ("reward",),
        "reward_component": ("rewards/*/mean", "rewards/*_reward"),
        "kl": ("kl",),
        "entropy": ("entropy",),
        "grad_norm": ("grad_norm",),
        "response_length": ("completions/mean_length", "completion_length"),
        "truncation": ("completions/clipped_ratio",),
        "clip_frac": ("clip_ratio/region_mean", "clip_ratio"),
        "clip_frac_low": ("clip_ratio/low_mean",),
        "clip_frac_high": ("clip_ratio/high_mean",),
        "zero_std_frac": ("frac_reward_zero_std",),
        "loss": ("loss",),
        "mismatch_is_mean": ("sampling/importance_sampling_ratio/mean",),
        "mismatch_logp_diff": ("sampling/sampling_logp_difference/mean",),
    }) | {"val_reward": ("eval_reward", "eval/reward", "eval_rewards/*/mean")},
    # ms-swift's GRPO (swift/trainers/rlhf_trainer/grpo_trainer.py): TRL's names, and
    # its entropy as entropy/mean
    "ms_swift": _with_train_prefix({"entropy": ("entropy/mean",)}),
    # TRL's PPOTrainer (trl/trainer/ppo_trainer.py): objective/kl is the KL to the
    # reference summed over a response (6-12 in TRL's own example), so the per-token KL
    # signal is policy/approxkl_avg (old vs new policy)
    "trl_ppo": {
        "reward": ("objective/scores", "objective/rlhf_reward"),
        "kl": ("policy/approxkl_avg",),
        "entropy": ("policy/entropy_avg",),
        "clip_frac": ("policy/clipfrac_avg",),
        "loss": ("loss/policy_avg",),
    },
    # NeMo-RL (nemo_rl/algorithms/grpo.py, loss_functions.py; docs/guides/grpo.md)
    "nemo_rl": {
        "reward": ("train/reward", "train/total_reward/mean"),
        "val_reward": ("validation/accuracy",),
        "grad_norm": ("train/grad_norm",),
        "loss": ("train/loss",),
        "entropy": ("train/approx_entropy",),
        "response_length": ("train/mean_gen_tokens_per_sample",),
        "mismatch_mult_prob_error": ("train/token_mult_prob_error",),
        "mismatch_kl": ("train/gen_kl_error",),
        "mismatch_is_mean": ("train/sampling_importance_ratio",),
        "staleness": ("train/avg_trajectory_age",),
    },
    # OpenRLHF (openrlhf/trainer/ppo_trainer.py: the status dict, logged under train/)
    "openrlhf": {
        "reward": ("reward", "train/reward"),
        "kl": ("kl", "train/kl"),
        "response_length": ("response_length", "train/response_length"),
        "loss": ("policy_loss", "train/policy_loss"),
        "clip_frac": ("ppo_clip_ratio", "train/ppo_clip_ratio"),
        "mismatch_kl": ("vllm_kl", "train/vllm_kl"),
    },
    # slime / miles (slime/backends/megatron_utils/loss.py, rollout logging)
    "slime": {
        "reward": ("rollout/raw_reward", "rollout/rewards"),
        "kl": ("train/ppo_kl", "train/kl_loss"),
        "entropy": ("train/entropy_loss",),
        "grad_norm": ("train/grad_norm",),
        "loss": ("train/pg_loss", "train/loss"),
        "clip_frac": ("train/pg_clipfrac",),
        "response_length": ("rollout/response_len/mean", "rollout/response_lengths"),
        "truncation": ("rollout/truncated_ratio",),
        "mismatch_logp_diff": ("train/train_rollout_logprob_abs_diff",),
        "mismatch_kl": ("train/train_rollout_kl",),
    },
    # DeepSpeed-Chat step 3 (applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/
    # main.py prints "epoch ... act_loss ... cri_loss ... unsuper_loss" and "Average
    # reward score"; a parsed log keeps those names)
    "deepspeed_chat": {
        "reward": ("average reward score", "average_reward_score"),
        "loss": ("act_loss", "actor_loss"),
    },
}

#: keys that feed no signal but tell a dialect apart (its own names for timings, token
#: counts, the learning rate ...): a key only one dialect names is what recognises it, so
#: names several share (``train/loss``, ``reward``) do not make a run "nemo_rl, slime"
MARKERS: dict[str, tuple[str, ...]] = {
    # verl: RayPPOTrainer's timing/perf/seqlen metrics; sft_trainer.py's own keys
    "verl": ("timing_s/*", "timing_per_token_ms/*", "perf/*", "global_seqlen/*",
             "prompt_length/*", "training/global_step", "training/epoch", "critic/*",
             "actor/*", "train/global_tokens", "train/total_tokens(B)", "train/mfu",
             "train/lr", "val/loss"),
    "trl": tuple(p for name in ("completions/*", "clip_ratio/*", "sampling/*", "num_tokens",
                                "reward_std", "rewards/*")
                 for p in (name, f"train/{name}")),
    # ms-swift's jsonl lines add its own resource keys to TRL's names
    "ms_swift": ("memory(GiB)", "train_speed(iter/s)"),
    "trl_ppo": ("objective/*", "policy/*", "loss/value_avg", "val/ratio", "val/ratio_var",
                "val/num_eos_tokens", "val/clipfrac_avg"),
    "openrlhf": ("actor_lr", "total_length", "train/actor_lr", "train/total_length"),
    "deepspeed_chat": ("cri_loss", "unsuper_loss"),
}
#: a dialect that logs another's names and more: recognised, it stands for both
EXTENDS = {"ms_swift": "trl"}

#: what no pattern of a signal takes, a dialect's or a user's neither: a penalty or a
#: per-function term is never the total reward
EXCLUDE: dict[str, tuple[str, ...]] = {
    "reward": ("*penalty*", "*rewards/*/*", "*/reward/*/*", "*reward_std*"),
    "kl": ("*rollout*", "*sampling*", "*vllm*"),
}


class _Patterns:
    """Compiled patterns of one (dialect, signal)."""

    __slots__ = ("dialect", "signal", "tests")

    def __init__(self, dialect: str, signal: str, patterns: Iterable[str]) -> None:
        self.dialect, self.signal = dialect, signal
        self.tests = [compile_pattern(p) for p in patterns]

    def match(self, key: str) -> bool:
        return any(t(key) for t in self.tests)


#: a metrics event's keys beyond this many are not read by the doctor (the first ones are);
#: a run that logs more is told once (docs/doctor.md "Limits")
MAX_KEYS = 4096
#: key sets whose signal map is kept (a trainer logs a few, over and over)
MAX_KEY_SETS = 64
#: keys whose signal is kept
MAX_KEYS_CACHED = 100_000


class KeySet:
    """One key set's signals: ``by_signal[signal]`` its keys, in the event's order."""

    __slots__ = ("by_signal", "keys", "memo")

    def __init__(self, keys: tuple[str, ...], by_signal: dict[str, list[str]]) -> None:
        self.keys = keys
        self.by_signal = by_signal
        self.memo: dict[int, Any] = {}  # a rule's selection, by id(its matcher)


class Signals:
    """The run's key -> signal map, in three tiers: the user's declaration (``[signals]``,
    ``init(signals=...)``: a declared signal is fed by its declared keys only), the
    framework dialects, then the words of a key's name (words.py), which count for a
    signal only while no dialect key fed it, the best-ranked keys first. ``resolve(data)``
    is one dict lookup per event once a key set was seen; the cache is dropped when a
    dialect key or a better-ranked word key first feeds a signal."""

    def __init__(self, extra: Mapping[str, Sequence[str]] | None = None) -> None:
        table: list[_Patterns] = []
        if extra:
            table += [_Patterns("user", sig, pats) for sig, pats in extra.items()]
        for dialect, signals in DIALECTS.items():
            table += [_Patterns(dialect, sig, pats) for sig, pats in signals.items()]
        self.table = table
        self.exclude = {sig: [compile_pattern(p) for p in EXCLUDE.get(sig, ())]
                        for sig in SIGNALS}
        self.markers = [_Patterns(dialect, "", pats) for dialect, pats in MARKERS.items()]
        #: key -> the dialects that name it (for a signal or as a marker), for recognition
        self.named: dict[str, tuple[str, ...]] = {}
        #: the user's declaration: signal -> its patterns, and those some key matched
        self.declared: dict[str, list[str]] = {s: list(p) for s, p in (extra or {}).items()}
        self.declared_hits: dict[str, set[str]] = {s: set() for s in self.declared}
        self._declared_tests = {s: [(p, compile_pattern(p)) for p in pats]
                                for s, pats in self.declared.items()}
        self.user = set(self.declared)
        self.specific: set[str] = set()  # signals some dialect key fed
        #: signal -> the best rank of a key read from its words so far (words.classify)
        self.word_rank: dict[str, tuple[int, int]] = {}
        self.word_ranks: dict[str, tuple[int, int]] = {}  # key -> its rank, once read
        self.fed: dict[str, dict[str, str]] = {}  # signal -> key -> dialect (for --explain)
        self.dialect_keys: dict[str, int] = {}
        self.keys_seen = 0  # distinct metric keys classified
        self.too_many = 0  # events with more than MAX_KEYS keys
        self._key: dict[str, tuple[str, tuple[str, ...], tuple[int, int]] | None] = {}
        self._sets: dict[tuple[str, ...], KeySet] = {}
        self._last: Any = None
        self._last_set: KeySet | None = None

    def _classify(self, key: str) -> tuple[str, tuple[str, ...], tuple[int, int]] | None:
        """(signal, the dialects that name the key for it, its rank) of a key: the user's
        and the dialects' patterns first, then its words (dialect ``generic``, ranked)."""
        if key in self._key:
            return self._key[key]
        found: tuple[str, tuple[str, ...], tuple[int, int]] | None = None
        for entry in self.table:
            if entry.match(key) and (entry.dialect == "user" or
                                     not any(x(key) for x in self.exclude[entry.signal])):
                names = tuple(dict.fromkeys(
                    e.dialect for e in self.table if e.signal == entry.signal and e.match(key)))
                found = (entry.signal, names, (0, 0))
                break
        if found is None:
            from trackmux.doctor.words import classify

            hit = classify(key)
            if hit is not None:
                found = (hit[0], ("generic",), hit[1])
        if found is not None and found[1][0] == "user":
            for pattern, test in self._declared_tests.get(found[0], ()):
                if test(key):
                    self.declared_hits[found[0]].add(pattern)
        if len(self._key) < MAX_KEYS_CACHED:
            self._key[key] = found
            self.keys_seen += 1
        return found

    def resolve(self, data: Mapping[str, Any]) -> KeySet:
        """The signals of one metrics event's keys (its first :data:`MAX_KEYS`)."""
        if data is self._last and self._last_set is not None:
            return self._last_set
        if len(data) > MAX_KEYS:
            self.too_many += 1
            keys = tuple(k for k, _ in zip(data, range(MAX_KEYS), strict=False))
        else:
            keys = tuple(data)
        hit = self._sets.get(keys)
        if hit is None:
            hit = self._build(keys)
            if len(self._sets) >= MAX_KEY_SETS:
                self._sets.pop(next(iter(self._sets)))
            self._sets[keys] = hit
        self._last, self._last_set = data, hit
        return hit

    def _build(self, keys: tuple[str, ...]) -> KeySet:
        by_signal: dict[str, list[str]] = {}
        generic: dict[str, list[tuple[tuple[int, int], str]]] = {}
        changed = False
        for key in keys:
            if not isinstance(key, str):
                continue
            hit = self._classify(key)
            self._name(key, hit)
            if hit is None:
                continue
            signal, dialects, rank = hit
            if signal in self.user and dialects[0] != "user":
                continue  # a declared signal is fed by the declared keys only
            if dialects == ("generic",):
                generic.setdefault(signal, []).append((rank, key))
                continue
            by_signal.setdefault(signal, []).append(key)
            if signal not in self.specific:
                self.specific.add(signal)
                changed = True
            self._note(signal, key, dialects)
        for signal, found in generic.items():
            if signal in self.specific:
                continue
            best = min(rank for rank, _ in found)
            known = self.word_rank.get(signal)
            if known is None or best < known:
                self.word_rank[signal] = best
                changed = changed or known is not None  # earlier key sets read a worse key
            elif best > known:
                continue  # a better-ranked key of this signal was seen in another key set
            chosen = [key for rank, key in found if rank == self.word_rank[signal]]
            by_signal.setdefault(signal, []).extend(chosen)
            for key in chosen:
                self._note(signal, key, ("generic",))
                self.word_ranks[key] = self.word_rank[signal]
        if changed:  # key sets cached before read keys that no longer count
            self._sets.clear()
        return KeySet(keys, by_signal)

    def _note(self, signal: str, key: str, dialects: tuple[str, ...]) -> None:
        keys = self.fed.setdefault(signal, {})
        if key not in keys and len(keys) < 64:
            keys[key] = "/".join(dialects)
            for dialect in dialects:
                self.dialect_keys[dialect] = self.dialect_keys.get(dialect, 0) + 1

    def read(self) -> dict[str, dict[str, str]]:
        """signal -> key -> where its name was read (a dialect, ``user``, ``generic``):
        the keys that count now (a word key drops out once a dialect key or a better word
        key fed its signal)."""
        out: dict[str, dict[str, str]] = {}
        for signal, keys in self.fed.items():
            kept = {k: d for k, d in keys.items()
                    if d != "generic" or (signal not in self.specific
                                          and self.word_ranks.get(k)
                                          == self.word_rank.get(signal))}
            if kept:
                out[signal] = kept
        return out

    def declared_unseen(self) -> dict[str, list[str]]:
        """The user's declared keys (patterns) that no key of the run matched, by signal."""
        return {s: [p for p in pats if p not in self.declared_hits[s]]
                for s, pats in self.declared.items()
                if any(p not in self.declared_hits[s] for p in pats)}

    def _name(self, key: str, hit: tuple[str, tuple[str, ...], tuple[int, int]] | None
              ) -> None:
        """Note which dialects name ``key`` (a signal's or a marker's), once per key."""
        if key in self.named or len(self.named) >= MAX_KEYS_CACHED:
            return
        names = [] if hit is None or hit[1] == ("generic",) else \
            [d for d in hit[1] if d != "user"]
        names += [m.dialect for m in self.markers if m.match(key) and m.dialect not in names]
        self.named[key] = tuple(names)

    def dialects(self) -> list[str]:
        """The dialects recognised from the run's keys: those that name a key no other
        dialect names (the most such keys first, then the most keys), so names several
        trainers share recognise none; only if no key is distinctive, every dialect that
        names one, the most first. ``generic`` last if generic patterns fed a signal."""
        own: dict[str, int] = {}
        shared: dict[str, int] = {}
        for names in self.named.values():
            for name in names:
                shared[name] = shared.get(name, 0) + 1
            if len(names) == 1:
                own[names[0]] = own.get(names[0], 0) + 1
        for child, parent in EXTENDS.items():  # ms-swift logs TRL's names, and its own
            if own.get(child):
                own[child] += own.pop(parent, 0)
                shared[child] = max(shared.get(child, 0), shared.pop(parent, 0))
        pool = own or shared
        ranked = sorted(pool, key=lambda d: (-own.get(d, 0), -shared.get(d, 0), d))
        return ranked + (["generic"] if "generic" in self.dialect_keys else [])

    def explain(self) -> dict[str, Any]:
        """The dialects recognised and which key fed which signal (word keys only where
        no dialect key or better-ranked word key fed the signal)."""
        known = self.dialects()
        signals = {sig: [{"key": k, "dialect": self._among(d, known)} for k, d in keys.items()]
                   for sig, keys in sorted(self.read().items())}
        return {"dialects": known, "signals": signals,
                "events_over_key_limit": self.too_many, "key_limit": MAX_KEYS}

    @staticmethod
    def _among(names: str, known: list[str]) -> str:
        """A key's dialects, narrowed to the run's recognised ones where any is among
        them (``train/loss`` of a verl SFT run is verl's, not TRL's or NeMo-RL's)."""
        parts = names.split("/")
        mine = [d for d in known if d in parts] + \
            [child for child, parent in EXTENDS.items() if parent in parts and child in known]
        return "/".join(dict.fromkeys(mine)) if mine else names


def check_mappings(value: Any, where: str = "doctor 'signals'") -> dict[str, list[str]]:
    """A declaration checked: signal -> non-empty list of keys or key patterns (a plain key
    matches itself; globs and ``re:`` as in a rule's keys). ``where`` names the argument
    in the one-line ``ValueError`` (the rules file's table, ``init(signals=...)``)."""
    choices = ", ".join(SIGNALS)
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a mapping of signal to key or list of keys, e.g. "
                         f"{{'reward': 'my/return'}}; got {type(value).__name__}; signals: "
                         f"{choices}")
    out: dict[str, list[str]] = {}
    for signal, patterns in value.items():
        if signal not in SIGNALS:
            raise ValueError(f"{where} has no signal {signal!r}; known: {choices}")
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, (list, tuple)) or not patterns or \
                not all(isinstance(p, str) and p for p in patterns):
            raise ValueError(f"{where} {signal!r} must be a key (a non-empty string) or a "
                             f"non-empty list of keys, got {patterns!r}")
        for pattern in patterns:
            try:
                compile_pattern(pattern)
            except ValueError as exc:
                raise ValueError(f"{where} {signal!r}: {exc}") from None
        out[str(signal)] = list(patterns)
    return out
