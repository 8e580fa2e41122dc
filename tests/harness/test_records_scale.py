"""Records that stay cheap at scale (issue 20 item 5), on a 20k-line run written with the harness's
own records writer: the resume scan finds exactly the finished set (torn last line, duplicate
lines), parses no record and reads only the file's tail to repair it; the streamed summary
equals the in-memory one; the viewer's page k shows the right samples; `bench runner --model
instant` runs. Timing figures go in docs/scale.md, never in asserts."""

from __future__ import annotations

import inspect
import json
import random
import re
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness import run_folder as run_folder_module
from harness.bench import InstantSuite, bench_instant, instant_reply
from harness.cli.bench import bench_app
from harness.providers.base import Usage
from harness.records import RunConfig, SampleRecord
from harness.run_folder import RunFolder, RunIndex, torn_tail_start
from harness.runner import plan_run, summarize
from harness.stats import ratio_metric
from harness.suite import Suite
from harness.summary import StreamingMetrics
from leaderboards.viewer import SampleIndex, make_server

N, EPOCHS = 10_000, 2  # 20k lines
MISSING = {("s0000042", 1), ("s0009999", 0)}  # never written: what a resume must still run
DUPLICATED = [("s0000007", 0), ("s0005000", 1)]  # written twice (a straggler's copy): the first wins
TORN = ("s0000100", 1)  # its line is cut mid-write: not finished


def _config() -> RunConfig:
    return RunConfig(suite=InstantSuite.name, models={"assistant": "openai/instant"},
                     base_url="http://127.0.0.1:9/v1", epochs=EPOCHS, cache=False)


class Big:
    def __init__(self, run_dir: Path, run_id: str, expected: list[tuple[str, int, str, bool]]):
        self.run_dir, self.run_id, self.expected = run_dir, run_id, expected  # (id, epoch, status, hit)
        self.keys = {(sid, e) for sid, e, _, _ in expected}
        self.errors = sum(st == "error" for _, _, st, _ in expected)


def _line(sample_id: str, epoch: int, *, copy: int = 0) -> str:
    """A record's line as the harness writes it; made from one dumped record per kind (20k
    pydantic dumps would cost seconds; the lines are the same bytes)."""
    template = _template(*_kind(sample_id, epoch), copy)
    return template.replace('"sample_id":"ID","epoch":0', f'"sample_id":"{sample_id}","epoch":{epoch}', 1)


def _kind(sample_id: str, epoch: int) -> tuple[str, bool]:
    reply = instant_reply(f"sample {sample_id} {epoch}")
    return ("error" if reply.startswith("0") else "ok"), reply[:1] in "01234567"  # 1 in 16 errors, half hits


_TEMPLATES: dict[tuple[str, bool, int], str] = {}


def _template(status: str, hit: bool, copy: int) -> str:
    if (status, hit, copy) not in _TEMPLATES:
        rec = SampleRecord(sample_id="ID", epoch=0, seed=copy, status=status,  # type: ignore[arg-type]
                           output={"text": "x"}, scores={"hit": hit}, scorer="hit",
                           usage={"assistant": Usage(prompt_tokens=2, completion_tokens=1, calls=1)},
                           errors=[{"kind": "suite", "message": "by design"}] if status == "error" else [],  # type: ignore[list-item]
                           started="2026-12-02T00:00:00+00:00", duration_s=0.001)
        _TEMPLATES[(status, hit, copy)] = rec.model_dump_json() + "\n"
    return _TEMPLATES[(status, hit, copy)]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Big:
    """A 20k-line run in file order s0/e0, s0/e1, s1/e0, ... with two keys missing, two written
    twice (the copy later, with another seed) and a torn last line."""
    run_dir = tmp_path_factory.mktemp("scale")
    plan = plan_run(_config(), run_dir, suite=InstantSuite(N))
    folder = plan.folder
    folder.write_manifest(plan.manifest)
    expected = []
    with open(folder.samples_path, "w", encoding="utf-8") as fh:
        for i in range(N):
            for e in range(EPOCHS):
                key = (f"s{i:07d}", e)
                if key in MISSING or key == TORN:
                    continue
                expected.append((*key, *_kind(*key)))
                fh.write(_line(*key))
                if key in DUPLICATED:
                    fh.write(_line(*key, copy=1))
        fh.write(_line(*TORN)[:57])  # a crash mid-write
    big = Big(run_dir, folder.run_id, expected)
    index = RunIndex(run_dir)
    index.record(plan.manifest, None, len(expected), big.errors)
    index.close()
    return big


