"""`harness bench runner`: how much the harness itself costs per call.

Starts the loopback server in `echo` mode (it answers at once), runs N samples through the full
runner (records written, cache off, progress bar on) with C connections, then the raw `openai`
AsyncOpenAI client with C workers against the same server, and prints both rates.

`--model instant`: no server at all -- the in-process instant model (`instant/...`, below) -- to
measure what records cost at scale: samples/s, peak RSS, the resume scan and the summary of a run
of N finished samples (issue 20: a million).
"""

from __future__ import annotations

import asyncio
import hashlib
import resource
import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import openai
from pydantic import JsonValue
from rich.console import Console
from rich.table import Table

from harness.loopback import running_server
from harness.messages import ChatMessage, text_of
from harness.providers.base import GenerateConfig, Model, ModelError, ModelOutput, Usage
from harness.records import Metric, RunConfig, SampleRecord
from harness.runner import execute, plan_run, summarize
from harness.spec import ModelSpec
from harness.stats import BOOTSTRAP_RESAMPLES
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Suite, Transcript


class BenchTranscript(TypedDict):
    """The echo and instant suites' transcript, as solved and as recorded: the reply's text. They
    declare no `transcript_type` (a million records are not validated one by one), so a scorer
    gets the recorded dict itself."""

    text: str


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

    async def _answered(self, sample: Sample, transcript: BenchTranscript, ctx: SampleContext) -> Score:
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

    # No dashboard on a local cluster; None (Ray's default) when joining one.
    ray.init(address=address, log_to_driver=False, configure_logging=False,
             include_dashboard=None if address else False)
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


# ---------------------------------------------------------------- the instant model and its suite

def instant_reply(prompt: str) -> str:
    """The instant model's answer: a pure function of the prompt (8 hex digits of its hash)."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:8]


class InstantModel:
    """Answers at once, in process, deterministically: `instant_reply` of the last message. A
    prompt whose answer starts with "00" (1 in 256) fails with a ModelError, so a run of it has
    error records too."""

    def __init__(self, name: str):
        self.name = name

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        prompt = text_of(messages[-1]) if messages else ""
        reply = instant_reply(prompt)
        if reply.startswith("00"):
            raise ModelError(f"{self.name}: fails by design on replies starting 00 ({reply})")
        return ModelOutput(text=reply, usage=Usage(prompt_tokens=len(prompt.split()), completion_tokens=1, calls=1))

    async def aclose(self) -> None:
        return None


class InstantProvider:
    """`instant/NAME`: the in-process instant model (no endpoint, nothing to check)."""

    name = "instant"

    def validate(self, spec: ModelSpec) -> None:
        return None

    def create(self, spec: ModelSpec) -> Model:
        return InstantModel(spec.full)


INSTANT_PROVIDER = InstantProvider()


def binomial_metric(hits: int, n: int, seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> Metric:
    """A rate of 0/1 units with a bootstrap CI drawn from the counts alone: resampling n units
    with replacement gives Binomial(n, hits/n) hits, so no unit needs to be kept (order-free)."""
    if n == 0:
        return Metric(value=None, n=0)
    rate = hits / n
    draws = np.random.default_rng(seed).binomial(n, rate, size=resamples) / n
    lo, hi = np.quantile(draws, [0.025, 0.975])
    return Metric(value=rate, ci_low=float(lo), ci_high=float(hi), n=n)


class HitCounter:
    """The instant suite's metrics accumulator: two counts, whatever the number of samples."""

    def __init__(self) -> None:
        self.n = 0
        self.hits = 0

    def add(self, record: SampleRecord) -> None:
        self.n += 1
        self.hits += bool(record.scores.get("hit"))

    def metrics(self, seed: int) -> dict[str, Metric]:
        return {"hit_rate": binomial_metric(self.hits, self.n, seed)}

    def breakdowns(self, seed: int) -> dict[str, dict[str, Metric]]:
        return {}

    def counts(self) -> dict[str, int]:
        return {"hits": self.hits}

    def official(self) -> dict[str, JsonValue]:
        return {}


