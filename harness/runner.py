"""The runner: a pure core that runs one sample, and an IO shell around it (records, resume,
progress, Ctrl-C).

Data flows one way: config -> plan (samples still to do) -> workers -> samples.jsonl -> summary
and index. A sample's failure is recorded on that sample; only bad input stops a run, and that
is caught before anything is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Sized
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import JsonValue

from harness.cache import CallCache
from harness.calls import CallPolicy, CallStats, ManagedModel
from harness.errors import HarnessError
from harness.limits import Limiter, LimiterSource, LimitRecorder, LocalLimits, limit_key
from harness.progress import RunProgress
from harness.providers import load_model, validate_spec
from harness.records import ErrorRecord, RunConfig, RunManifest, RunSummary, SampleRecord, Stage, now_iso
from harness.run_folder import FinishedScan, RunFolder, RunIndex, scan_heads
from harness.redact import redact_text
from harness.spend import BudgetReached, SpendMeter, check_budgets
from harness.prices import load_price_file, price_for
from harness.summary import figures
from harness.spec import ModelSpec
from harness.suite import (RecordMismatch, Sample, SampleContext, Scorer, Suite, dump_payload, error_records, get_suite,
                           role_family)

T = TypeVar("T")
# Every package whose version changes a number: the model stack, and the libraries the benchmarks
# compute with (the papers' solvers, the simulators, the decoders).
TRACKED_PACKAGES = ("harness", "torch", "transformers", "openai", "litellm", "langgraph", "datasets", "vllm",
                    "numpy", "scipy", "scikit-learn", "stim", "pymatching", "ldpc", "highway-env",
                    "stable-baselines3", "ray")


def sample_seed(base_seed: int, sample_id: str, epoch: int) -> int:
    """The seed that reaches a sample's model calls: fixed by (run seed, sample, epoch)."""
    digest = hashlib.sha256(f"{base_seed}:{sample_id}:{epoch}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


async def _stage(coro: Awaitable[T], timeout_s: float, stage: Stage) -> tuple[T | None, list[ErrorRecord]]:
    """Run one stage (solve or score) under the sample's time limit; an exception becomes a
    typed error on the sample, never the run's end."""
    try:
        async with asyncio.timeout(timeout_s):
            return await coro, []
    except asyncio.TimeoutError:
        return None, [ErrorRecord(kind="timeout", stage=stage,
                                  message=f"{stage} timed out after {timeout_s:g}s (raise --sample-timeout)")]
    except Exception as exc:  # noqa: BLE001 - one sample's failure must not stop the run
        return None, [ErrorRecord(kind="exception", stage=stage, message=f"{type(exc).__name__}: {exc}",
                                  traceback=traceback.format_exc(limit=20))]


async def score_transcript(suite: Suite, scorer: Scorer, sample: Sample, output: dict[str, JsonValue],
                           ctx: SampleContext, timeout_s: float) -> tuple[dict[str, JsonValue], list[ErrorRecord]]:
    """The recorded transcript validated once into the suite's type, scored, and the scores
    validated before they are recorded; a mismatch is the sample's error, the run goes on."""
    try:
        transcript = suite.read_transcript(output)
    except RecordMismatch as exc:
        return suite.scores_on_failure(sample), [ErrorRecord(kind="record", stage="score", message=str(exc))]
    score, errors = await _stage(scorer.score(sample, transcript, ctx), timeout_s, "score")
    if score is None:
        return suite.scores_on_failure(sample), errors
    values = dump_payload(score.values)
    try:
        suite.read_scores(values)
    except RecordMismatch as exc:
        return suite.scores_on_failure(sample), [ErrorRecord(kind="record", stage="score", message=str(exc))]
    return values, error_records(score.errors, "score")


async def run_one(suite: Suite, sample: Sample, epoch: int, models: dict[str, ManagedModel],
                  config: RunConfig, meter: SpendMeter | None = None) -> SampleRecord:
    """The pure core: one sample in, one record out (solve, then score). Never raises except on
    cancellation and on a reached budget (`BudgetReached`, from `meter`)."""
    seed = sample_seed(config.seed, sample.id, epoch)
    ctx = SampleContext(models, seed, config.overrides(), meter)
    scorer = suite.scorer(config.scorer)
    started, t0 = now_iso(), time.perf_counter()
    transcript, errors = await _stage(suite.solve(sample, ctx), config.sample_timeout_s, "solve")
    if transcript is None:  # nothing to score: count what it should have produced as errors
        output, scores = {}, suite.scores_on_failure(sample)
    else:
        output = dump_payload(transcript.output)
        errors += error_records(transcript.errors, "solve")
        scores, score_errors = await score_transcript(suite, scorer, sample, output, ctx, config.sample_timeout_s)
        errors += score_errors
    return SampleRecord(
        sample_id=sample.id, epoch=epoch, seed=seed, status="error" if errors else "ok",
        output=output, scores=scores, scorer=scorer.name, usage=ctx.usage, calls=ctx.calls, errors=errors,
        started=started, duration_s=round(time.perf_counter() - t0, 4),
    )


async def rescore_one(suite: Suite, sample: Sample, source: SampleRecord, models: dict[str, ManagedModel],
                      config: RunConfig, meter: SpendMeter | None = None) -> SampleRecord:
    """`harness score`: a finished sample's transcript scored again, with the source's seed (so a
    re-score with the same judge and cache makes the same calls). A sample whose solve failed keeps
    its solve errors and failure scores: there is no transcript to score."""
    ctx = SampleContext(models, source.seed, config.overrides(), meter)
    scorer = suite.scorer(config.scorer)
    started, t0 = now_iso(), time.perf_counter()
    solve_errors = [e for e in source.errors if e.stage == "solve"]
    if not source.output:
        scores, errors = suite.scores_on_failure(sample), solve_errors
    else:
        scores, score_errors = await score_transcript(suite, scorer, sample, source.output, ctx,
                                                      config.sample_timeout_s)
        errors = solve_errors + score_errors
    return SampleRecord(
        sample_id=sample.id, epoch=source.epoch, seed=source.seed, status="error" if errors else "ok",
        output=source.output, scores=scores, scorer=scorer.name, usage=ctx.usage, calls=ctx.calls, errors=errors,
        started=started, duration_s=round(time.perf_counter() - t0, 4),
    )


@dataclass(frozen=True, slots=True)
class SourceLine:
    """Where a re-scored sample's source record is: bytes [offset, end) of the source run's
    samples.jsonl. Read when its sample runs, so a re-score of a million records holds the records
    in flight, not all of them."""

    path: Path
    offset: int
    end: int

    def load(self) -> SampleRecord:
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            return SampleRecord.load_line(fh.read(self.end - self.offset))


@dataclass(slots=True)  # no per-item __dict__: a million-sample plan holds a million of these
class WorkItem:
    """One record to write: a sample of an epoch, or (re-scoring) a source record to score again."""

    sample: Sample
    epoch: int
    source: SampleRecord | SourceLine | None = None

    def with_source_loaded(self) -> WorkItem:
        """This item with its source record read (what a worker that cannot see the source run's
        folder -- a Ray task on another node -- needs)."""
        if isinstance(self.source, SourceLine):
            return WorkItem(self.sample, self.epoch, self.source.load())
        return self


@dataclass
class RunPlan:
    suite: Suite
    config: RunConfig
    folder: RunFolder
    manifest: RunManifest
    todo: list[WorkItem]
    done: set[tuple[str, int]] = field(default_factory=set)  # (sample, epoch) already recorded
    done_errors: int = 0  # how many of them are errors
    resumed: bool = False
    meter: SpendMeter = field(default_factory=lambda: SpendMeter([], {}))  # spend so far and the caps

    def endpoints(self) -> dict[str, tuple[str, str | None]]:
        """role -> (spec, base URL) of every role this run calls."""
        return {r: (self.config.models[r], self.config.endpoint(r)) for r in self.called_roles}

    @property
    def called_roles(self) -> tuple[str, ...]:
        """The roles this run calls: all of them, or only the scorer's when re-scoring."""
        if self.config.source_run:
            wanted = self.suite.scorer(self.config.scorer).roles
            return tuple(r for r in self.config.models if role_family(r) in wanted)
        return tuple(self.config.models)


def config_hash(suite: Suite, config: RunConfig, corpus_id: dict[str, JsonValue]) -> str:
    blob = json.dumps(
        {"suite_version": suite.version, "config": config.result_fields(), "corpus": corpus_id.get("sha256")},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str]:
    """The installed version of each of `names` (a package not installed is left out)."""
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def plan_run(config: RunConfig, run_dir: Path, *, resume: str | None = None, suite: Suite | None = None,
             command: list[str] | None = None) -> RunPlan:
    """Validate everything and decide what is left to do. Writes nothing."""
    if resume:
        folder = RunFolder(run_dir, resume)
        manifest = folder.read_manifest()
        # The stored config decides results; only execution settings may change on resume.
        stored = manifest.config
        # A role's endpoint may move too: the one given now, else the stored one.
        roles = {r: rc.model_copy(update={"base_url": config.base_urls.get(r) or rc.base_url})
                 for r, rc in stored.roles.items()}
        config = stored.model_copy(update={k: getattr(config, k) for k in RunConfig.EXECUTION_ONLY}
                                   | {"base_url": config.base_url or stored.base_url, "roles": roles,
                                      "prices_file": config.prices_file or stored.prices_file})
        suite = suite or get_suite(stored.suite, stored.suite_options)
        if suite.version != manifest.suite_version:
            raise HarnessError(
                f"run {resume} used {suite.name} version {manifest.suite_version}, installed is {suite.version}: start a new run"
            )
    suite = suite or get_suite(config.suite, config.suite_options)
    suite.scorer(config.scorer)  # an unknown scorer is bad input, found before anything is written
    for role, text in config.models.items():
        validate_spec(ModelSpec.parse(text, base_url=config.endpoint(role), flag=f"the {role} model (--role {role}=...)"))
    if config.source_run:
        samples, sources = _rescore_inputs(suite, config, run_dir)
    else:
        samples, sources = suite.load_samples(config.corpus), []
        if config.limit is not None:
            samples = samples[: config.limit]
    corpus_id = suite.corpus_identity(config.corpus) | {"samples": len(samples)}
    chash = config_hash(suite, config, corpus_id)
    if resume:
        if manifest.config_hash != chash:
            raise HarnessError(f"run {resume}: its corpus changed since it started (hash differs): start a new run")
    else:
        unfinished = latest_run_with(run_dir, chash, ("running", "interrupted"))
        if unfinished:
            folder = RunFolder(run_dir, unfinished)
            manifest = folder.read_manifest()
            resume = unfinished
        else:
            folder = _new_folder(run_dir, suite, config, chash)
            manifest = RunManifest(
                run_id=folder.run_id, suite=suite.name, suite_version=suite.version, config=config,
                config_hash=chash, corpus=corpus_id, git_revision=git_revision(),
                package_versions=package_versions(), started=now_iso(),
                command=[redact_text(arg) for arg in command or []],
                scorer=suite.scorer(config.scorer).name, source_run=config.source_run,
            )
    if resume:
        folder.repair()
    # A streaming scan of each line's head: resuming a million-sample run parses no record.
    finished = folder.scan_finished() if resume else FinishedScan()
    done_keys = finished.keys
    if config.source_run:
        by_id = {s.id: s for s in samples}
        todo = [WorkItem(by_id[k[0]], k[1], line) for k, line in sources if k not in done_keys]
    else:
        todo = [WorkItem(s, e) for e in range(config.epochs) for s in samples if (s.id, e) not in done_keys]
    manifest.config = config
    plan = RunPlan(suite=suite, config=config, folder=folder, manifest=manifest, todo=todo, done=done_keys,
                   done_errors=finished.errors, resumed=bool(resume))
    plan.meter = spend_meter(plan)
    return plan


def spend_meter(plan: RunPlan) -> SpendMeter:
    """The run's meter: the roles it calls priced (harness/prices.py), its caps checked against
    them (bad input), and what earlier sessions of the run paid."""
    config = plan.config
    overrides = load_price_file(Path(config.prices_file) if config.prices_file else None)
    prices = {r: price_for(config.models[r], base_url=config.endpoint(r), overrides=overrides)
              for r in plan.called_roles}
    check_budgets(config.budgets, plan.called_roles, prices)
    return SpendMeter(config.budgets, prices, plan.manifest.spend)


def _new_folder(run_dir: Path, suite: Suite, config: RunConfig, chash: str) -> RunFolder:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    kind = "score-" if config.source_run else ""
    run_id = f"{suite.name}-{kind}{stamp}-{chash[:6]}"
    folder = RunFolder(run_dir, run_id)
    n = 1
    while folder.exists():
        n += 1
        folder = RunFolder(run_dir, f"{run_id}-{n}")
    return folder


def _rescore_inputs(suite: Suite, config: RunConfig,
                    run_dir: Path) -> tuple[list[Sample], list[tuple[tuple[str, int], SourceLine]]]:
    """The source run's finished records -- where each one's line is, sorted by (sample, epoch);
    no record is parsed here -- and the dataset samples they belong to. The corpus must be the one
    the source run read (same content hash): a transcript is scored against its sample."""
    source = RunFolder(run_dir, config.source_run or "")
    manifest = source.read_manifest()
    if manifest.suite != suite.name:
        raise HarnessError(f"run {source.run_id} is a {manifest.suite} run, not {suite.name}")
    lines: dict[tuple[str, int], SourceLine] = {}
    if source.samples_path.exists():
        for head in scan_heads(source.samples_path):  # a key's first line wins, as for every reader
            lines.setdefault((head.sample_id, head.epoch), SourceLine(source.samples_path, head.offset, head.end))
    if not lines:
        raise HarnessError(f"run {source.run_id} has no finished samples to score yet: resume it first "
                           f"(`harness eval --resume {source.run_id} --run-dir {run_dir}`)")
    samples = suite.load_samples(config.corpus)
    then, now = manifest.corpus.get("sha256"), suite.corpus_identity(config.corpus).get("sha256")
    if then != now:
        raise HarnessError(f"run {source.run_id}: its corpus {manifest.corpus.get('path') or '(default)'} changed since "
                           "it ran (content hash differs): re-score needs the samples it was solved on")
    scored = {k[0] for k in lines}
    missing = sorted(scored - {s.id for s in samples})
    if missing:
        raise HarnessError(f"run {source.run_id}: samples {missing[:3]} are not in its corpus any more")
    return [s for s in samples if s.id in scored], sorted(lines.items())


def latest_run_with(run_dir: Path, chash: str, statuses: tuple[str, ...]) -> str | None:
    """The newest run of this config hash whose status is one of `statuses` and whose folder
    still exists (None: no such run)."""
    if not (run_dir / "index.sqlite").exists():
        return None
    index = RunIndex(run_dir)
    try:
        for row in reversed(index.runs()):
            if row["config_hash"] == chash and row["status"] in statuses:
                if RunFolder(run_dir, row["run_id"]).exists():
                    return str(row["run_id"])
    finally:
        index.close()
    return None


def build_models(config: RunConfig, cache: CallCache | None, only: tuple[str, ...] | None = None,
                 limits: LimiterSource | None = None) -> dict[str, ManagedModel]:
    """One ManagedModel per distinct spec (`only`: the roles the run calls; a re-score never loads
    the model under test); its calls in flight are limited by its provider+key's adaptive limit
    from `limits` (harness/limits.py; fresh in-process limits when None)."""
    policy = CallPolicy(timeout_s=config.call_timeout_s, max_retries=config.max_retries)
    limits = limits or LocalLimits(lease_s=config.call_timeout_s + 60)
    by_spec: dict[tuple[str, str | None], ManagedModel] = {}
    roles = {}
    for role, text in config.models.items():
        if only is not None and role not in only:
            continue
        key = (text, config.endpoint(role))
        if key not in by_spec:
            spec = ModelSpec.parse(text, base_url=key[1])
            model = load_model(spec)
            by_spec[key] = ManagedModel(model, max_connections=config.max_connections, policy=policy,
                                        cache=cache, rng_seed=config.seed,
                                        limiter=limits.limiter(limit_key(spec), config.max_connections))
        roles[role] = by_spec[key]
    return roles


async def run_items(suite: Suite, config: RunConfig, items: Iterable[WorkItem], models: dict[str, ManagedModel],
                    deliver: Callable[[SampleRecord], object], concurrency: int,
                    meter: SpendMeter | None = None) -> None:
    """Run work items with `concurrency` samples in flight, handing each record to `deliver` as
    it ends. The one loop every executor runs (the asyncio executor in the driver, the Ray
    executor inside each task). `items` is read lazily, one item per free worker. With a `meter`
    whose cap is reached, no item starts and a sample stopped by it is not delivered (nor is one
    that ended in an error after the stop: the stop may have caused it); its calls are cached."""
    remaining = iter(items)  # shared by the workers: each takes the next item when it is free

    async def worker() -> None:
        for item in remaining:
            if meter is not None and meter.stop_reason is not None:
                return
            try:
                if item.source is None:
                    record = await run_one(suite, item.sample, item.epoch, models, config, meter)
                else:
                    source = item.source.load() if isinstance(item.source, SourceLine) else item.source
                    record = await rescore_one(suite, item.sample, source, models, config, meter)
            except BudgetReached:
                return
            if meter is not None and meter.stop_reason is not None and record.status == "error":
                return
            deliver(record)
            # A sample whose calls never suspend (an in-process model, a call-cache hit) would
            # otherwise run the next one in the same loop step, and so on to the end of the run:
            # no other task (the limits' poll, Ctrl-C) would run, and the loop would never drop the
            # cancelled timers of the samples' `asyncio.timeout`s (3 a sample, ~0.7 KiB: 0.7 GiB
            # at 10^6 samples). One yield per sample lets the loop do both.
            await asyncio.sleep(0)

    width = len(items) if isinstance(items, Sized) else concurrency
    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, width)))))


