"""Finding runs across one or more run dirs, and reading what each left behind.

Everything here reads records; nothing writes. A run is identified by its id alone (ids embed a
timestamp and a random tail), so the same id met in two run dirs is the same run, listed once.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue

from harness.errors import HarnessError
from harness.providers.base import Usage
from harness.records import Metric, MetricSpec, RunManifest, RunSummary, SampleRecord
from harness.run_folder import RunFolder, RunIndex
from harness.suite import Suite, suite_class


@dataclass
class RunInfo:
    """One run as the leaderboard sees it: the index row plus manifest and summary details."""

    run_id: str
    run_dir: Path
    suite: str
    suite_version: str
    model: str | None
    judge: str | None
    status: str
    started: str | None
    ended: str | None
    samples: int
    errors: int
    config_hash: str | None
    headline_metric: str | None
    metrics: dict[str, Metric] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)
    base_url: str | None = None
    usage: dict[str, Usage] = field(default_factory=dict)
    breakdowns: dict[str, dict[str, Metric]] = field(default_factory=dict)
    metric_specs: dict[str, MetricSpec] = field(default_factory=dict)  # as the run's summary recorded them
    # What else defines the experiment besides model, judge and suite version: the suite's options
    # (e.g. agent=cdwm) and the models of its other roles (planner, user, world_model). Runs that
    # differ here measure different things and are never pooled into one row.
    setup: str = ""

    @property
    def folder(self) -> RunFolder:
        return RunFolder(self.run_dir, self.run_id)

    @property
    def date(self) -> str:
        """ISO date (YYYY-MM-DD) the run ended, or started if it has not ended."""
        return (self.ended or self.started or "")[:10]

    def read_samples(self) -> list[SampleRecord]:
        return self.folder.read_samples()


@functools.cache
def installed_suite(name: str) -> type[Suite] | None:
    """The suite class if it is installed here (a leaderboard still lists runs of one that is not)."""
    try:
        return suite_class(name)
    except HarnessError:
        return None


def metric_spec(suite: str, metric: str, runs: Iterable[RunInfo] = ()) -> MetricSpec:
    """How `metric` of `suite` is read (direction, unit): as the newest of `runs` that recorded it
    says, else as the installed suite declares it (runs written before metrics were declared),
    else "higher is better"."""
    for run in sorted(runs, key=lambda r: (r.started or "", r.run_id), reverse=True):
        if metric in run.metric_specs:
            return run.metric_specs[metric]
    cls = installed_suite(suite)
    return cls.metric_spec(metric) if cls is not None else MetricSpec()


def labelled_options(suite: str, options: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The run's suite options plus the defaults of the options its suite always names
    (`Suite.label_options`), so a run of the default says what it ran."""
    cls = installed_suite(suite)
    if cls is None:
        return dict(options)
    fields = cls.Options.model_fields
    return {k: fields[k].default for k in cls.label_options if k in fields} | dict(options)


def setup_label(options: dict[str, JsonValue], models: dict[str, str]) -> str:
    """`agent=cdwm; world_model=openai/x`: suite options, then roles other than the assistant and
    the judges, sorted, so equal setups give equal labels."""
    parts = [f"{k}={options[k]}" for k in sorted(options)]
    parts += [f"{role}={models[role]}" for role in sorted(models)
              if role != "assistant" and not role.startswith("judge")]
    return "; ".join(parts)


def check_run_dirs(run_dirs: list[Path]) -> list[Path]:
    """Existing, distinct run dirs in the order given; a missing one is an error naming it."""
    seen: dict[Path, Path] = {}
    for run_dir in run_dirs:
        if not run_dir.is_dir():
            raise HarnessError(f"run dir {str(run_dir)!r} does not exist: pass --run-dir DIR with the folder "
                               "`harness eval --run-dir` wrote to (default runs/)")
        seen.setdefault(run_dir.resolve(), run_dir)
    return list(seen.values())


def _indexed(run_dir: Path) -> list[RunInfo]:
    """The runs `index.sqlite` lists (its rows as they are, no details), in its order."""
    if not (run_dir / "index.sqlite").exists():
        return []
    index = RunIndex(run_dir)
    try:
        return [RunInfo(run_id=row["run_id"], run_dir=run_dir, suite=row["suite"], suite_version=row["suite_version"],
                        model=row["model"], judge=row["judge"], status=row["status"], started=row["started"],
                        ended=row["ended"], samples=row["samples"] or 0, errors=row["errors"] or 0,
                        config_hash=row["config_hash"], headline_metric=row["headline_metric"],
                        metrics=index.metrics(row["run_id"]))
                for row in index.runs()]
    finally:
        index.close()


def _details(run: RunInfo) -> RunInfo:
    """Manifest (models per role, endpoint) and summary (usage, breakdowns) of a run; a run
    folder that lost them still lists, with what the index knows."""
    folder = run.folder
    try:
        manifest: RunManifest | None = folder.read_manifest()
    except (HarnessError, ValueError):
        manifest = None
    if manifest is not None:
        run.models = dict(manifest.config.models)
        run.base_url = manifest.config.base_url
        run.setup = setup_label(labelled_options(run.suite, manifest.config.suite_options), run.models)
        if manifest.source_run:  # a re-score is its own row: never pooled with the run it re-scored
            run.setup = "; ".join(filter(None, [run.setup, f"scored by {manifest.scorer} from {manifest.source_run}"]))
    try:
        summary: RunSummary | None = folder.read_summary()
    except ValueError:
        summary = None
    if summary is not None:
        run.usage = dict(summary.usage)
        run.breakdowns = dict(summary.breakdowns)
        run.metric_specs = dict(summary.metric_specs)
        # The summary is what the index was written from; it keeps the suite's metric order.
        run.metrics = dict(summary.metrics)
    return run


def load_runs(run_dirs: list[Path], suite: str | None = None, *, details: bool = True) -> list[RunInfo]:
    """Every run recorded in the run dirs' `index.sqlite` (of `suite`, if given), oldest first."""
    runs: dict[str, RunInfo] = {}
    for run_dir in check_run_dirs(run_dirs):
        for run in _indexed(run_dir):
            if run.run_id in runs or (suite and run.suite != suite):
                continue
            runs[run.run_id] = _details(run) if details else run
    return sorted(runs.values(), key=lambda r: (r.started or "", r.run_id))


def find_run(run_dirs: list[Path], run_id: str) -> RunInfo:
    """The run `run_id` in any of the run dirs; an unknown id names the dirs searched and the fix."""
    for run in load_runs(run_dirs, details=False):
        if run.run_id == run_id:
            return _details(run)
    where = ", ".join(str(d) for d in run_dirs)
    raise HarnessError(f"run {run_id!r} not found in {where}: see `harness runs --run-dir DIR` for the ids, "
                       "or pass the --run-dir that holds it")
