"""Leaderboard rows: one per (model, judge, suite version, setup), pooled over that row's runs.

A row never mixes judges, suite versions or setups (suite options such as the agent, and the
models of other roles such as a world model or a simulated user): those are part of its key. Runs inside a row may
differ in other settings (seed, limit, token limits); the row says how many distinct configs it
pooled (`configs`), so pooling is never silent.

Several runs in one row are pooled at the sample level and the suite's own `metrics` recomputes
value and CI over the pooled records: the suite knows its independent unit (a ProactBench
dialogue met in two runs is one unit with twice the triggers, like an epoch), so the interval
stays honest. One run's row takes the figures its summary recorded.

Ranks are competition ranks by a metric within groups of comparable rows (by default the same
judge and suite version): a row's rank is 1 + the number of rows whose whole 95% interval lies
above its own, and `tied` marks a row whose interval overlaps another row's in its group.

Reference rows (`--with-published`): a suite family's published results, from its presenter
(`Presenter.reference_rows`), listed beside the runs' rows and never ranked with them (a
publication gives no interval to rank by). A run's row judged by another model than the
reference rows is flagged as not directly comparable (`comparability`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from harness.errors import HarnessError
from harness.presenter import ReferenceRow, presenter_for
from harness.providers import is_synthetic
from harness.providers.embedded import judge_note
from harness.providers.base import Usage
from harness.records import Metric, MetricSpec
from harness.prices import Price, role_costs
from leaderboards.runs import RunInfo, installed_suite, load_runs, metric_spec

ROW_KEY = ("model", "judge", "suite_version")
GROUP_BY_CHOICES = ROW_KEY
DEFAULT_GROUP_BY = ("judge", "suite_version")


@dataclass
class Row:
    model: str
    judge: str
    suite_version: str
    runs: list[RunInfo]
    setup: str = ""
    metrics: dict[str, Metric] = field(default_factory=dict)
    breakdowns: dict[str, dict[str, Metric]] = field(default_factory=dict)
    usage: dict[str, Usage] = field(default_factory=dict)
    cost: dict[str, float | None] = field(default_factory=dict)
    rank: int | None = None
    tied: bool = False

    def key(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(getattr(self, n) for n in names)

    @property
    def label(self) -> str:
        """The model as shown in tables and charts, with the setup when there is one."""
        if not self.setup:
            return self.model
        return f"{self.model} [{self.setup}]" if self.model else self.setup  # no model: a papers solver

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    @property
    def samples(self) -> int:
        return sum(r.samples for r in self.runs)

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.runs)

    @property
    def configs(self) -> int:
        return len({r.config_hash for r in self.runs})

    @property
    def date(self) -> str:
        return max((r.date for r in self.runs), default="")

    @property
    def total_cost(self) -> float | None:
        """Dollars over every role, or None if any role that used tokens has no known price."""
        if not self.cost or any(v is None for v in self.cost.values()):
            return None
        return float(sum(v for v in self.cost.values() if v is not None))

    def run_spread(self, metric: str) -> float | None:
        """Standard deviation of `metric` across this row's runs (two or more runs)."""
        values = [value for r in self.runs
                  if metric in r.metrics and (value := r.metrics[metric].value) is not None]
        return statistics.stdev(values) if len(values) >= 2 else None


@dataclass
class Leaderboard:
    suite: str
    metric: str
    group_by: tuple[str, ...]
    rows: list[Row]
    run_dirs: list[Path]
    generated: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    reference: list[ReferenceRow] = field(default_factory=list)  # published rows, best first (`add_reference_rows`)

    def spec(self, metric: str | None = None) -> MetricSpec:
        """How `metric` (default: the ranking metric) is read, as the board's runs recorded it."""
        return metric_spec(self.suite, metric or self.metric, (run for row in self.rows for run in row.runs))

    @property
    def metric_names(self) -> list[str]:
        names: dict[str, None] = {}
        for row in self.rows:
            names.update(dict.fromkeys(row.metrics))
        return list(names)

    @property
    def roles(self) -> list[str]:
        names: dict[str, None] = {}
        for row in self.rows:
            names.update(dict.fromkeys(row.usage))
        return list(names)

    def groups(self) -> list[tuple[tuple[str, ...], list[Row]]]:
        out: dict[tuple[str, ...], list[Row]] = {}
        for row in self.rows:
            out.setdefault(row.key(self.group_by), []).append(row)
        return list(out.items())


def _pool(row: Row, suite_name: str, seed: int) -> None:
    """Recompute a multi-run row's metrics over its pooled samples with the suite's own code."""
    from harness.suite import get_suite

    try:
        suite = get_suite(suite_name)
    except HarnessError as exc:
        raise HarnessError(f"row {row.model} / {row.judge} pools {len(row.runs)} runs and needs suite "
                           f"{suite_name!r} installed to recompute its metrics ({exc})") from None
    records = [rec for run in row.runs for rec in run.read_samples()]
    row.metrics = suite.metrics(records, seed=seed)
    row.breakdowns = suite.breakdowns(records, seed=seed)