# Called by an executor with each finished record; True if it was new and is now written, False if
# that (sample, epoch) was already recorded (a retry's or a straggler's copy, dropped).
Deliver = Callable[[SampleRecord], bool]


class Executor(Protocol):
    """Where a run's samples run (`--executor`; more in harness/executors/). `execute` owns the run
    folder and calls, in order: `prepare(plan)` before anything is written (load models, join the
    cluster; bad input raises HarnessError), `run(plan, deliver)` (each record to `deliver` as it
    ends), `call_stats()` (calls per model name) and `aclose()` (once, also on failure)."""

    name: str

    def prepare(self, plan: RunPlan) -> None: ...

    async def run(self, plan: RunPlan, deliver: Deliver) -> None: ...

    def call_stats(self) -> dict[str, CallStats]: ...

    async def aclose(self) -> None: ...


def stats_by_name(models: dict[str, ManagedModel]) -> dict[str, CallStats]:
    """Per-model call counts of a role -> model map (a model shared by roles counted once)."""
    out: dict[str, CallStats] = {}
    for model in {id(m): m for m in models.values()}.values():
        out.setdefault(model.name, CallStats()).add(model.stats)
    return out


class AsyncioExecutor:
    """The default: every sample in this process, `max_connections` calls in flight per provider+key
    (adaptive: harness/limits.py), the run dir's call cache shared by all of them."""

    name = "asyncio"

    def __init__(self) -> None:
        self._models: dict[str, ManagedModel] = {}
        self._cache: CallCache | None = None

    def prepare(self, plan: RunPlan) -> None:
        self._cache = CallCache(plan.folder.run_dir / "cache.sqlite") if plan.config.cache else None
        self._models = build_models(plan.config, self._cache, plan.called_roles)

    def limiters(self) -> dict[str, Limiter]:
        return {m.name: m.limiter for m in self._models.values()}

    async def run(self, plan: RunPlan, deliver: Deliver) -> None:
        await run_items(plan.suite, plan.config, plan.todo, self._models, deliver, plan.config.max_connections,
                        plan.meter)

    def call_stats(self) -> dict[str, CallStats]:
        return stats_by_name(self._models)

    async def aclose(self) -> None:
        for model in {id(m): m for m in self._models.values()}.values():
            try:
                await model.aclose()
            except Exception:  # noqa: BLE001 - closing must not mask the run's own outcome
                pass
        if self._cache is not None:
            self._cache.close()


