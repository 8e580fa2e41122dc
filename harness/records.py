"""What a run leaves behind, and reading it back.

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
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, ClassVar, Literal, NamedTuple, Self, TextIO

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.errors import HarnessError
from harness.redact import redact_text, redact_url
from harness.spec import panel_roles
from harness.providers.base import ConstraintPath, Usage
from harness.spend import Budget, RoleSpend


# Version of the records format. 1: records written before the suite contract (errors as strings,
# no solve/score split); 2: typed errors, scorer named on every record, usage stored once. The
# models below read both: validators migrate a version-1 record forward as it is loaded.
RECORDS_FORMAT = 2

RunStatus = Literal["running", "complete", "interrupted", "failed"]
SampleStatus = Literal["ok", "error"]
ErrorKind = Literal["timeout", "exception", "suite", "legacy"]
Stage = Literal["solve", "score"]


class Versioned(BaseModel):
    """A record that names its format version. Records read from disk go through `load`, which
    takes a record without `format` for version 1; validators migrate older versions forward."""

    format: int = Field(RECORDS_FORMAT, description="records format version (1: written before versioning)")

    @classmethod
    def load(cls, text: str) -> Self:
        data = json.loads(text)
        if isinstance(data, dict):
            data.setdefault("format", 1)
        return cls.model_validate(data)

    @classmethod
    def load_line(cls, line: bytes) -> Self:
        """One JSONL line; a line that starts with its format is validated straight from the JSON
        (pydantic's native parser, several times faster than `load` -- it matters at 10^6 lines)."""
        if line.startswith(b'{"format":'):
            return cls.model_validate_json(line)
        return cls.load(line.decode("utf-8"))


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class RoleConfig(BaseModel):
    """One role of a run: its model and, where given, its endpoint and its generation overrides
    (None: the suite's own setting for that call)."""

    model_config = ConfigDict(extra="forbid")

    model: str  # provider/name spec
    base_url: str | None = None  # where it is served (execution only: not hashed)
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0)

    GENERATION: ClassVar[tuple[str, ...]] = ("max_tokens", "temperature")

    def generation(self) -> dict[str, Any]:
        """The overrides this role's calls get (only those set)."""
        return {k: getattr(self, k) for k in self.GENERATION if getattr(self, k) is not None}


# Before roles were data (runs written up to 2026-12-06) a config named its models and three
# overrides in fields of their own; these are their names and, for the hash, where they live now.
LEGACY_OVERRIDES: dict[str, tuple[str, str]] = {"max_tokens": ("assistant", "max_tokens"),
                                                "temperature": ("assistant", "temperature"),
                                                "judge_max_tokens": ("judge", "max_tokens")}