def _usage(row: Row, prices: dict[str, Price]) -> None:
    for run in row.runs:
        for role, used in run.usage.items():
            row.usage.setdefault(role, Usage()).add(used)
        for role, dollars in role_costs(run.models, run.usage, base_url=run.base_url, overrides=prices).items():
            if role in row.cost and row.cost[role] is None:
                continue
            row.cost[role] = None if dollars is None else (row.cost.get(role) or 0.0) + dollars


def rank_rows(rows: list[Row], metric: str, *, lower_is_better: bool = False) -> list[Row]:
    """Sort one group best first and set rank and tied (see module docstring); `lower_is_better`:
    the suite says smaller values of `metric` are better (errors, regret)."""
    def ci(row: Row) -> tuple[float, float, float] | None:
        """The row's value of `metric` and its interval (the value itself where it has no CI)."""
        m = row.metrics.get(metric)
        if m is None or m.value is None:
            return None
        lo = m.ci_low if m.ci_low is not None else m.value
        hi = m.ci_high if m.ci_high is not None else m.value
        return m.value, lo, hi

    sign = 1.0 if lower_is_better else -1.0
    scored = sorted(((r, c) for r in rows if (c := ci(r)) is not None), key=lambda rc: sign * rc[1][0])
    for row, (_, lo, hi) in scored:
        others = [(olo, ohi) for o, (_, olo, ohi) in scored if o is not row]
        # rank = 1 + the rows whose whole interval is better than this row's whole interval
        row.rank = 1 + sum((ohi < lo) if lower_is_better else (olo > hi) for olo, ohi in others)
        row.tied = any(olo <= hi and lo <= ohi for olo, ohi in others)
    unscored = [r for r in rows if ci(r) is None]
    for row in unscored:
        row.rank, row.tied = None, False
    return [r for r, _ in scored] + unscored


def _refused_by_suite(runs: list[RunInfo], suite: str) -> tuple[str, str] | None:
    """The first run whose suite options its suite keeps off leaderboards (`Suite.leaderboard_refusal`)."""
    cls = installed_suite(suite)
    if cls is None:
        return None
    for run in runs:
        try:
            options = run.folder.read_manifest().config.suite_options
        except (HarnessError, ValueError):
            continue  # a run that lost its manifest lists with what the index knows
        why = cls.leaderboard_refusal(dict(options))
        if why:
            return run.run_id, why
    return None


def build_leaderboard(run_dirs: list[Path], suite: str, *, metric: str | None = None,
                      group_by: tuple[str, ...] = DEFAULT_GROUP_BY, include_incomplete: bool = False,
                      prices: dict[str, Price] | None = None, seed: int = 0) -> Leaderboard:
    bad = [g for g in group_by if g not in GROUP_BY_CHOICES]
    if bad:
        raise HarnessError(f"--group-by {bad[0]!r}: use one of {', '.join(GROUP_BY_CHOICES)}")
    where = ", ".join(str(d) for d in run_dirs)
    runs = load_runs(run_dirs, suite)
    if not runs:
        raise HarnessError(f"no runs of suite {suite!r} in {where}: run `harness eval --suite {suite}` first, "
                           "or check --suite and --run-dir (see `harness runs`)")
    kept = [r for r in runs if include_incomplete or r.status == "complete"]
    if not kept:
        states = ", ".join(f"{n} {s}" for s, n in Counter(r.status for r in runs).items())
        raise HarnessError(f"no complete runs of suite {suite!r} in {where} ({states}): finish them with "
                           "`harness eval --resume RUN_ID`, or pass --include-incomplete")
    synthetic = [(r.run_id, spec) for r in kept for spec in r.models.values() if is_synthetic(spec)]
    if synthetic:
        run_id, spec = synthetic[0]
        raise HarnessError(f"run {run_id} used {spec}: a synthetic test generator, not a model; leaderboard export "
                           "refuses synthetic runs (move them out of --run-dir, or delete them)")
    refused = _refused_by_suite(kept, suite)
    if refused:
        run_id, why = refused
        raise HarnessError(f"run {run_id}: {why}; leaderboard export refuses it (move it out of --run-dir, or delete it)")
    by_key: dict[tuple[str, str, str, str], Row] = {}
    for run in kept:
        key = (run.model or "", run.judge or "", run.suite_version, run.setup)
        by_key.setdefault(key, Row(*key[:3], runs=[], setup=run.setup)).runs.append(run)
    rows = list(by_key.values())
    for row in rows:
        if len(row.runs) == 1:
            row.metrics, row.breakdowns = dict(row.runs[0].metrics), dict(row.runs[0].breakdowns)
        else:
            _pool(row, suite, seed)
        _usage(row, prices or {})
    names = list(dict.fromkeys(n for row in rows for n in row.metrics))
    if metric is None:
        heads = Counter(r.headline_metric for r in kept if r.headline_metric)
        metric = heads.most_common(1)[0][0] if heads else (names[0] if names else "")
    if metric not in names:
        raise HarnessError(f"--metric {metric!r}: suite {suite!r} has no such metric in these runs; "
                           f"use one of {', '.join(names) or '(none recorded)'}")
    board = Leaderboard(suite=suite, metric=metric, group_by=tuple(group_by), rows=[], run_dirs=list(run_dirs))
    groups: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        groups.setdefault(row.key(board.group_by), []).append(row)
    lower = metric_spec(suite, metric, kept).lower_is_better
    for group in sorted(groups):
        board.rows.extend(rank_rows(groups[group], metric, lower_is_better=lower))
    return board


