"""``trackmux agent``: ask the sweep for a trial, run the program, follow its run, tell.

One trial at a time, as wandb's agent does; run several agents (on one machine or many)
to run trials in parallel: they share the sweep through its storage.

While the program runs, the agent reads the trial's run every ``poll`` seconds (default
0.2, read-only: one indexed query of the rows after the last it saw) and stops the trial
when

- the doctor appended a finding the sweep's ``prune:`` names (by default any critical
  one, a reward collapse or NaN, and the signs of reward hacking: spec.WRONG_RULES), or
- Optuna's pruner (``early_terminate``: median or hyperband) says so, fed with the
  metric's points as they are logged.

Stopping is SIGTERM to the program's process group, ``prune.grace_seconds`` (30 s), then
SIGKILL. The run is then marked ``pruned`` with the reason, and the trial is told to
Optuna as PRUNED with its last metric value as an intermediate value: TPE ranks every
pruned trial below every complete one, so ``bayes`` moves away from that region.

A program that exits non-zero, never starts a trackmux run or never logs the metric is a
FAIL trial with that reason; the agent goes on (it gives up after ``max_failures`` failed
trials in a row, like wandb's agent, so a broken command does not burn the budget).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import socket
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trackmux.core import settings
from trackmux.sweeps import command, join, space
from trackmux.sweeps.follow import Follower
from trackmux.sweeps.storage import SWEEPS_DIR, heartbeat_seconds
from trackmux.sweeps.study import Sweep
from trackmux.sweeps.tail import StderrTail

#: a trainer's step can last well under a second: the stop should follow the finding
#: within a few steps (the trial's doctor reads its spool every 0.25 s)
POLL_SECONDS = 0.2


@dataclass
class Outcome:
    """How a trial ended, as ``trackmux sweep show`` reports it."""

    number: int
    state: str  # complete, pruned, failed
    params: dict[str, Any]
    value: float | None = None
    reason: str = ""
    pruned_by: str | None = None  # doctor, median, hyperband
    finding: dict[str, Any] | None = None
    run_id: str | None = None
    run_dir: str | None = None
    steps: int = 0
    exit_code: int | None = None
    cpu_seconds: float | None = None
    seconds: float = 0.0
    #: the trainer's last step when the doctor's finding reached the spool
    found_at_step: int | None = None
    #: the last lines the program wrote to stderr (its traceback, its usage error)
    stderr: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


class _Trial:
    """One running program: its process, the run it claimed, and the stop in progress."""

    def __init__(self, proc_pid: int, claim: Path, metric: str | None) -> None:
        self.pid = proc_pid
        self.claim = claim
        self.metric = metric
        self.follower: Follower | None = None
        self.run: dict[str, Any] = {}
        self.status: int | None = None
        self.cpu: float | None = None
        self.stop_reason: str | None = None
        self.stopped_by: str | None = None
        self.finding: dict[str, Any] | None = None
        self.found_at_step: int | None = None
        self.kill_at: float | None = None
        self.stderr: StderrTail | None = None

    def reap(self) -> bool:
        if self.status is not None:
            return True
        try:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.status = -1
            return True
        if pid == 0:
            return False
        self.status = os.waitstatus_to_exitcode(status)
        self.cpu = usage.ru_utime + usage.ru_stime
        return True

    def find_run(self) -> None:
        if self.follower is not None or not self.claim.exists():
            return
        try:
            self.run = json.loads(self.claim.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # being written: next poll
            return
        self.follower = Follower(Path(self.run["run_dir"]), self.metric)

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)


def _stop_with_agent() -> None:
    """In the trial's process before exec: SIGTERM it when the agent dies, even by
    SIGKILL (Linux ``PR_SET_PDEATHSIG``), so no trial outlives its agent unseen."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Agent:
    def __init__(self, sweep: Sweep, *, root: str | os.PathLike[str] | None = None,
                 poll: float = POLL_SECONDS, max_failures: int = 5,
                 echo: Callable[[str], None] = print) -> None:
        self.sweep = sweep
        self.spec = sweep.spec
        self.root = settings.spool_root(root)
        self.poll = poll
        self.max_failures = max_failures
        self.echo = echo
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.heartbeat = heartbeat_seconds()
        self._last_beat = 0.0

    def run(self, count: int | None = None) -> list[Outcome]:
        """Run trials until ``count`` are done or the sweep has no budget left."""
        done: list[Outcome] = []
        failures = 0
        while count is None or len(done) < count:
            if not self.sweep.budget_left():
                self.echo(f"sweep {self.sweep.id}: no trials left (run_cap or grid done)")
                break
            outcome = self.run_trial()
            done.append(outcome)
            failures = failures + 1 if outcome.state == "failed" else 0
            if failures >= self.max_failures:
                self.echo(f"sweep {self.sweep.id}: {failures} failed trials in a row; this "
                          "agent stops (check the command with one trial)")
                break
        return done

    # -- one trial ---------------------------------------------------------------
    def run_trial(self) -> Outcome:
        trial = self._ask()
        params = {p.name: space.program_value(p, trial.params[p.name])
                  for p in self.spec.params}
        trial.set_user_attr("params", params)
        trial.set_user_attr("agent", self.name)
        work = self.root / SWEEPS_DIR / "agents" / f"{self.sweep.id}-{trial.number}-{os.getpid()}"
        work.mkdir(parents=True, exist_ok=True, mode=0o700)
        started = time.monotonic()
        try:
            argv = command.build(self.spec.command, self.spec.program, params,
                                 work / "params.json")
            self.echo(f"sweep {self.sweep.id} trial {trial.number}: {' '.join(argv)}")
            outcome = self._run(trial, params, argv, work)
        except BaseException as exc:  # Ctrl-C, SIGTERM (cli/agent.py), a storage error
            with contextlib.suppress(Exception):
                run = trial.user_attrs
                self._tell(trial, Outcome(trial.number, "failed", params,
                                          run_id=run.get("run_id"), run_dir=run.get("run_dir"),
                                          reason=f"the agent was stopped "
                                                 f"({type(exc).__name__}: {exc})"))
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        outcome.seconds = time.monotonic() - started
        self._tell(trial, outcome)
        value = "-" if outcome.value is None else f"{outcome.value:.4g}"
        self.echo(f"sweep {self.sweep.id} trial {trial.number}: {outcome.state}, value "
                  f"{value}, {outcome.steps} steps"
                  + (f": {outcome.reason}" if outcome.reason else ""))
        return outcome

    def _ask(self) -> Any:
        """A new trial with its parameters. Random and TPE draws use the sampler seeded for
        the trial's own number (known once the storage gave it), so two agents that ask at
        the same moment never draw alike; the grid sampler picks its point in ``ask``."""
        import optuna

        study = self.sweep.study
        wanted = space.distributions(self.spec.params)
        with warnings.catch_warnings():  # Optuna: heartbeats are experimental, and meant
            warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", message="Heartbeat of storage")  # for optimize()
            optuna.storages.fail_stale_trials(study)  # trials whose agent died
            study.sampler = self.sweep.sampler(number=len(self.sweep.trials()))
            if self.spec.method == "grid":
                trial = study.ask(wanted)
            else:
                trial = study.ask()
                study.sampler = self.sweep.sampler(number=trial.number)
                for name, dist in wanted.items():
                    space.suggest(trial, name, dist)
        self._beat(trial)
        return trial

    def _beat(self, trial: Any) -> None:
        """Tell the storage this trial's agent is alive (Optuna has no public call for an
        ask-and-tell trial: ``_trial_id`` is the storage's id of it)."""
        self._last_beat = time.monotonic()
        self.sweep.study._storage.record_heartbeat(trial._trial_id)

    def _env(self, number: int, params: dict[str, Any], claim: Path) -> dict[str, str]:
        env = dict(os.environ)
        env[join.SWEEP_ID] = self.sweep.id
        env[join.TRIAL] = str(number)
        env[join.PARAMS] = json.dumps(params)
        env[join.CLAIM] = str(claim)
        env[join.RUN_NAME] = join.trial_name(number, params, self.spec.run_name)
        if self.spec.project:
            env.setdefault("TRACKMUX_PROJECT", self.spec.project)
        return env

    def _run(self, trial: Any, params: dict[str, Any], argv: list[str],
             work: Path) -> Outcome:
        import subprocess

        claim = work / "run.json"
        try:
            proc = subprocess.Popen(argv, env=self._env(trial.number, params, claim),
                                    start_new_session=True, preexec_fn=_stop_with_agent,
                                    stderr=subprocess.PIPE)
        except OSError as exc:
            return Outcome(trial.number, "failed", params,
                           reason=f"cannot start {argv[0]!r}: {exc}")
        running = _Trial(proc.pid, claim, self.spec.metric_name)
        assert proc.stderr is not None
        running.stderr = StderrTail(proc.stderr)
        reported: set[int] = set()
        try:
            while True:
                exited = running.reap()
                if running.follower is None:
                    running.find_run()
                    if running.follower is not None:  # `sweep show` links a running trial
                        trial.set_user_attr("run_id", running.run.get("run_id"))
                        trial.set_user_attr("run_dir", running.run.get("run_dir"))
                if running.follower is not None:
                    points, found = running.follower.poll()
                    if running.stop_reason is None and not exited:  # an ended program
                        self._check(trial, running, points, found, reported)  # is no stop
                if exited:
                    break
                if time.monotonic() - self._last_beat >= self.heartbeat:
                    self._beat(trial)
                if running.kill_at is not None and time.monotonic() >= running.kill_at:
                    running.signal(signal.SIGKILL)
                    running.kill_at = float("inf")
                time.sleep(self.poll)
        except BaseException:
            running.signal(signal.SIGTERM)
            deadline = time.monotonic() + self.spec.prune.grace_seconds
            while not running.reap() and time.monotonic() < deadline:
                time.sleep(0.1)
            running.signal(signal.SIGKILL)
            running.reap()
            raise
        finally:
            proc.returncode = running.status  # reaped here, not by Popen
        return self._outcome(trial, params, running, reported)

    def _check(self, trial: Any, running: _Trial, points: list[tuple[int, float]],
               found: list[dict[str, Any]], reported: set[int]) -> None:
        """Stop the trial for a finding the sweep prunes on, or the metric pruner."""
        assert running.follower is not None
        for index, finding in enumerate(found):
            if self.spec.prune.stops(finding):
                at = running.follower.progress.found_at[-len(found) + index]
                self._stop(running, "doctor",
                           f"{finding['rule']} ({finding['severity']}) at step "
                           f"{finding['step']}: {finding['message']}", finding, at)
                return
        early = self.spec.early_terminate
        if early is None or not points:
            return
        fresh = [(step, value) for step, value in points
                 if step not in reported and math.isfinite(value)]
        for step, value in fresh:  # a NaN is the doctor's (``nonfinite``, with its reason):
            trial.report(value, step)  # Optuna's pruners would stop it as "behind"
            reported.add(step)
        if fresh and trial.should_prune():
            step, value = fresh[-1]
            self._stop(running, early.type,
                       f"the {early.type} pruner: {self.spec.metric_name} {value:.4g} at "
                       f"step {step} is behind the other trials")

    def _stop(self, running: _Trial, by: str, reason: str,
              finding: dict[str, Any] | None = None, found_at: int | None = None) -> None:
        running.stop_reason, running.stopped_by = reason, by
        running.finding, running.found_at_step = finding, found_at
        running.kill_at = time.monotonic() + self.spec.prune.grace_seconds
        self.echo(f"sweep {self.sweep.id}: stopping the trial ({by}): {reason}")
        running.signal(signal.SIGTERM)

    def _outcome(self, trial: Any, params: dict[str, Any], running: _Trial,
                 reported: set[int]) -> Outcome:
        out = Outcome(trial.number, "failed", params, exit_code=running.status,
                      cpu_seconds=running.cpu)
        if running.stderr is not None:
            out.stderr = running.stderr.lines()
        follower = running.follower
        if follower is None:
            running.find_run()  # a short program: claimed after our last look
            follower = running.follower
        if follower is not None:
            for _ in range(2):  # what the program logged last; its finish may still commit
                follower.poll()
            follower.close()
            out.run_id, out.run_dir = running.run.get("run_id"), running.run.get("run_dir")
            out.steps = follower.progress.last_step + 1
            out.value = self._value(follower.progress.points)
        if running.stop_reason is not None:
            out.state, out.reason, out.pruned_by = "pruned", running.stop_reason, \
                running.stopped_by
            out.finding, out.found_at_step = running.finding, running.found_at_step
            if out.run_dir:
                self._mark_pruned(Path(out.run_dir), out)
            finite = [p for p in (follower.progress.points if follower else [])
                      if math.isfinite(p[1])]
            if finite and finite[-1][0] not in reported:
                trial.report(finite[-1][1], finite[-1][0])
            return out
        if running.status != 0:
            code = running.status
            out.reason = (f"the program was killed by signal {-code}" if code is not None
                          and code < 0 else f"the program exited with code {code}")
            if out.stderr:  # the code alone says nothing; its last words do
                out.reason += f": {out.stderr[-1]}"
        elif follower is None:
            out.reason = "the program started no trackmux run (trackmux.init was not called)"
        elif out.value is None and self.spec.metric_name:
            out.reason = f"the run never logged the metric {self.spec.metric_name!r}"
        else:
            out.state = "complete"
        return out

    def _value(self, points: list[tuple[int, float]]) -> float | None:
        values = [v for _, v in points if v == v]  # NaN is no result
        if not values:
            return None
        if self.spec.summary == "best":
            return max(values) if self.spec.goal == "maximize" else min(values)
        return values[-1]

    def _mark_pruned(self, run_dir: Path, out: Outcome) -> None:
        from trackmux.core.spool.reader import SpoolReader

        try:
            reader = SpoolReader(run_dir)
            try:
                reader.mark_pruned(out.reason, f"sweep {self.sweep.id} trial {out.number} "
                                                f"({out.pruned_by})")
            finally:
                reader.close()
        except Exception as exc:  # the trial is pruned in the sweep all the same
            self.echo(f"sweep {self.sweep.id}: could not mark run {run_dir} pruned: {exc}")

    def _tell(self, trial: Any, out: Outcome) -> None:
        from optuna.trial import TrialState

        attrs = {k: v for k, v in asdict(out).items()
                 if k not in ("number", "params", "extra") and v is not None}
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        study = self.sweep.study
        if self.spec.method == "grid":  # the grid sampler's after_trial calls study.stop(),
            import optuna  # which only works inside study.optimize; it keeps no state

            study.sampler = optuna.samplers.RandomSampler()
        if out.state == "complete":
            study.tell(trial, out.value)
        elif out.state == "pruned":
            study.tell(trial, state=TrialState.PRUNED)
        else:
            study.tell(trial, state=TrialState.FAIL)
