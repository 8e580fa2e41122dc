"""The runner at scale (issue 20 item 5): samples whose calls never suspend still let the event
loop run between them (else the cancelled timers of every sample's `asyncio.timeout` pile up --
0.7 GiB at 10^6 samples -- and nothing else runs until the end), and `harness score` reads its
source run's records one at a time instead of all of them at planning. Real runs of the in-process
instant model (harness/bench.py) on real run folders."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness.bench import InstantSuite
from harness.records import RunConfig, SampleRecord
from harness.run_folder import RunFolder
from harness.runner import SourceLine, WorkItem, build_models, execute, plan_run, run_items

N = 300


def _config() -> RunConfig:
    return RunConfig(suite=InstantSuite.name, models={"assistant": "instant/echo"}, max_connections=8,
                     cache=False, max_retries=0)


def test_the_loop_runs_other_tasks_between_samples_whose_calls_never_suspend():
    suite, config = InstantSuite(N), _config()
    items = [WorkItem(s, 0) for s in suite.load_samples(None)]
    delivered: list[SampleRecord] = []
    seen_by_other_task: list[int] = []

    async def main() -> None:
        async def watcher() -> None:  # what the limits' poll and Ctrl-C handling need: a turn
            while True:
                seen_by_other_task.append(len(delivered))
                await asyncio.sleep(0)

        other = asyncio.create_task(watcher())
        await asyncio.sleep(0)
        await run_items(suite, config, iter(items), build_models(config, None), delivered.append, 8)
        other.cancel()

    asyncio.run(main())
    assert sorted(r.key for r in delivered) == [(s.sample.id, 0) for s in items]
    mid_run = {n for n in seen_by_other_task if 0 < n < N}
    assert len(mid_run) > N // 16, f"the other task ran only at {sorted(set(seen_by_other_task))[:10]}..."


def _source_run(run_dir: Path) -> tuple[RunFolder, InstantSuite]:
    suite = InstantSuite(N)
    plan = plan_run(_config(), run_dir, suite=suite)
    asyncio.run(execute(plan, show_progress=False))
    return plan.folder, suite


def test_score_plans_from_line_offsets_and_reads_each_source_record_when_it_runs(tmp_path, monkeypatch):
    source, suite = _source_run(tmp_path)
    lines = source.samples_path.read_bytes().splitlines(keepends=True)
    first = {r.key: r for r in source.read_samples()}
    # A straggler's second copy of a finished sample (readers keep the first) and a torn last line.
    late = next(line for line in lines if b'"text":"' in line).replace(b'"text":"', b'"text":"LATE', 1)
    with open(source.samples_path, "ab") as fh:
        fh.write(late + lines[6][: len(lines[6]) // 2])

    parsed: list[bytes] = []
    real = SampleRecord.load_line.__func__  # type: ignore[attr-defined]

    def counting(cls, line):  # the real parser, counted
        parsed.append(line)
        return real(cls, line)

    monkeypatch.setattr(SampleRecord, "load_line", classmethod(counting))
    config = _config().model_copy(update={"scorer": "hit", "source_run": source.run_id})
    plan = plan_run(config, tmp_path, suite=suite)
    assert parsed == [], "planning a re-score parses no source record"
    assert len(plan.todo) == N and all(isinstance(item.source, SourceLine) for item in plan.todo)
    assert [(i.sample.id, i.epoch) for i in plan.todo] == sorted(first)
    loaded = plan.todo[5].with_source_loaded()  # what the Ray executor sends to a task
    assert loaded.source == first[loaded.sample.id, 0]

    summary = asyncio.run(execute(plan, show_progress=False))
    rescored = {r.key: r for r in plan.folder.read_samples()}
    assert summary.counts["samples"] == N and rescored.keys() == first.keys()
    assert all(r.output == first[k].output and r.seed == first[k].seed for k, r in rescored.items())
    assert not any("LATE" in str(r.output) for r in rescored.values()), "the first copy of a line is scored"
    assert all(r.scores == {"hit": r.output["text"][:1] in "01234567"} for r in rescored.values() if r.output)
