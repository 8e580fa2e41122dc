"""Executors without a cluster: the shared interface, the driver's exactly-once dispatch (a
chunk that fails, a chunk answered twice, a straggler's late copy), and the --executor flags."""

import json
import socket
import subprocess
import sys

import pytest

from harness.errors import HarnessError
from harness.executors import make_executor
from harness.executors.dispatch import AttemptJournal, ChunkResult, cut_chunks, dispatch_chunks
from harness.records import Metric, RunConfig, SampleRecord
from harness.runner import AsyncioExecutor, build_models, execute, plan_run, run_items
from harness.suite import FunctionScorer, Sample, Score, Suite, Transcript
from tests.conftest import REPO, harness_cli


class SeedSuite(Suite):
    """No model: the transcript is the sample's seed, so a record shows which seed it ran with."""

    name = "seed-echo"
    version = "1"
    headline_metric = "n"
    solver_roles = ()

    def load_samples(self, corpus):
        return [Sample(id=f"s{i:02d}", data={}) for i in range(10)]

    def corpus_identity(self, corpus):
        return {"sha256": "fixed"}

    async def solve(self, sample, ctx):
        return Transcript(output={"seed": ctx.seed})

    def scorers(self):
        return {"n": FunctionScorer("n", self._score, description="always 1")}

    async def _score(self, sample, transcript, ctx):
        return Score(values={"n": 1})

    def metrics(self, records: list[SampleRecord], seed: int = 0):
        return {"n": Metric(value=float(len(records)), n=len(records))}


class FlakyCluster:
    """An in-process stand-in for a cluster: chunk 0 dies on its first attempt (as when its node
    is killed), chunk 1 answers twice (a Ray retry whose first copy also arrived), and the last
    chunk also sends back chunk 1's records late (a straggler)."""

    name = "flaky"

    def __init__(self, size=3):
        self.size, self.stats, self.attempts = size, {}, []

    def prepare(self, plan):
        self.models = build_models(plan.config, None, plan.called_roles)

    async def run(self, plan, deliver):
        chunks = cut_chunks(plan.todo, self.size)

        async def submit(chunk, attempt, items):
            self.attempts.append((chunk, attempt))
            if chunk == 0 and attempt == 1:
                raise ConnectionError("node died")
            records = []
            await run_items(plan.suite, plan.config, items, self.models, records.append, 4)
            if chunk == 1:
                records += records
            if chunk == len(chunks) - 1:
                straggler = []
                await run_items(plan.suite, plan.config, chunks[1], self.models, straggler.append, 4)
                records += straggler
            return ChunkResult(records=records)

        self.journal = AttemptJournal(plan.folder.path / "attempts.jsonl")
        await dispatch_chunks(chunks, submit, deliver, self.journal, self.stats, retryable=(ConnectionError,))

    def call_stats(self):
        return self.stats

    async def aclose(self):
        self.journal.close()


def _run(tmp_path, executor, epochs=2):
    config = RunConfig(suite="seed-echo", models={}, epochs=epochs, seed=7, cache=False)
    plan = plan_run(config, tmp_path, suite=SeedSuite())
    import asyncio

    summary = asyncio.run(execute(plan, show_progress=False, executor=executor))
    lines = plan.folder.samples_path.read_text().splitlines()
    return summary, [SampleRecord.load(line) for line in lines], plan.folder


def test_duplicates_and_a_failed_chunk_still_give_every_sample_exactly_once(tmp_path):
    summary, records, folder = _run(tmp_path / "flaky", FlakyCluster())
    keys = [r.key for r in records]
    assert len(keys) == 20 == len(set(keys)) and summary.counts["samples"] == 20
    journal = [json.loads(line) for line in (folder.path / "attempts.jsonl").read_text().splitlines()]
    # Every chunk's dispatch line comes before its result; chunk 0 was dispatched twice.
    for chunk in {j["chunk"] for j in journal}:
        events = [(j["event"], j["attempt"]) for j in journal if j["chunk"] == chunk]
        assert events[0] == ("dispatch", 1) and events[-1][0] == "finished"
    assert [(j["event"], j["attempt"]) for j in journal if j["chunk"] == 0] == [
        ("dispatch", 1), ("failed", 1), ("dispatch", 2), ("finished", 2)]
    dup = {j["chunk"]: j["duplicates"] for j in journal if j["event"] == "finished"}
    assert dup[1] == 3 and dup[max(dup)] == 3 and sum(dup.values()) == 6
    # The same records as the default executor: seeds depend on (run seed, sample, epoch) only.
    _, local, _ = _run(tmp_path / "local", AsyncioExecutor())
    assert {r.key: r.output for r in records} == {r.key: r.output for r in local}


def test_a_chunk_that_keeps_failing_stops_the_run_resumable(tmp_path):
    class Dead(FlakyCluster):
        async def run(self, plan, deliver):
            async def submit(chunk, attempt, items):
                raise ConnectionError("node gone")

            self.journal = AttemptJournal(plan.folder.path / "attempts.jsonl")
            await dispatch_chunks(cut_chunks(plan.todo, 5), submit, deliver, self.journal, self.stats,
                                  retryable=(ConnectionError,), max_attempts=2)

    with pytest.raises(HarnessError, match="failed 2 times.*resume the run"):
        _run(tmp_path, Dead())
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((folder / "manifest.json").read_text())["status"] == "interrupted"


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_executor_flags_are_one_clear_error(tmp_path):
    with pytest.raises(HarnessError, match="unknown executor"):
        make_executor("dask")
    with pytest.raises(HarnessError, match="goes with --executor ray"):
        make_executor("asyncio", ray_address="127.0.0.1:6379")
    port = _closed_port()
    with pytest.raises(HarnessError, match=f"127.0.0.1:{port}: no Ray cluster answers.*ray start --head --port {port}"):
        make_executor("ray", ray_address=f"127.0.0.1:{port}")
    with pytest.raises(HarnessError, match="write HOST:PORT"):
        make_executor("ray", ray_address="nowhere")


def test_unreachable_ray_address_through_the_cli_writes_nothing(tmp_path):
    port = _closed_port()
    proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j", "--limit", "1",
                       "--base-url", "http://127.0.0.1:9/v1", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                       "--run-dir", str(tmp_path / "runs"), "--no-progress", timeout=120)
    assert proc.returncode == 2
    # Checked before the run is planned: the one error names the address and how to start a cluster.
    assert proc.stderr.count("error:") == 1 and f"--ray-address 127.0.0.1:{port}: no Ray cluster" in proc.stderr
    assert "ray start --head" in proc.stderr and not (tmp_path / "runs").exists()


def test_the_core_imports_no_ray_unless_asked():
    code = ("import sys, harness.runner, harness.executors, harness.cli.run_cmds, harness.executors.dispatch; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_bench_runner_executor_flags_are_checked_before_anything_starts():
    port = _closed_port()
    proc = harness_cli("bench", "runner", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", timeout=60)
    assert proc.returncode == 2 and f"--ray-address 127.0.0.1:{port}: no Ray cluster" in proc.stderr
    proc = harness_cli("bench", "runner", "--executor", "dask", timeout=60)
    assert proc.returncode == 2 and "use --executor asyncio or ray" in proc.stderr