def add_reference_rows(board: Leaderboard, source: Path | None) -> None:
    """The suite family's published results read from `source`, best first by the board's metric."""
    presenter = presenter_for(board.suite)
    if source is None:
        where = presenter.reference_hint or "the folder of the published results"
        raise HarnessError(f"--with-published needs --published DIR: {where}")
    rows = presenter.reference_rows(source)
    if rows is None:
        raise HarnessError(f"--with-published: suite {board.suite!r} has no published results to show "
                           "(its presenter gives no reference rows)")
    lower = board.spec().lower_is_better

    def value(row: ReferenceRow) -> float:
        m = row.metrics.get(board.metric)
        if m is None or m.value is None:
            return float("inf")  # last either way
        return m.value if lower else -m.value

    board.reference = sorted(rows, key=value)


def _judge_names(judge: str) -> tuple[str, ...]:
    """The judge's models by their own names, without provider or router prefixes and case
    (`openrouter/openai/gpt-5.4` and a publication's `GPT-5.4` are one judge); a panel (`a+b`)
    is all of its members, so a panel that merely includes the published judge is another judge."""
    return tuple(sorted(part.rsplit("/", 1)[-1].strip().lower() for part in judge.split("+") if part.strip()))


def comparability(board: Leaderboard, row: Row) -> str:
    """Empty when there are no reference rows or the row was judged by the judge that scored them;
    else why its figures are not directly comparable with theirs."""
    judges = sorted({r.judge for r in board.reference})
    if not judges or any(_judge_names(row.judge) == _judge_names(j) for j in judges):
        return ""
    return (f"not directly comparable: judged by {row.judge or 'no judge'}, the published rows by "
            f"{', '.join(judges)}")


def to_frame(board: Leaderboard) -> pd.DataFrame:
    """The flat table every format starts from: one value per cell, CIs as `_ci_low`/`_ci_high`."""
    names = [board.metric] + [n for n in board.metric_names if n != board.metric]
    records = []
    for row in board.rows:
        rec: dict[str, object] = {
            "rank": row.rank, "tied": row.tied, "model": row.model, "judge": row.judge,
            "judge_note": judge_note(row.judge) or None, "suite": board.suite, "suite_version": row.suite_version, "setup": row.setup,
            "n": row.metrics[board.metric].n if board.metric in row.metrics else None,
            "samples": row.samples, "errors": row.errors, "runs": len(row.runs),
            "run_ids": ";".join(row.run_ids), "configs": row.configs, "date": row.date,
        }
        for name in names:
            m = row.metrics.get(name)
            rec[name] = m.value if m else None
            rec[f"{name}_ci_low"] = m.ci_low if m else None
            rec[f"{name}_ci_high"] = m.ci_high if m else None
        rec[f"{board.metric}_run_sd"] = row.run_spread(board.metric)
        for role in board.roles:
            used = row.usage.get(role)
            rec[f"{role}_calls"] = used.calls if used else None
            rec[f"{role}_prompt_tokens"] = used.prompt_tokens if used else None
            rec[f"{role}_completion_tokens"] = used.completion_tokens if used else None
            rec[f"{role}_cost_usd"] = row.cost.get(role)
        rec["cost_usd"] = row.total_cost
        if board.reference:
            rec |= {"source": "run", "comparability": comparability(board, row), "figures_from": ""}
        records.append(rec)
    for ref in board.reference:
        # The same columns as a run's row; what a publication does not give (CI, runs, tokens) stays empty.
        head = ref.metrics.get(board.metric)
        rec = {"rank": None, "tied": None, "model": ref.model, "judge": ref.judge, "suite": board.suite,
               "suite_version": "", "setup": "", "n": head.n if head else None, "samples": None, "errors": None,
               "runs": 0, "run_ids": "", "configs": None, "date": ""}
        for name in names:
            m = ref.metrics.get(name)
            rec |= {name: m.value if m else None, f"{name}_ci_low": m.ci_low if m else None,
                    f"{name}_ci_high": m.ci_high if m else None}
        rec |= {"source": "published", "comparability": "", "figures_from": ref.source}
        records.append(rec)
    frame = pd.DataFrame.from_records(records)
    # Integer columns with gaps stay integers (pandas' nullable Int64), so a CSV never shows "3.0".
    ints = ["rank", "n", "samples", "errors", "runs", "configs"]
    for col in ints + [c for c in frame.columns if c.endswith(("_calls", "_tokens"))]:
        frame[col] = frame[col].astype("Int64")
    return frame