class RunConfig(BaseModel):
    """Everything that decides a run's results (hashed) plus how to execute it (not hashed).

    `roles` is the run's roles as data: role -> its model, endpoint and generation overrides. The
    older form (`models`, `base_urls`, `max_tokens`, `temperature`, `judge_max_tokens`) is still
    accepted -- manifests written before, and callers that build a config that way -- and becomes
    `roles` as it is read; the config hash is computed from the same fields as before, so an old
    run resumes, and a config that could have been written the old way hashes as it did."""

    suite: str
    roles: dict[str, RoleConfig] = {}
    base_url: str | None = None  # every role's endpoint unless its RoleConfig names one
    corpus: str | None = None
    limit: int | None = None
    epochs: int = 1
    seed: int = 0
    suite_options: dict[str, Any] = {}  # the suite's Options, validated and dumped (defaults included)
    scorer: str | None = None  # None: the suite's default scorer
    source_run: str | None = None  # set by `harness score`: the run whose transcripts are re-scored
    # set by a claim check: "CLAIM_ID@CRITERION_HASH", the criterion this run was started under
    # (hashed: a run registered under another criterion is another run; harness/claims/)
    claim: str | None = None
    # execution only: these never change an answer, so they stay out of the hash
    max_connections: int = 8
    call_timeout_s: float = 600.0
    sample_timeout_s: float = 3600.0
    max_retries: int = 5
    cache: bool = True
    budgets: list[Budget] = []  # --budget: caps on what roles may spend (harness/spend.py)
    prices_file: str | None = None  # --prices: rates for models without a list price

    # base_url says where a model is served, not which model: a resumed run may move endpoints
    # (and the stored one has its password masked).
    EXECUTION_ONLY: ClassVar[set[str]] = {"base_url", "max_connections", "call_timeout_s", "sample_timeout_s",
                                          "max_retries", "cache", "budgets", "prices_file"}

    @model_validator(mode="before")
    @classmethod
    def _roles_from_the_older_form(cls, data: Any) -> Any:
        legacy = ("models", "base_urls", *LEGACY_OVERRIDES)
        if not isinstance(data, dict) or not any(k in data for k in legacy):
            return data
        data = dict(data)
        roles: dict[str, dict[str, Any]] = {
            r: (rc.model_dump(exclude_defaults=True) if isinstance(rc, RoleConfig) else dict(rc))
            for r, rc in (data.pop("roles", None) or {}).items()}
        for role, spec in (data.pop("models", None) or {}).items():
            roles.setdefault(role, {})["model"] = spec
        for role, url in (data.pop("base_urls", None) or {}).items():
            if role not in roles:
                raise ValueError(f"base_urls names role {role!r}, which has no model (roles: {', '.join(roles)})")
            roles[role]["base_url"] = url
        for old, (role, key) in LEGACY_OVERRIDES.items():
            value = data.pop(old, None)
            if value is None:
                continue
            if role not in roles:
                raise ValueError(f"{old} = {value} is an override for the {role} role, and the run has no {role} model")
            roles[role][key] = value
        data["roles"] = roles
        return data

    @property
    def models(self) -> dict[str, str]:
        """role -> model spec."""
        return {r: rc.model for r, rc in self.roles.items()}

    @property
    def base_urls(self) -> dict[str, str]:
        """role -> endpoint, for the roles that name their own."""
        return {r: rc.base_url for r, rc in self.roles.items() if rc.base_url}

    def endpoint(self, role: str) -> str | None:
        """Where `role`'s model is served (None: the provider's default; the embedded model has none)."""
        rc = self.roles.get(role)
        if rc is None or rc.model.startswith("local/"):
            return None
        return rc.base_url or self.base_url

    def overrides(self) -> dict[str, dict[str, Any]]:
        """role -> the generation overrides its calls get (roles with none left out)."""
        return {r: g for r, rc in self.roles.items() if (g := rc.generation())}

    def with_roles(self, roles: dict[str, RoleConfig]) -> RunConfig:
        """A copy with other roles, validated (`model_copy(update=...)` would skip validation)."""
        return self.model_validate(self.model_dump() | {"roles": {r: rc.model_dump() for r, rc in roles.items()}})

    def result_fields(self) -> dict[str, Any]:
        """What the config hash covers. The fields of before roles were data, computed from `roles`,
        so that a config expressible the old way hashes exactly as it did; an override the old form
        could not hold (any but the assistant's max_tokens and temperature and the judge's
        max_tokens) enters as `role_settings`, only when set. Fields added in format 2 enter only
        when set."""
        out: dict[str, Any] = {"suite": self.suite, "models": self.models, "corpus": self.corpus, "limit": self.limit,
                               "epochs": self.epochs, "seed": self.seed, "suite_options": self.suite_options}
        covered = set()
        for old, (role, key) in LEGACY_OVERRIDES.items():
            rc = self.roles.get(role)
            out[old] = getattr(rc, key) if rc else None
            covered.add((role, key))
        extra = {r: {k: v for k, v in rc.generation().items() if (r, k) not in covered} for r, rc in self.roles.items()}
        if any(extra.values()):
            out["role_settings"] = {r: v for r, v in extra.items() if v}
        out |= {k: getattr(self, k) for k in ("scorer", "source_run", "claim") if getattr(self, k) is not None}
        return out


class Metric(BaseModel):
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0  # independent units (e.g. dialogues) behind the figure


class MetricSpec(BaseModel):
    """What a metric is, declared by its suite (`Suite.metric_specs`) and recorded in each run's
    summary, so a leaderboard ranks and labels it without knowing the suite (or having it
    installed): which way is better, its unit, what it means, and the breakdowns (keys of
    `Suite.breakdowns`) that split it. An undeclared metric is "higher is better", unitless."""

    model_config = ConfigDict(frozen=True)

    direction: Literal["higher", "lower"] = "higher"
    unit: str = ""  # "" (a number), "fraction", "s", "tokens", "m", ...
    description: str = ""
    breakdowns: tuple[str, ...] = ()

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower"


class RunManifest(Versioned):
    """Written to disk with secrets masked (see `harness.redact`); the live config keeps them."""

    run_id: str
    suite: str
    suite_version: str
    config: RunConfig
    config_hash: str
    corpus: dict[str, Any] = Field(default_factory=dict)  # path, sha256, samples
    git_revision: str | None = None
    package_versions: dict[str, str] = Field(default_factory=dict)
    started: str
    ended: str | None = None
    status: RunStatus = "running"
    command: list[str] = Field(default_factory=list)
    scorer: str | None = Field(None, description="the scorer whose scores the samples carry")
    source_run: str | None = Field(None, description="`harness score`: the run whose transcripts were re-scored")
    spend: dict[str, Usage] = Field(default_factory=dict,
                                    description="role -> what its calls paid so far, over every session (harness/spend.py)")
    stop_reason: str | None = Field(None, description="why the run stopped before its end (a budget), if it did")


