"""Adaptive concurrency end to end (asyncio executor, no Ray): a loopback server answers 429
with Retry-After for the first K requests, or above a number in flight, or forever; the run's
limit backs off and recovers, every sample is recorded once, and the limit's history is in
`limits.jsonl` and the summary."""

import asyncio
import contextlib
import json

from aiohttp import web

from harness.loopback import LoopbackServer
from harness.records import Metric, RunConfig, SampleRecord
from harness.runner import execute, plan_run
from harness.suite import FunctionScorer, Sample, Score, Suite, Transcript
from harness.providers.base import GenerateConfig


class AskOnce(Suite):
    """Each sample asks the assistant once and records its reply."""

    name = "ask-once"
    version = "1"
    headline_metric = "n"
    solver_roles = ("assistant",)
    samples = 40

    def load_samples(self, corpus):
        return [Sample(id=f"s{i:02d}", data={}) for i in range(self.samples)]

    def corpus_identity(self, corpus):
        return {"sha256": f"fixed-{self.samples}"}

    async def solve(self, sample, ctx):
        out = await ctx.generate("assistant", [{"role": "user", "content": sample.id}], GenerateConfig(max_tokens=8))
        return Transcript(output={"reply": out.text})

    def scorers(self):
        return {"n": FunctionScorer("n", self._score, description="always 1")}

    async def _score(self, sample, transcript, ctx):
        return Score(values={"n": 1})

    def metrics(self, records: list[SampleRecord], seed: int = 0):
        return {"n": Metric(value=float(len(records)), n=len(records))}


@contextlib.asynccontextmanager
async def _serving(server):
    """The loopback server in this event loop (no child process to start: seconds saved)."""
    runner = web.AppRunner(server.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    finally:
        await runner.cleanup()


def _run(tmp_path, server, samples=40, max_retries=5):
    suite = AskOnce()
    suite.samples = samples

    async def go():
        async with _serving(server) as url:
            config = RunConfig(suite="ask-once", models={"assistant": "openai/x"}, base_url=url, max_connections=8,
                               cache=False, max_retries=max_retries)
            plan = plan_run(config, tmp_path, suite=suite)
            return url, plan, await execute(plan, show_progress=False)

    url, plan, summary = asyncio.run(go())
    records = [SampleRecord.load(line) for line in plan.folder.samples_path.read_text().splitlines()]
    history = [json.loads(line) for line in (plan.folder.path / "limits.jsonl").read_text().splitlines()]
    return summary, records, history, url


def _server(faults=(), **kwargs):
    return LoopbackServer(None, list(faults), hang_s=1.0, **kwargs)


def test_first_requests_rate_limited_back_off_then_recover(tmp_path):
    server = _server(rate_limit_first=12, retry_after_s=0.3, delay_s=0.02)
    summary, records, history, url = _run(tmp_path, server)
    keys = [r.key for r in records]
    assert len(keys) == 40 == len(set(keys)) and all(r.status == "ok" for r in records)
    assert server.faulted == {"429": 12} and server.requests == 52
    limits = [h["limit"] for h in history]
    reasons = [h["reason"] for h in history]
    # The 8 calls in flight all meet 429: one halving (8 -> 4) and a pause; the last 4 429s hit
    # calls started after it: at least one more halving. Then one more slot per 8 successes.
    backoffs = reasons.count("rate-limited")
    assert reasons == ["start"] + ["rate-limited"] * backoffs + ["recovered"] * (len(reasons) - 1 - backoffs)
    assert backoffs >= 2 and limits[:3] == [8, 4, 2]
    assert all(b == max(1, a // 2) for a, b in zip(limits[:backoffs], limits[1:backoffs + 1]))
    assert all(b == a + 1 for a, b in zip(limits[backoffs:], limits[backoffs + 1:]))
    assert len(limits) >= backoffs + 3 and history[1]["retry_after_s"] == 0.3
    assert {h["key"] for h in history} == {f"openai|{url}|key:none"}
    figures = summary.calls["openai/x"]["limit"]
    assert figures["min"] == limits[backoffs] and figures["final"] == limits[-1] > figures["min"] and figures["rate_limited"] == 12
    assert figures["paused_s"] >= 0.3 and summary.calls["openai/x"]["retries"] == 12


def test_a_cap_on_requests_in_flight_is_found_and_every_sample_finishes(tmp_path):
    server = _server(rate_limit_above=3, retry_after_s=0.1, delay_s=0.03)
    summary, records, history, _ = _run(tmp_path, server, samples=30)
    assert len({r.key for r in records}) == 30 == len(records) and all(r.status == "ok" for r in records)
    figures = summary.calls["openai/x"]["limit"]
    assert figures["min"] <= 3 and figures["rate_limited"] == server.faulted["429"] > 0
    assert server.peak_in_flight <= 8
    assert history[1]["reason"] == "rate-limited" and history[1]["limit"] == 4


def test_a_provider_that_answers_429_forever_is_a_bounded_recorded_back_off(tmp_path):
    summary, records, history, _ = _run(tmp_path, _server(["429"], retry_after_s=0.05), samples=3, max_retries=2)
    # Each sample gave up after its retries: an error on the sample, not a hung run.
    assert len(records) == 3 and all(r.status == "error" and "gave up after 3 attempts" in r.errors[0].message
                                     for r in records)
    assert summary.calls["openai/x"]["limit"]["final"] == 1 and history[-1]["limit"] == 1