async def execute(plan: RunPlan, *, show_progress: bool = True, executor: Executor | None = None) -> RunSummary:
    """Run what the plan left to do, writing each sample as it ends; always leave a consistent run.
    The driver (this process) is the only writer of the run folder, whichever executor runs the
    samples; a record whose (sample, epoch) is already recorded is dropped, so a retried or late
    duplicate never becomes a second line."""
    executor = executor or AsyncioExecutor()
    folder, manifest, suite = plan.folder, plan.manifest, plan.suite
    run_dir = folder.run_dir
    executor.prepare(plan)  # bad input (a cluster that does not answer) is found before anything is written
    # Only keys and counts stay in memory; records go to disk and the summary streams them back.
    recorded = set(plan.done)
    errors = plan.done_errors
    manifest.status, manifest.ended = "running", None
    folder.write_manifest(manifest)
    index = RunIndex(run_dir)
    index.record(manifest, None, len(recorded), errors)
    finished = False
    total = len(plan.todo) + len(plan.done)
    limits = LimitRecorder(folder.path / "limits.jsonl")  # the adaptive limits' history, polled
    try:
        with RunProgress(f"{suite.name}", total, len(plan.done), enabled=show_progress) as progress:

            def deliver(record: SampleRecord) -> bool:
                nonlocal errors
                if record.key in recorded:
                    return False
                folder.append(record)
                recorded.add(record.key)
                errors += record.status == "error"
                progress.advance(record.status == "error")
                progress.show_spend(plan.meter.describe())
                return True

            await limits.watch(executor, executor.run(plan, deliver), progress.show_limits)
        finished = plan.meter.stop_reason is None
    finally:
        folder.close()
        manifest.status = "complete" if finished else "interrupted"
        manifest.stop_reason = plan.meter.stop_reason
        manifest.ended = now_iso()
        summary = summarize(suite, manifest, folder.iter_samples(), executor.call_stats())
        # Paid per call in this process (the meter, which starts from earlier sessions' spend), or,
        # where calls ran elsewhere (Ray), read from the records of every session.
        manifest.spend = plan.meter.spent if isinstance(executor, AsyncioExecutor) else summary.usage
        summary.spend = SpendMeter([], plan.meter.prices, manifest.spend).table()
        summary.stop_reason = manifest.stop_reason
        limits.add_to(summary)
        limits.close()
        folder.write_summary(summary)
        folder.write_manifest(manifest)
        index.record(manifest, summary, summary.counts["samples"], summary.counts["sample_errors"])
        index.close()
        try:
            await executor.aclose()
        except Exception:  # noqa: BLE001 - closing must not mask the run's own outcome
            pass
    return summary


