"""``rollout.trace.backend=trackmux``: verl's traced agent-loop calls become rows of a trace
table in the run, and verl's ``trace=False`` (its per-worker sample cap) is kept."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("verl")


def test_trace_op_is_replaced_on_import_verl() -> None:
    from verl.utils import rollout_trace as rt

    from trackmux.integrations import verl_trace

    assert rt.rollout_trace_op is verl_trace.rollout_trace_op
    # verl's own agent-loop code, imported after verl, is decorated by the trackmux op
    from verl.experimental.agent_loop.agent_loop import LLMServerClient

    assert LLMServerClient.generate.__code__.co_filename == verl_trace.__file__


def test_traced_calls_become_rows_of_the_trace_table(tracker_env: dict[str, Path]) -> None:
    import verl.utils.tracking as vt
    from verl.utils import rollout_trace as rt

    from trackmux.integrations import verl_trace

    class Client:
        @rt.rollout_trace_op
        async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]
                           ) -> dict[str, Any]:
            if prompt_ids == [13]:
                raise RuntimeError("server went away")
            return {"token_ids": [t + 1 for t in prompt_ids]}

        @rt.rollout_trace_op
        def score(self, text: str) -> float:
            return float(len(text))

    tracking = vt.Tracking(project_name="traces", experiment_name="exp",
                           default_backend=["file"], config={})
    rt.RolloutTraceConfig.reset()
    rt.RolloutTraceConfig.init("traces", "exp", "trackmux", False, 2)
    client = Client()

    async def rollout(index: int, traced: bool) -> None:
        with rt.rollout_trace_attr(sample_index=index, step=3, rollout_n=0, trace=traced):
            await client.generate([index], {"temperature": 1.0})
            client.score("abc")

    async def main() -> None:
        # verl's per-worker cap chose samples 0 and 1; the others run with trace=False
        await asyncio.gather(*(rollout(i, i < 2) for i in range(5)))
        with rt.rollout_trace_attr(sample_index=9, step=4, rollout_n=1, trace=True), \
                pytest.raises(RuntimeError):
            await client.generate([13], {})

    try:
        asyncio.run(main())
        verl_trace.flush()
        tracking.finish()
    finally:
        rt.RolloutTraceConfig.reset()
    path = tracker_env["file_root"] / "traces" / "exp.tables.jsonl"
    tables = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    role = f"pid{os.getpid()}"
    assert {t["key"] for t in tables} == {f"{role}/rollout_trace"}
    assert [t["step"] for t in tables] == [3, 4]
    assert tables[0]["columns"] == list(verl_trace.COLUMNS)
    rows = tables[0]["rows"]
    assert sorted((r[1], r[4].rsplit(".", 1)[-1]) for r in rows) == [
        (0, "generate"), (0, "score"), (1, "generate"), (1, "score")]
    generate = next(r for r in rows if r[1] == 0 and r[4].endswith("generate"))
    assert generate[5] == "success"
    assert orjson.loads(generate[6]) == {"prompt_ids": [0],
                                         "sampling_params": {"temperature": 1.0}}
    assert orjson.loads(generate[7]) == {"token_ids": [1]}
    (error_row,) = tables[1]["rows"]
    assert error_row[:4] == [4, 9, 1, False]
    assert error_row[5] == "error: RuntimeError: server went away"


def test_other_trace_backends_stay_verls(tracker_env: dict[str, Path]) -> None:
    from verl.utils import rollout_trace as rt


    calls: list[str] = []

    class Client:
        @rt.rollout_trace_op
        def score(self, text: str) -> float:
            calls.append(text)
            return 1.0

    rt.RolloutTraceConfig.reset()
    try:
        assert Client().score("x") == 1.0  # no backend: verl's path, nothing recorded
    finally:
        rt.RolloutTraceConfig.reset()
    assert calls == ["x"]


def test_traces_from_a_ray_agent_loop_worker_reach_the_drivers_run(
        tracker_env: dict[str, Path]) -> None:
    ray = pytest.importorskip("ray")
    import verl.utils.tracking as vt

    # The verl env points TMPDIR into .tox; Ray's unix socket paths under it would pass
    # the 107-byte limit and ray.init() would wait forever, so its session dir is short.
    ray_tmp = tempfile.mkdtemp(prefix="tmray-", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=ray_tmp,
             runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}})
    try:
        tracking = vt.Tracking(project_name="raytraces", experiment_name="exp",
                               default_backend=["file"], config={})

        @ray.remote(num_cpus=0)
        class Worker:
            def rollout(self) -> None:
                from verl.utils import rollout_trace as rt

                from trackmux.integrations import verl_trace

                class Client:
                    @rt.rollout_trace_op
                    def score(self, text: str) -> float:
                        return float(len(text))

                rt.RolloutTraceConfig.init("raytraces", "exp", "trackmux", False, None)
                for index in range(3):
                    with rt.rollout_trace_attr(sample_index=index, step=1, rollout_n=0):
                        Client().score("x" * index)
                verl_trace.flush()

        # verl names its workers agent_loop_worker_<i>_<8 hex>
        worker = Worker.options(name="agent_loop_worker_0_0123abcd").remote()
        ray.get(worker.rollout.remote(), timeout=300)
        summary = tracking.finish()
        assert summary.complete
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    path = tracker_env["file_root"] / "raytraces" / "exp.tables.jsonl"
    tables = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [(t["key"], t["step"]) for t in tables] == [("agent_loop_worker_0/rollout_trace", 1)]
    assert [(r[1], r[5], r[7]) for r in tables[0]["rows"]] == [
        (0, "success", "0.0"), (1, "success", "1.0"), (2, "success", "2.0")]