def test_resume_scan_finds_exactly_the_finished_set_and_repairs_the_torn_line(big: Big, monkeypatch):
    # No record may be parsed: resuming reads each line's first bytes only.
    def refuse(*_a, **_k):
        raise AssertionError("the resume scan parsed a whole record")

    monkeypatch.setattr(SampleRecord, "load_line", classmethod(refuse))
    monkeypatch.setattr(SampleRecord, "load", classmethod(refuse))
    size_before = (big.run_dir / big.run_id / "samples.jsonl").stat().st_size
    plan = plan_run(_config(), big.run_dir, resume=big.run_id, suite=InstantSuite(N))
    assert plan.done == big.keys and len(plan.done) == N * EPOCHS - 3
    assert plan.done_errors == big.errors > 0
    assert {(w.sample.id, w.epoch) for w in plan.todo} == MISSING | {TORN}
    data = plan.folder.samples_path.read_bytes()
    assert data.endswith(b"\n") and len(data) == size_before - 57  # exactly the torn line dropped
    assert plan.folder.scan_finished().keys == plan.done  # a second scan: nothing left to repair


def test_the_scan_and_the_stream_are_lazy_and_the_repair_reads_only_the_tail(big: Big, monkeypatch):
    folder = RunFolder(big.run_dir, big.run_id)
    for fn in (RunFolder.iter_lines, RunFolder.iter_samples):
        assert inspect.isgeneratorfunction(fn)
    # The scan never reads the whole file into memory nor parses lines as JSON documents.
    scan_src = "".join(inspect.getsource(f) for f in (RunFolder.scan_finished, RunFolder.iter_lines,
                                                      run_folder_module.scan_keys,
                                                      run_folder_module._whole_line_blocks))
    assert not re.search(r"json\.load\(|read_bytes|read_text|readlines|\.read\(\)", scan_src)
    # Streaming: taking three records parses three lines, not 20k.
    parsed = []
    real = SampleRecord.load_line.__func__

    def counting(cls, line):
        parsed.append(line)
        return real(cls, line)

    monkeypatch.setattr(SampleRecord, "load_line", classmethod(counting))
    stream = folder.iter_samples()
    first = [next(stream) for _ in range(3)]
    assert [r.key for r in first] == [k[:2] for k in big.expected[:3]] and len(parsed) == 3

    class Counted:
        def __init__(self, fh):
            self.fh, self.read_bytes = fh, 0

        def seek(self, *a):
            return self.fh.seek(*a)

        def read(self, n=-1):
            data = self.fh.read(n)
            self.read_bytes += len(data)
            return data

    torn = big.run_dir / "torn.jsonl"
    torn.write_bytes(b'{"a":1}\n' * 200_000 + b'{"b":')  # 1.6 MB, a torn tail
    with open(torn, "rb") as fh:
        counted = Counted(fh)
        assert torn_tail_start(counted) == 1_600_000  # type: ignore[arg-type]
    assert counted.read_bytes <= 2 ** 16 + 1


class ListSuite(Suite):
    """A suite without an accumulator whose CI depends on the order of its units (a bootstrap by
    index draws): the summary must hand it its records sorted, as before streaming."""

    name, version, headline_metric = "list-suite", "1", "hit_rate"

    def load_samples(self, corpus):
        return []

    async def solve(self, sample, ctx):
        raise NotImplementedError

    def scorers(self):
        return {}

    def metrics(self, records, seed=0):
        rows = [[bool(r.scores.get("hit")), 1] for r in records]
        return {"hit_rate": ratio_metric(rows, lambda t: t[0], lambda t: t[1], seed=seed, resamples=200)}

    def counts(self, records):
        return {"first": int(records[0].sample_id[1:])} if records else {}


def test_streamed_summary_equals_the_in_memory_one(big: Big):
    folder = RunFolder(big.run_dir, big.run_id)
    folder.repair()
    manifest = folder.read_manifest()
    suite = InstantSuite(N)
    assert isinstance(suite, StreamingMetrics)
    in_memory: list[SampleRecord] = []

    def kept(stream):  # the same records, also kept for the in-memory summary (one parse)
        for rec in stream:
            in_memory.append(rec)
            yield rec

    streamed = summarize(suite, manifest, kept(folder.iter_samples()), {})
    assert [r.seed for r in in_memory if r.key in DUPLICATED] == [0, 0]  # a key's first line wins
    random.Random(1).shuffle(in_memory)
    assert summarize(suite, manifest, in_memory, {}) == streamed
    hits = sum(hit for *_, hit in big.expected)
    assert streamed.counts == {"samples": len(big.expected), "sample_errors": big.errors, "hits": hits}
    assert streamed.metrics["hit_rate"].value == hits / len(big.expected)
    assert streamed.usage["assistant"].calls == len(big.expected)  # duplicates counted once
    assert set(streamed.epochs["hit_rate"]) == {"values", "mean", "std"}
    # The record-list path (suites without an accumulator): sorted units, whatever the read order.
    small = ListSuite()
    assert not isinstance(small, StreamingMetrics)
    head = [r for r in in_memory if int(r.sample_id[1:]) < 1000]
    reference = small.metrics(sorted(head, key=lambda r: r.key), seed=manifest.config.seed)
    got = summarize(small, manifest, list(reversed(head)), {})
    assert got.metrics == reference and got.counts["first"] == 0
    assert got.epochs["hit_rate"]["values"] == [
        small.metrics([r for r in head if r.epoch == e], seed=0)["hit_rate"].value for e in (0, 1)]


