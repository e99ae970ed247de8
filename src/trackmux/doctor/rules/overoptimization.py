"""Reward-model overoptimization: the score of the learned reward the policy is trained on
keeps climbing while the reward that is checked (verified on the same rollouts, or
held out) has stopped rising.

The proxy's score goes on rising as the policy learns the reward model's errors, while
the true reward flattens and then falls (Gao, Schulman and Hilton, "Scaling Laws for
Reward Model Overoptimization", 2022). The flattening comes before the fall: a rule that
waits for the checked reward to fall (``reward_hacking``) dates the same failure tens of
steps later. Both lines are judged in their own noise units (each slope's t statistic),
so a reward model's logit-scale score and a 0-1 accuracy compare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.events import Event, MetricsEvent
from trackmux.doctor.detector import KeyMatcher, Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.series import SeriesRule, at, fmt, trend_window
from trackmux.doctor.stats import Series, median, trend


class Overoptimization(SeriesRule):
    """The reward model's score (``@rm_score``) trends up over the last ``trend_window``
    steps, its slope ``sigmas`` standard errors above flat and its rise at least
    ``min_change`` of where it stood, while the checked reward (``@reward`` when it is
    another key, ``@val_reward``) over the same steps does not rise (its slope under
    ``flat_sigmas`` standard errors); ``persist`` points in a row. One finding names
    both lines."""

    rule = "overoptimization"
    params_spec = {
        "keys": Param(["@rm_score", "@reward", "@val_reward"], "patterns"),
        "proxy_keys": Param(["@rm_score"], "patterns", "the learned reward's score"),
        "trend_window": Param(30, "count", "steps of the lines fitted"),
        "min_points": Param(8, "count", "least points in a fitted line (sparse logs)"),
        "sigmas": Param(3.0, "positive", "the score's rise, in standard errors"),
        "flat_sigmas": Param(1.0, "positive", "the checked reward's slope under this many "
                             "standard errors counts as not rising"),
        "min_change": Param(0.05, "fraction", "the score's rise over the window, as a "
                            "share of where it stood"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.proxy = KeyMatcher(self.params["proxy_keys"])
        self._proxies: frozenset[str] = frozenset()
        self.told: set[tuple[str, str]] = set()

    def size(self) -> int:
        return int(self.params["trend_window"]) + int(self.params["min_points"]) + 1

    def selected(self, data: Mapping[str, Any]) -> list[str]:
        proxies = self.keys_for(self.proxy, data)
        if proxies:
            self._proxies = self._proxies | frozenset(proxies)
        # a run that logs no reward model's score (most) keeps no lines for this rule
        return self.keys_for(self.match, data) if self._proxies else []

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        return None  # every key's line is read in update(), once all of the step is in

    def line(self, s: Series) -> tuple[list[int], list[float]] | None:
        return trend_window(s, int(self.params["trend_window"]), int(self.params["min_points"]))

    def update(self, event: Event) -> Sequence[Finding]:
        super().update(event)
        if not isinstance(event, MetricsEvent) or not self._proxies:
            return ()
        out: list[Finding] = []
        since = event.step - int(self.params["trend_window"])
        for proxy in self._proxies:
            ps = self.series.get(proxy)
            if ps is None or ps.steps[-1] != event.step:
                continue  # not logged at this step
            found = self.judge(proxy, ps, since, event)
            if found is not None:
                out.append(found)
        return out

    def judge(self, proxy: str, ps: Series, since: int, event: Event) -> Finding | None:
        p_line = self.line(ps)
        if p_line is None:
            return None
        slope, t, _ = trend(*p_line)
        start = median(p_line[1][:max(3, len(p_line[1]) // 5)])
        rise = slope * (p_line[0][-1] - p_line[0][0])
        rising = t >= self.params["sigmas"] and rise > 0 and \
            rise >= self.params["min_change"] * abs(start)
        stalled = None
        for key, s in self.series.items() if rising else ():
            if key in self._proxies or s.steps[-1] < since:
                continue  # a score, or a reward no longer logged
            g_line = self.line(s)
            if g_line is None:
                continue
            _, g_t, _ = trend(*g_line)
            if g_t < self.params["flat_sigmas"]:
                stalled = (key, g_line)
                break
        latch = self.latch(proxy)
        if not latch.check(rising and stalled is not None, event.step) or stalled is None \
                or (proxy, stalled[0]) in self.told:
            return None
        gold, (g_steps, g_values) = stalled
        self.told.add((proxy, gold))
        where, proof = at(ps, proxy, event.step)
        g_where, g_proof = at(self.series[gold], gold, g_steps[-1])
        g_start = median(g_values[:max(3, len(g_values) // 5)])
        return self.finding(latch.onset, [proxy, gold], (
            f"reward model overoptimization: the reward model's score {proxy} rose from "
            f"about {fmt(start)} at step {p_line[0][0]} to {where} while {gold}, the "
            f"reward that is checked, stopped rising (about {fmt(g_start)} at step "
            f"{g_steps[0]}, {g_where}; since step {latch.onset}): the policy is learning "
            f"the reward model's errors, and the checked reward falls next"),
            time=event.time, evidence=[proof, g_proof])


BUILTIN = (Overoptimization,)
