"""A run's folder and the run dir's index: where the records of `harness.records` are written,
and reading them back.

    <run_dir>/<run_id>/manifest.json   config, models per role, suite + version, versions, status
    <run_dir>/<run_id>/samples.jsonl   one line per finished sample, appended and flushed
    <run_dir>/<run_id>/summary.json    metrics with confidence intervals
    <run_dir>/index.sqlite             one row per run and per metric, for leaderboards
    <run_dir>/cache.sqlite             model-call cache shared by the runs of this run dir
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple, TextIO

from pydantic import BaseModel, JsonValue

from harness.errors import HarnessError
from harness.records import Metric, RunManifest, RunSummary, SampleRecord
from harness.redact import redact_text, redact_url
from harness.spec import panel_roles


def write_json_atomic(path: Path, data: BaseModel | dict[str, JsonValue]) -> None:
    text = data.model_dump_json(indent=2) if isinstance(data, BaseModel) else json.dumps(data, indent=2)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


# SampleRecord.model_dump_json writes these fields first (after `format`) and without spaces, so a
# line's key and status can be read from its first bytes without parsing the record (the resume
# scan, the viewer).
# (A JSON line holds no raw newline, so with re.M `^` is exactly a line's start.)
_HEAD = re.compile(
    rb'^\{(?:"format":\d+,)?"sample_id":"((?:[^"\\\n]|\\.)*)","epoch":(-?\d+),"seed":-?\d+,'
    rb'"status":"([a-z_]+)"',
    re.M,
)
_LINE = re.compile(_HEAD.pattern + rb"[^\n]*\n", re.M)  # a head, then the rest of its line: no search inside it
_TAIL_BLOCK = 1 << 16
_SCAN_BLOCK = 1 << 23


class Head(NamedTuple):
    """Where a finished line is ([offset, end) in bytes) and its key and status."""

    offset: int
    end: int
    sample_id: str
    epoch: int
    status: str


def _head_of(match: re.Match[bytes]) -> tuple[str, int, str]:
    raw = match[1]
    sample_id = json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode("utf-8")
    return sample_id, int(match[2]), match[3].decode()


def line_head(line: bytes) -> tuple[str, int, str]:
    """(sample_id, epoch, status) of one samples.jsonl line, from its first bytes when the
    harness wrote it; any other line (another writer's field order) is parsed whole."""
    match = _HEAD.match(line)
    if match:
        return _head_of(match)
    data = json.loads(line)
    return str(data.get("sample_id")), int(data.get("epoch", 0)), str(data.get("status"))


def _whole_line_blocks(path: Path, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """(file offset, block) of whole lines from byte `start` on, 8 MiB at a time; a torn last
    line is left out."""
    with open(path, "rb") as fh:
        fh.seek(start)
        base, rest = start, b""
        while block := fh.read(_SCAN_BLOCK):
            data = rest + block
            end = data.rfind(b"\n") + 1
            yield base, data[:end]
            base, rest = base + end, data[end:]


def scan_heads(path: Path, start: int = 0) -> Iterator[Head]:
    """The head of each finished line from byte `start` on, streamed: one regex pass per block
    (in C); no record is parsed (a line of another writer is, alone). Blank lines and a torn
    last line are skipped."""
    for base, data in _whole_line_blocks(path, start):
        matches = list(_LINE.finditer(data))
        if len(matches) == data.count(b"\n"):  # every line is the harness's own
            for match in matches:
                yield Head(base + match.start(), base + match.end(), *_head_of(match))
            continue
        pos = 0
        for line in data.splitlines(keepends=True):
            if not line.isspace():
                yield Head(base + pos, base + pos + len(line), *line_head(line))
            pos += len(line)


def scan_keys(path: Path) -> Iterator[tuple[str, int, str]]:
    """(sample_id, epoch, status) of each finished line -- `scan_heads` without offsets, for the
    resume scan: the regex hands back the three fields of a whole block at once (~2 us a line)."""
    for _, data in _whole_line_blocks(path):
        fields = _LINE.findall(data)
        if len(fields) != data.count(b"\n"):  # blank lines or another writer's: line by line
            yield from (line_head(line) for line in data.splitlines() if line and not line.isspace())
            continue
        for raw, epoch, status in fields:
            sample_id = json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode("utf-8")
            yield sample_id, int(epoch), status.decode()


def torn_tail_start(fh: IO[bytes]) -> int | None:
    """Where a file's torn last line (no final newline) starts, or None when the file ends with
    a newline or is empty. Reads backwards from the end, one block at a time."""
    end = fh.seek(0, os.SEEK_END)
    if end == 0:
        return None
    fh.seek(end - 1)
    if fh.read(1) == b"\n":
        return None
    pos = end
    while pos > 0:
        start = max(0, pos - _TAIL_BLOCK)
        fh.seek(start)
        at = fh.read(pos - start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        pos = start
    return 0


@dataclass
class FinishedScan:
    """The finished samples of a run as `--resume` sees them: keys only, no records."""

    keys: set[tuple[str, int]] = field(default_factory=set)
    errors: int = 0


class RunFolder:
    """One run's folder. Appends samples; reads back what survived a crash."""

    def __init__(self, run_dir: Path, run_id: str):
        self.run_dir = run_dir
        self.run_id = run_id
        self.path = run_dir / run_id
        self.manifest_path = self.path / "manifest.json"
        self.samples_path = self.path / "samples.jsonl"
        self.summary_path = self.path / "summary.json"
        self._fh: TextIO | None = None

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def read_manifest(self) -> RunManifest:
        try:
            return RunManifest.load(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise HarnessError(
                f"run {self.run_id!r} not found in {self.run_dir}: see `harness runs --run-dir {self.run_dir}`"
            ) from exc

    def write_manifest(self, manifest: RunManifest) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        config = manifest.config
        roles = {r: rc.model_copy(update={"base_url": redact_url(rc.base_url)}) for r, rc in config.roles.items()}
        safe = manifest.model_copy(
            update={
                "config": config.model_copy(update={"base_url": redact_url(config.base_url), "roles": roles}),
                "command": [redact_text(a) for a in manifest.command],
            }
        )
        write_json_atomic(self.manifest_path, safe)

    def write_summary(self, summary: RunSummary) -> None:
        write_json_atomic(self.summary_path, summary)

    def read_summary(self) -> RunSummary | None:
        if not self.summary_path.exists():
            return None
        return RunSummary.load(self.summary_path.read_text(encoding="utf-8"))

    def repair(self) -> None:
        """Drop a torn last line (a crash mid-write). Reads only the file's tail, never the whole
        file: a million-line run repairs as fast as a ten-line one."""
        if not self.samples_path.exists():
            return
        with open(self.samples_path, "r+b") as fh:
            keep = torn_tail_start(fh)
            if keep is not None:
                fh.truncate(keep)

    def iter_lines(self) -> Iterator[bytes]:
        """Each finished (newline-ended, non-blank) line, streamed; a torn last line is skipped."""
        if not self.samples_path.exists():
            return
        with open(self.samples_path, "rb") as fh:
            for line in fh:
                if line.endswith(b"\n") and not line.isspace():
                    yield line

    def scan_finished(self) -> FinishedScan:
        """What `--resume` needs -- the finished (sample, epoch) keys and how many of them are
        errors -- from each line's first bytes, in one streaming pass: no record is parsed or kept."""
        scan = FinishedScan()
        if not self.samples_path.exists():
            return scan
        keys = scan.keys
        for sample_id, epoch, status in scan_keys(self.samples_path):
            key = (sample_id, epoch)
            if key not in keys:  # readers keep a key's first line
                keys.add(key)
                scan.errors += status == "error"
        return scan

    def iter_samples(self) -> Iterator[SampleRecord]:
        """Each finished sample once (its first line), streamed: one record in memory at a time."""
        seen: set[tuple[str, int]] = set()
        for line in self.iter_lines():
            rec = SampleRecord.load_line(line)
            if rec.key not in seen:
                seen.add(rec.key)
                yield rec

    def repair_and_read_samples(self) -> list[SampleRecord]:
        """Drop a torn last line (a crash mid-write), then return each finished sample once."""
        self.repair()
        return self.read_samples()

    def read_samples(self) -> list[SampleRecord]:
        """Every finished sample in memory (small runs, tests); big runs use `iter_samples`."""
        return list(self.iter_samples())

    def append(self, record: SampleRecord) -> None:
        fh = self._fh
        if fh is None:
            self.path.mkdir(parents=True, exist_ok=True)
            fh = self._fh = open(self.samples_path, "a", encoding="utf-8")
        # One write of a whole line, then flush: a crash leaves at most one torn last line.
        fh.write(record.model_dump_json() + "\n")
        fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def judge_label(models: dict[str, str]) -> str | None:
    """`a` for one judge, `a+b+c` for a panel (roles judge, judge_2, ...)."""
    return "+".join(models[r] for r in panel_roles(models)) or None


class RunIndex:
    """`index.sqlite`: one row per run and per metric, what leaderboards and `harness runs` read."""

    def __init__(self, run_dir: Path):
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / "index.sqlite"
        self.db = sqlite3.connect(self.path, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(
            """
            CREATE TABLE IF NOT EXISTS runs (
                run_id TEXT PRIMARY KEY, suite TEXT, suite_version TEXT, models TEXT,
                model TEXT, judge TEXT, config_hash TEXT, status TEXT, started TEXT, ended TEXT,
                samples INTEGER, errors INTEGER, headline_metric TEXT, headline_value REAL);
            CREATE TABLE IF NOT EXISTS metrics (
                run_id TEXT, name TEXT, value REAL, ci_low REAL, ci_high REAL, n INTEGER,
                PRIMARY KEY (run_id, name));
            """
        )

    def record(self, manifest: RunManifest, summary: RunSummary | None, samples: int, errors: int) -> None:
        models = manifest.config.models
        headline = summary.metrics.get(summary.headline_metric) if summary else None
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    manifest.run_id,
                    manifest.suite,
                    manifest.suite_version,
                    json.dumps(models),
                    models.get("assistant"),
                    judge_label(models),
                    manifest.config_hash,
                    manifest.status,
                    manifest.started,
                    manifest.ended,
                    samples,
                    errors,
                    summary.headline_metric if summary else None,
                    headline.value if headline else None,
                ),
            )
            if summary is not None:
                self.db.execute("DELETE FROM metrics WHERE run_id = ?", (manifest.run_id,))
                self.db.executemany(
                    "INSERT INTO metrics VALUES (?,?,?,?,?,?)",
                    [(manifest.run_id, k, m.value, m.ci_low, m.ci_high, m.n) for k, m in summary.metrics.items()],
                )

    def runs(self, suite: str | None = None) -> list[dict[str, Any]]:
        self.db.row_factory = sqlite3.Row
        q = "SELECT * FROM runs" + (" WHERE suite = ?" if suite else "") + " ORDER BY started"
        rows = [dict(r) for r in self.db.execute(q, (suite,) if suite else ())]
        self.db.row_factory = None
        return rows

    def metrics(self, run_id: str) -> dict[str, Metric]:
        rows = self.db.execute("SELECT name, value, ci_low, ci_high, n FROM metrics WHERE run_id = ?", (run_id,))
        return {r[0]: Metric(value=r[1], ci_low=r[2], ci_high=r[3], n=r[4]) for r in rows}

    def close(self) -> None:
        self.db.close()