def summarize(suite: Suite, manifest: RunManifest, records: Iterable[SampleRecord],
              call_stats: dict[str, CallStats]) -> RunSummary:
    """The run's summary from its records, a list or a stream from samples.jsonl (one pass; the
    same figures either way: see harness/summary.py)."""
    found = figures(suite, records, manifest.config.seed)
    calls = {name: {"calls": s.calls, "cache_hits": s.cache_hits, "retries": s.retries,
                    "failures": s.failures, "errors_by_kind": s.errors_by_kind} for name, s in call_stats.items()}
    return RunSummary(
        run_id=manifest.run_id, suite=suite.name, suite_version=suite.version,
        headline_metric=suite.headline_metric, metrics=found.metrics,
        metric_specs={name: suite.metric_spec(name) for name in found.metrics}, breakdowns=found.breakdowns,
        epochs=found.epochs, counts=found.counts, usage=found.usage, calls=calls, official=found.official,
        scorer=manifest.scorer, source_run=manifest.source_run,
    )


def run_eval(plan: RunPlan, *, show_progress: bool = True, executor: Executor | None = None) -> RunSummary:
    """Synchronous entry: Ctrl-C (or SIGTERM, as schedulers send) leaves an `interrupted`,
    resumable run and raises KeyboardInterrupt."""
    # SIGTERM takes the Ctrl-C path, which asyncio turns into a clean cancellation.
    previous = signal.signal(signal.SIGTERM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    try:
        return asyncio.run(execute(plan, show_progress=show_progress, executor=executor))
    finally:
        signal.signal(signal.SIGTERM, previous)