class CallRecord(BaseModel):
    role: str
    model: str
    request_hash: str
    cached: bool
    attempts: int
    latency_s: float
    finish_reason: str
    usage: Usage
    constrained_by: ConstraintPath = "none"  # how the reply's form was enforced (providers/base.py)
    tool_calls: int = 0  # native tool calls in the reply


class ErrorRecord(BaseModel):
    """One error on a sample. `kind`: `timeout` (the stage ran out of time), `exception` (the
    solver or scorer raised; `traceback` kept), `suite` (the suite recorded a failure in its own
    words, e.g. one trigger's failed model call), `legacy` (a version-1 record's error string)."""

    kind: ErrorKind
    message: str
    stage: Stage = "solve"
    traceback: str | None = None

    def __str__(self) -> str:
        return self.message


class SampleRecord(Versioned):
    """One sample of one epoch. `output` is the solver's transcript; `scores` what the run's
    scorer made of it (the solver never writes scores, so `harness score` can redo them)."""

    sample_id: str
    epoch: int
    seed: int = Field(description="the seed every model call of this sample received")
    status: SampleStatus
    output: dict[str, Any] = Field(default_factory=dict, description="the transcript (the family's typed payload, dumped)")
    scores: dict[str, Any] = Field(default_factory=dict, description="the scorer's values (the family's typed payload, dumped)")
    scorer: str | None = Field(None, description="which scorer wrote `scores`")
    usage: dict[str, Usage] = Field(default_factory=dict, description="tokens per role: the one place usage is stored")
    calls: list[CallRecord] = Field(default_factory=list)
    errors: list[ErrorRecord] = Field(default_factory=list)
    started: str
    duration_s: float

    @model_validator(mode="before")
    @classmethod
    def _errors_as_records(cls, data: Any) -> Any:
        """Version 1 stored errors as strings."""
        if isinstance(data, dict) and any(isinstance(e, str) for e in data.get("errors", ())):
            data = dict(data, errors=[{"kind": "legacy", "message": e} if isinstance(e, str) else e
                                      for e in data["errors"]])
        return data

    @property
    def key(self) -> tuple[str, int]:
        return (self.sample_id, self.epoch)


class RunSummary(Versioned):
    run_id: str
    suite: str
    suite_version: str
    headline_metric: str
    metrics: dict[str, Metric]
    # The suite's declaration of each metric recorded (direction, unit); empty in runs written
    # before metrics were declared (readers then ask the installed suite).
    metric_specs: dict[str, MetricSpec] = Field(default_factory=dict)
    breakdowns: dict[str, dict[str, Metric]] = Field(default_factory=dict)  # group kind -> group -> headline
    epochs: dict[str, dict[str, Any]] = Field(default_factory=dict)  # metric -> per-epoch values, mean, std
    counts: dict[str, int] = Field(default_factory=dict)
    usage: dict[str, Usage] = Field(default_factory=dict)
    calls: dict[str, dict[str, Any]] = Field(default_factory=dict)
    official: dict[str, Any] = Field(default_factory=dict)  # the suite's own release format, if any
    scorer: str | None = None
    source_run: str | None = None
    spend: dict[str, RoleSpend] = Field(default_factory=dict)  # role -> paid tokens, calls and dollars
    stop_reason: str | None = None


def write_json_atomic(path: Path, data: BaseModel | dict[str, Any]) -> None:
    text = data.model_dump_json(indent=2) if isinstance(data, BaseModel) else json.dumps(data, indent=2)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


# SampleRecord.model_dump_json writes these fields first (after `format`) and without spaces, so a
# line's key and status can be read from its first bytes without parsing the record (the resume
# scan, the viewer).
# (A JSON line holds no raw newline, so with re.M `^` is exactly a line's start.)
_HEAD = re.compile(rb'^\{(?:"format":\d+,)?"sample_id":"((?:[^"\\\n]|\\.)*)","epoch":(-?\d+),"seed":-?\d+,'
                   rb'"status":"([a-z_]+)"', re.M)
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
        safe = manifest.model_copy(update={
            "config": config.model_copy(update={"base_url": redact_url(config.base_url), "roles": roles}),
            "command": [redact_text(a) for a in manifest.command],
        })
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
                    manifest.run_id, manifest.suite, manifest.suite_version, json.dumps(models),
                    models.get("assistant"), judge_label(models), manifest.config_hash, manifest.status,
                    manifest.started, manifest.ended, samples, errors,
                    summary.headline_metric if summary else None, headline.value if headline else None,
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
