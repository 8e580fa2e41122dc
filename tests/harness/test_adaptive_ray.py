"""One limiter for the whole Ray cluster (marker `ray`, < 30 s): two Ray workers each keep two
samples in flight, but their model calls acquire through one named limiter actor, so the loopback
server never sees more calls in flight than the limit (`--max-connections` 2), not 2 x 2."""

import asyncio
import json
import sys
import uuid

import pytest

from harness.executors.ray_executor import RayExecutor
from harness.loopback import LoopbackServer
from harness.records import RunConfig, SampleRecord
from harness.runner import execute, plan_run
from tests.harness.test_adaptive import AskOnce, _serving

pytestmark = pytest.mark.ray


def test_two_workers_share_one_limiter_actor(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    # As in test_ray_cluster.py: loopback only, no token auth; a private temp dir for this cluster.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv("RAY_TMPDIR", f"/tmp/ray-helper/{uuid.uuid4().hex[:8]}")
    # The workers cannot import this test module: its suite travels by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[AskOnce.__module__])
    suite = AskOnce()
    suite.samples = 16
    server = LoopbackServer(None, [], hang_s=1.0, delay_s=0.1)
    executor = RayExecutor(chunk=4)  # 4 chunks of 4 samples, 2 in flight in each: 2 tasks at once

    async def go():
        async with _serving(server) as url:
            config = RunConfig(suite="ask-once", models={"assistant": "openai/x"}, base_url=url, max_connections=2,
                               cache=False)
            plan = plan_run(config, tmp_path, suite=suite)
            summary = await execute(plan, show_progress=False, executor=executor)
            return url, plan, summary

    # A small local cluster started here (the executor joins it): 2 CPUs, a 100 MB object store.
    ray.init(num_cpus=2, object_store_memory=100 * 1024 * 1024, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        url, plan, summary = asyncio.run(go())
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[AskOnce.__module__])
        if ray.is_initialized():
            ray.shutdown()
    records = [SampleRecord.load(line) for line in plan.folder.samples_path.read_text().splitlines()]
    assert len({r.key for r in records}) == 16 == len(records) and all(r.status == "ok" for r in records)
    journal = [json.loads(line) for line in (plan.folder.path / "attempts.jsonl").read_text().splitlines()]
    assert sum(j["event"] == "finished" for j in journal) == 4
    # Two Ray worker processes asked the one actor for slots, and the server never saw more than 2.
    assert server.peak_in_flight == 2, server.peak_in_flight
    history = [json.loads(line) for line in (plan.folder.path / "limits.jsonl").read_text().splitlines()]
    assert [(h["key"], h["limit"], h["reason"]) for h in history] == [(f"openai|{url}|key:none", 2, "start")]
    figures = summary.calls["openai/x"]["limit"]
    assert figures["max"] == figures["final"] == 2 and figures["rate_limited"] == 0
    assert figures["holders"] >= 2, "both workers should have acquired through the actor"
