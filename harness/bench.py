"""`harness bench runner`: how much the harness itself costs per call.

Starts the loopback server in `echo` mode (it answers at once), runs N samples through the full
runner (records written, cache off, progress bar on) with C connections, then the raw `openai`
AsyncOpenAI client with C workers against the same server, and prints both rates.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import openai
from rich.console import Console
from rich.table import Table

from harness.loopback import running_server
from harness.providers.base import GenerateConfig
from harness.records import Metric, RunConfig, SampleRecord
from harness.runner import execute, plan_run
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Suite, Transcript


class EchoSuite(Suite):
    """One model call per sample; the score is whether an answer came back."""

    name = "bench-echo"
    version = "1"
    headline_metric = "answered"

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def load_samples(self, corpus: str | None) -> list[Sample]:
        return [Sample(id=f"s{i:06d}", data={"prompt": f"sample {i}"}) for i in range(self.n)]

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        out = await ctx.generate("assistant", [{"role": "user", "content": sample.data["prompt"]}],
                                 GenerateConfig(max_tokens=8))
        return Transcript(output={"text": out.text})

    def scorers(self) -> dict[str, Scorer]:
        return {"answered": FunctionScorer("answered", self._answered, description="an answer came back")}

    async def _answered(self, sample: Sample, transcript: dict[str, Any], ctx: SampleContext) -> Score:
        return Score(values={"answered": bool(transcript["text"])})

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        ok = sum(bool(r.scores.get("answered")) for r in records)
        return {"answered": Metric(value=ok / len(records) if records else None, n=len(records))}


async def _raw_client(base_url: str, samples: int, concurrency: int) -> tuple[int, float]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY", max_retries=0)
    remaining = iter(range(samples))
    done = 0

    async def worker() -> None:
        nonlocal done
        for i in remaining:
            await client.chat.completions.create(
                model="echo", messages=[{"role": "user", "content": f"sample {i}"}], max_tokens=8)
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return done, elapsed


def _harness_runner(base_url: str, samples: int, concurrency: int, run_dir: Path,
                    executor: Any = None) -> tuple[int, float, Any]:
    config = RunConfig(suite="bench-echo", models={"assistant": "openai/echo"}, base_url=base_url,
                       max_connections=concurrency, cache=False, call_timeout_s=60, max_retries=2)
    plan = plan_run(config, run_dir, suite=EchoSuite(samples))
    t0 = time.perf_counter()
    summary = asyncio.run(execute(plan, show_progress=True, executor=executor))
    return summary.counts["samples"] - summary.counts["sample_errors"], time.perf_counter() - t0, plan.folder.path


def bench_runner(samples: int, concurrency: int, console: Console) -> dict[str, float]:
    with running_server("--echo") as base_url, tempfile.TemporaryDirectory() as tmp:
        # Warm both paths once (imports, connection pools) so neither pays start-up in its figure.
        asyncio.run(_raw_client(base_url, min(100, samples), concurrency))
        runner_ok, runner_s, path = _harness_runner(base_url, samples, concurrency, Path(tmp))
        lines = sum(1 for _ in open(path / "samples.jsonl"))
        raw_ok, raw_s = asyncio.run(_raw_client(base_url, samples, concurrency))
    runner_rate, raw_rate = runner_ok / runner_s, raw_ok / raw_s
    table = Table(title=f"bench runner: {samples} samples, concurrency {concurrency}")
    for col in ("path", "ok calls", "seconds", "calls/s"):
        table.add_column(col)
    table.add_row("harness runner (records on, cache off)", str(runner_ok), f"{runner_s:.2f}", f"{runner_rate:.1f}")
    table.add_row("raw AsyncOpenAI client", str(raw_ok), f"{raw_s:.2f}", f"{raw_rate:.1f}")
    console.print(table)
    console.print(f"runner / raw = {runner_rate / raw_rate:.2f}  (samples.jsonl lines written: {lines})")
    return {"runner_rate": runner_rate, "raw_rate": raw_rate, "ratio": runner_rate / raw_rate}


def bench_ray(samples: int, concurrency: int, console: Console, address: str | None = None) -> dict[str, float]:
    """`harness bench runner --executor ray`: the same echo run through the asyncio executor and
    through Ray tasks (local cluster, or `address`), in one process, one server; the ratio is
    Ray's rate over asyncio's. Cluster start-up and the workers' first imports are left out of
    Ray's figure (a warm-up run first): they are paid once per cluster, not per sample."""
    import ray

    from harness.executors.ray_executor import RayExecutor

    local: dict[str, Any] = {} if address else {"include_dashboard": False}
    ray.init(address=address, log_to_driver=False, configure_logging=False, **local)
    try:
        with running_server("--echo") as base_url, tempfile.TemporaryDirectory() as tmp:
            asyncio.run(_raw_client(base_url, min(100, samples), concurrency))
            _harness_runner(base_url, min(4 * concurrency, samples), concurrency, Path(tmp) / "warm", RayExecutor())
            local_ok, local_s, _ = _harness_runner(base_url, samples, concurrency, Path(tmp) / "asyncio")
            ray_ok, ray_s, path = _harness_runner(base_url, samples, concurrency, Path(tmp) / "ray", RayExecutor())
            lines = sum(1 for _ in open(path / "samples.jsonl"))
        nodes = len([n for n in ray.nodes() if n.get("Alive")])  # type: ignore[no-untyped-call]
        cpus = int(ray.cluster_resources().get("CPU", 0))  # type: ignore[no-untyped-call]
    finally:
        ray.shutdown()
    local_rate, ray_rate = local_ok / local_s, ray_ok / ray_s
    table = Table(title=f"bench runner --executor ray: {samples} samples, concurrency {concurrency}, "
                        f"{nodes} node(s), {cpus} CPUs")
    for col in ("executor", "ok samples", "seconds", "samples/s"):
        table.add_column(col)
    table.add_row("asyncio (this process)", str(local_ok), f"{local_s:.2f}", f"{local_rate:.1f}")
    table.add_row("ray (tasks)", str(ray_ok), f"{ray_s:.2f}", f"{ray_rate:.1f}")
    console.print(table)
    console.print(f"ray / asyncio = {ray_rate / local_rate:.2f}  (ray run's samples.jsonl lines: {lines})")
    return {"asyncio_rate": local_rate, "ray_rate": ray_rate, "ratio": ray_rate / local_rate}