class InstantSuite(Suite):
    """N samples, one instant-model call each; a sample is a hit when the reply's first hex digit
    is below 8 (about half). Its metrics accumulate (`metrics_accumulator`): summarising a
    million records keeps two integers."""

    name = "bench-instant"
    version = "1"
    headline_metric = "hit_rate"

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def load_samples(self, corpus: str | None) -> list[Sample]:
        # One shared empty `data` (never written): a million samples cost their ids, not a dict each.
        return [Sample(id=f"s{i:07d}", data=_NO_DATA) for i in range(self.n)]

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        out = await ctx.generate("assistant", [{"role": "user", "content": f"sample {sample.id}"}],
                                 GenerateConfig(max_tokens=8))
        return Transcript(output={"text": out.text})

    def scorers(self) -> dict[str, Scorer]:
        return {"hit": FunctionScorer("hit", self._hit, description="the reply's first hex digit is below 8")}

    async def _hit(self, sample: Sample, transcript: BenchTranscript, ctx: SampleContext) -> Score:
        return Score(values={"hit": transcript["text"][:1] in "01234567"})

    def metrics_accumulator(self) -> HitCounter:
        return HitCounter()

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        counter = HitCounter()
        for rec in records:
            counter.add(rec)
        return counter.metrics(seed)


_NO_DATA: dict[str, str] = {}


def peak_rss_mib() -> float:
    """This process's peak resident set so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_instant(samples: int, concurrency: int, console: Console, run_dir: Path | None = None) -> dict[str, float]:
    """`harness bench runner --model instant`: N samples through the full runner on the instant
    model (records written, cache off), then what a big run costs afterwards: the resume scan
    (the folder's key scan alone, and a whole `plan_run --resume` with nothing left to do) and
    the streamed summary."""
    config = RunConfig(suite=InstantSuite.name, models={"assistant": "instant/echo"},
                       max_connections=concurrency, cache=False, max_retries=0)
    suite = InstantSuite(samples)
    with tempfile.TemporaryDirectory(dir=run_dir) as tmp:
        plan = plan_run(config, Path(tmp), suite=suite)
        t0 = time.perf_counter()
        summary = asyncio.run(execute(plan, show_progress=True))
        run_s, rss_run = time.perf_counter() - t0, peak_rss_mib()
        folder = plan.folder
        # Each phase below is measured as a process that does only it would run it: what an earlier
        # phase held (the plan, the scanned keys) is let go first.
        del plan
        size_mib = folder.samples_path.stat().st_size / 2**20
        t0, c0 = time.perf_counter(), time.process_time()
        scanned = len(folder.scan_finished().keys)
        scan_s, scan_cpu, rss_scan = time.perf_counter() - t0, time.process_time() - c0, peak_rss_mib()
        t0 = time.perf_counter()
        left = len(plan_run(config, Path(tmp), resume=folder.run_id, suite=suite).todo)
        resume_s = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        again = summarize(suite, folder.read_manifest(), folder.iter_samples(), {})
        summary_s, summary_cpu, rss_end = time.perf_counter() - t0, time.process_time() - c0, peak_rss_mib()
    if scanned != samples or left or again.metrics != summary.metrics:
        raise RuntimeError(f"bench runner --model instant: {scanned} keys scanned for {samples} samples, "
                           f"{left} left on resume; the streamed summary must match the run's")
    rate = samples / run_s  # wall clock: on a shared machine the CPU columns say what the work itself cost
    table = Table(title=f"bench runner --model instant: {samples} samples, concurrency {concurrency}")
    for col in ("measure", "value"):
        table.add_column(col)
    for label, value in (
        ("run: samples/s (records on, cache off)", f"{rate:.0f} ({run_s:.1f} s, {summary.counts['sample_errors']} errors)"),
        ("samples.jsonl", f"{size_mib:.0f} MiB"),
        ("resume scan: finished keys (s wall / CPU)", f"{scan_s:.2f} / {scan_cpu:.2f}"),
        ("resume: whole plan_run --resume (s)", f"{resume_s:.2f}"),
        ("summary, streamed (s wall / CPU)", f"{summary_s:.2f} / {summary_cpu:.2f}"),
        ("peak RSS after run / scan / end (MiB)", f"{rss_run:.0f} / {rss_scan:.0f} / {rss_end:.0f}"),
        ("hit_rate [95% CI]", f"{summary.metrics['hit_rate'].value:.4f} [{summary.metrics['hit_rate'].ci_low:.4f}, "
                              f"{summary.metrics['hit_rate'].ci_high:.4f}]"),
    ):
        table.add_row(label, value)
    console.print(table)
    return {"samples_per_s": rate, "scan_s": scan_s, "resume_s": resume_s, "summary_s": summary_s,
            "peak_rss_mib": rss_end}
