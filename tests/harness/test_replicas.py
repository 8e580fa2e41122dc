"""Least-loaded routing over replicas (`harness.replicas`) and `openai/` models with several base
URLs, against real loopback servers (no model: `--echo`)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from harness.errors import HarnessError
from harness.loopback import running_server
from harness.providers import check_reachable
from harness.providers.base import GenerateConfig, RetryableModelError
from harness.providers.openai_provider import OpenAIModel
from harness.redact import redact_url
from harness.replicas import LeastLoaded, split_urls

MESSAGES = [{"role": "user", "content": "hi"}]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


def test_ties_go_round_robin_and_the_least_loaded_wins():
    router = LeastLoaded(["a", "b", "c"])
    assert [router.pick() for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    with router.use() as (i, name), router.use() as (j, _):
        assert (i, name, j) == (0, "a", 1)
        assert router.pick() == 2  # the only idle one
        assert router.in_flight == [1, 1, 0]
    assert router.in_flight == [0, 0, 0] and router.served == [1, 1, 0]


def test_counts_return_on_errors_and_a_down_replica_comes_back():
    clock = Clock()
    router = LeastLoaded(["a", "b"], down_s=5.0, clock=clock)
    with pytest.raises(RuntimeError), router.use() as (i, _):
        raise RuntimeError("boom")
    assert router.in_flight == [0, 0]
    router.mark_down(0)
    assert {router.pick() for _ in range(4)} == {1}
    clock.now += 5.0
    assert {router.pick() for _ in range(4)} == {0, 1}
    router.mark_down(0)
    clock.now += 1.0
    router.mark_down(1)  # both down: the one back soonest is tried rather than failing the call
    assert router.pick() == 0


def test_base_url_lists_are_parsed_checked_and_redacted():
    assert split_urls(" http://a/v1 ,http://b/v1") == ["http://a/v1", "http://b/v1"]
    assert split_urls(None) == []
    with pytest.raises(HarnessError, match="empty entry"):
        split_urls("http://a/v1,,http://b/v1")
    assert redact_url("http://u:secret1@a:1/v1,http://u:secret2@b:2/v1") == "http://u:***@a:1/v1,http://u:***@b:2/v1"


def test_every_replica_is_checked_before_a_run():
    dead = closed_port_url()
    with running_server("--echo") as live:
        check_reachable({"assistant": ("openai/m", live)})
        with pytest.raises(HarnessError, match=dead.replace("/v1", "")):
            check_reachable({"assistant": ("openai/m", f"{live},{dead}")})


def test_a_fast_replica_serves_more_than_a_slow_one():
    async def run(url: str) -> list[int]:
        model = OpenAIModel("m", url)

        async def worker(n: int) -> None:
            for _ in range(n):
                out = await model.generate(MESSAGES, GenerateConfig(max_tokens=8))
                assert out.text

        try:
            await asyncio.gather(*(worker(8) for _ in range(4)))  # 32 calls, 4 in flight at most
        finally:
            await model.aclose()
        assert model.replicas.in_flight == [0, 0]
        return model.replicas.served

    with running_server("--echo") as fast, running_server("--echo", "--delay-s", "0.4") as slow:
        fast_n, slow_n = asyncio.run(run(f"{fast},{slow}"))
    assert fast_n + slow_n == 32
    assert slow_n >= 1 and fast_n >= 4 * slow_n  # the slow one holds its requests 0.4 s, so it is rarely least loaded


def test_a_replica_that_refuses_connections_is_left_out_and_cancelled_calls_free_their_slot():
    async def run(url: str) -> tuple[list[int], list[int], bool]:
        model = OpenAIModel("m", url)
        try:
            with pytest.raises(RetryableModelError):  # the first pick is the dead replica: a retryable error
                await model.generate(MESSAGES, GenerateConfig(max_tokens=8))
            for _ in range(3):  # it is down now (for 5 s): every call lands on the live one
                await model.generate(MESSAGES, GenerateConfig(max_tokens=8))
            served = list(model.replicas.served)
            slow_call = asyncio.create_task(model.generate(MESSAGES, GenerateConfig(max_tokens=8)))
            await asyncio.sleep(0.2)
            busy = model.replicas.in_flight[1] == 1
            slow_call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await slow_call
            return served, model.replicas.in_flight, busy
        finally:
            await model.aclose()

    with running_server("--echo", "--delay-s", "0.5") as live:
        served, in_flight, busy = asyncio.run(run(f"{closed_port_url()},{live}"))
    assert served == [1, 3] and busy and in_flight == [0, 0]


def test_the_replicas_option_of_a_vllm_spec_is_parsed_and_checked():
    from harness.providers.ray_replicas import split_replicas

    assert split_replicas("smollm2-135m") == ("smollm2-135m", None)
    assert split_replicas("smollm2-135m?replicas=2") == ("smollm2-135m", 2)
    assert split_replicas("m@/tmp/adapter#all-token?replicas=auto") == ("m@/tmp/adapter#all-token", "auto")
    for bad, why in [("m?replicas=0", "whole number >= 1"), ("m?replicas=two", "whole number"),
                     ("m?gpus=1", "only spec option is \\?replicas=N")]:
        with pytest.raises(HarnessError, match=why):
            split_replicas(bad)


def test_the_ray_driver_starts_replicas_through_the_providers_hook(monkeypatch):
    """`start_replica_sets` knows no provider: it asks each spec's provider for `replica_engines(spec)`
    (`vllm/` has the hook) and starts one set per answer; stand-in providers, no Ray, no vLLM."""
    import harness.providers as providers
    from harness.providers import ray_replicas

    class WithReplicas:
        name = "vllm"

        def replica_engines(self, spec):
            name, count = ray_replicas.split_replicas(spec.name)
            return None if count is None else (count, f"factory of {name}")

    class Plain:
        name = "openai"

    started = []
    monkeypatch.setitem(providers._LOADED, "vllm", WithReplicas())
    monkeypatch.setitem(providers._LOADED, "openai", Plain())
    monkeypatch.setattr(ray_replicas.ReplicaSet, "start", classmethod(
        lambda cls, spec, count, make, spare_cpus=0.0: started.append((spec, count, make, spare_cpus)) or spec))
    sets = ray_replicas.start_replica_sets(["vllm/m?replicas=2", "openai/x", "vllm/m", "vllm/m?replicas=2"])
    assert sets == ["vllm/m?replicas=2"]
    assert started == [("vllm/m?replicas=2", 2, "factory of m", 1.0)]


def test_replica_placement_asks_for_one_gpu_each_or_cpus_and_names_what_is_missing():
    from harness.providers.ray_replicas import placement, resolve_count

    cpus = {"CPU": 4.0}
    assert placement("vllm/m?replicas=4", 4, cpus, cpus, [cpus]) == {"num_cpus": 1.0}
    gpus = {"CPU": 8.0, "GPU": 4.0}
    assert placement("vllm/m?replicas=4", 4, gpus, gpus, [gpus], spare_cpus=1) == {"num_gpus": 1.0, "num_cpus": 0.0}
    assert resolve_count("vllm/m?replicas=auto", "auto", gpus) == 4
    with pytest.raises(HarnessError, match="reports none: give a count"):
        resolve_count("vllm/m?replicas=auto", "auto", cpus)
    # Free GPUs on paper, but no node holds a whole GPU twice: the per-node sizes are checked too.
    with pytest.raises(HarnessError, match=r"nodes' sizes hold only 1 .*at most 1 \(\?replicas=1\)"):
        placement("vllm/m?replicas=2", 2, {"GPU": 2.0}, {"GPU": 2.0}, [{"GPU": 1.5}, {"GPU": 0.5}])
    # Enough GPUs, but no CPU left for the Ray executor's sample tasks.
    with pytest.raises(HarnessError, match="0.5 CPUs free: add nodes with CPUs"):
        placement("vllm/m?replicas=2", 2, gpus, {"CPU": 0.5, "GPU": 4.0}, [gpus], spare_cpus=1)