def test_viewer_page_k_shows_the_right_samples(big: Big):
    folder = RunFolder(big.run_dir, big.run_id)
    folder.repair()
    index = SampleIndex(folder.samples_path)
    index.refresh()
    assert len(index) == len(big.expected) and index.offsets.typecode == "q"
    assert isinstance(index.select(), range)  # no filter: no list of every line per page view
    server = make_server([big.run_dir], 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/runs/{big.run_id}"
    try:
        def page_ids(query: str) -> list[str]:
            with urllib.request.urlopen(f"{base}?{query}", timeout=30) as resp:
                html = resp.read().decode()
            return re.findall(r'<tr class="sample"><td>\d+</td><td><a href="[^"]+">([^<]+)</a></td><td>(\d)</td>', html)

        k, per = 7, 40
        want = [(sid, str(e)) for sid, e, _, _ in big.expected[(k - 1) * per: k * per]]
        assert page_ids(f"page={k}&per_page={per}") == want
        errors = [(sid, str(e)) for sid, e, st, _ in big.expected if st == "error"]
        assert page_ids(f"page=3&per_page={per}&status=error") == errors[2 * per: 3 * per]
        with urllib.request.urlopen(f"{base}/samples/{(k - 1) * per}.json", timeout=30) as resp:
            assert json.loads(resp.read())["sample_id"] == want[0][0]
    finally:
        server.shutdown()
        server.server_close()


def test_bench_runner_model_instant_runs_and_bad_input_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the in-process provider registration is undone
    from rich.console import Console

    console = Console(width=200)
    result = bench_instant(300, 16, console, tmp_path)
    assert result["samples_per_s"] > 0 and result["peak_rss_mib"] > 0
    assert list(tmp_path.iterdir()) == []  # the temporary run is removed
    out = CliRunner().invoke(bench_app, ["runner", "--model", "nope"])
    assert out.exit_code != 0 and "--model 'nope'" in out.output
    out = CliRunner().invoke(bench_app, ["runner", "--model", "instant", "--executor", "ray"])
    assert out.exit_code != 0 and "--model instant" in out.output


def test_run_folder_keeps_a_line_head_regex_matching_what_records_write():
    rec = SampleRecord(sample_id='a"b\u00e9', epoch=3, seed=1, status="error", started="t", duration_s=0.0)
    line = (rec.model_dump_json() + "\n").encode()
    assert run_folder_module._HEAD.match(line)
    assert run_folder_module.line_head(line) == ('a"b\u00e9', 3, "error")
    assert SampleRecord.load_line(line) == SampleRecord.load(line.decode()) == rec


def test_lines_of_another_writer_and_blank_lines_are_read_one_by_one(tmp_path):
    folder = RunFolder(tmp_path, "r")
    folder.path.mkdir()
    ours = SampleRecord(sample_id="b", epoch=0, seed=1, status="ok", started="t", duration_s=0.0)
    legacy = json.dumps({"status": "error", "epoch": 1, "sample_id": "a", "seed": 2, "errors": ["boom"],
                         "started": "t", "duration_s": 0.0})  # format 1: no `format`, other field order
    folder.samples_path.write_text(f"{legacy}\n\n{ours.model_dump_json()}\n{ours.model_dump_json()[:20]}")
    assert list(run_folder_module.scan_keys(folder.samples_path)) == [("a", 1, "error"), ("b", 0, "ok")]
    heads = list(run_folder_module.scan_heads(folder.samples_path))
    assert [(h.sample_id, h.offset) for h in heads] == [("a", 0), ("b", len(legacy) + 2)]
    assert folder.scan_finished().errors == 1
    assert [r.errors[0].kind if r.errors else None for r in folder.iter_samples()] == ["legacy", None]
