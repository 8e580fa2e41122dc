"""`vllm/smollm2-135m?replicas=2`: two real vLLM CPU engines as Ray actors on a local Ray cluster
(markers `vllm` and `ray`; run with `make test-vllm`, in `.venv-vllm`, about 2-3 minutes on 2 cores).

The in-process engine answers four questions greedily first (and is shut down), then the two
replica actors answer the same four through the least-loaded router: the same texts, both replicas
served some, and once the model is closed no replica actor nor its engine-core process is left.
KV cache: 1 GiB per engine (VLLM_CPU_KVCACHE_SPACE, the smallest vLLM takes; the provider's default is 2).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import psutil
import pytest

from harness.providers import GenerateConfig, load_model
from preft.vllm_provider import vllm_available
from harness.spec import ModelSpec

pytestmark = [pytest.mark.vllm, pytest.mark.ray,
              pytest.mark.skipif(not vllm_available(), reason="vllm not installed: `make vllm-install; make test-vllm`")]

QUESTIONS = [[{"role": "user", "content": "What is the capital of France?"}],
             [{"role": "user", "content": "Name three fruits."}],
             [{"role": "user", "content": "Write one sentence about the sea."}],
             [{"role": "user", "content": "What is 2 + 2?"}]]
GREEDY = GenerateConfig(max_tokens=16)


def answers(spec: str) -> tuple[list[str], object]:
    """The model's greedy answers to QUESTIONS (all in flight at once) and the model, closed."""
    async def go() -> tuple[list[str], object]:
        model = load_model(ModelSpec.parse(spec))
        try:
            outs = await asyncio.gather(*(model.generate(q, GREEDY) for q in QUESTIONS))
        finally:
            await model.aclose()
        return [o.text for o in outs], model

    return asyncio.run(go())


def alive(pids: list[int]) -> list[int]:
    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def test_two_replica_actors_answer_as_the_in_process_engine_and_leave_nothing(monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # before ray.init: the actors inherit it
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv("RAY_TMPDIR", f"/tmp/ray-helper/{uuid.uuid4().hex[:8]}")

    want, _ = answers("vllm/smollm2-135m")
    assert "Paris" in want[0]

    ray.init(num_cpus=2, object_store_memory=100 * 1024 * 1024, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        began = time.perf_counter()
        got, model = answers("vllm/smollm2-135m?replicas=2")
        wall = time.perf_counter() - began
        replicas = model.replicas  # type: ignore[attr-defined]
        served = model.router.served  # type: ignore[attr-defined]
        processes = [p for info in replicas.started for p in [info["pid"], *info["children"]]]
        engines = ", ".join(f"{info['startup_s']:.1f}" for info in replicas.started)
        print(f"\nreplica startup {replicas.startup_s:.1f} s (engines: {engines} s), requests per replica {served}, "
              f"wall {wall:.1f} s, processes {processes}")
        assert got == want
        assert len(replicas.started) == 2 and all(n >= 1 for n in served) and sum(served) == len(QUESTIONS)
        assert len({info["pid"] for info in replicas.started}) == 2
        assert all(info["children"] for info in replicas.started), "each engine runs its engine-core process"
        deadline = time.monotonic() + 30
        while alive(processes) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert alive(processes) == []
        assert [a for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "harness"] == []
    finally:
        ray.shutdown()
