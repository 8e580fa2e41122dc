"""The claims table: one row per checked task (claim, criterion, method vs its best baseline with
CIs, verdict, wall time) from saved `harness papers check` reports, as HTML (the papers' section of
`harness leaderboard export --format html`), CSV or Markdown (`harness papers table`).

Where the reports live: `harness papers check TASK|--all --json RUN_DIR` saves each task's report as
`RUN_DIR/reports/papers.<task>/check.json` (`harness.suite.saved_reports_dir`), replacing that task's
previous one; `--json FILE.json` writes one list instead (read back with `papers table --reports FILE`).

"Best baseline": among the baselines the criterion compares the method with (all baselines when it
names none), the best on the headline metric at the criterion's setting, best in the criterion's
direction (a `>=` on method minus baseline: higher is better). Its difference from the method is
the claim check's own paired-by-seed bootstrap CI.
"""

from __future__ import annotations

import csv
import io
import json
from html import escape
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from environments.papers.outcomes import CheckReport, ConditionResult
from harness.errors import HarnessError
from harness.suite import REPORTS_FOLDER, ReportInput, ReportSection, saved_reports_dir, suite_class

REPORT_FILE = "check.json"


def suite_name(task: str) -> str:
    return f"papers.{task}"


def save_reports(reports: list[CheckReport], target: Path) -> list[Path]:
    """`target` ending in .json: one file with the list; otherwise a run dir, one file per task."""
    if target.suffix == ".json":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps([r.model_dump(mode="json") for r in reports], indent=1), encoding="utf-8")
        return [target]
    written = []
    for r in reports:
        path = saved_reports_dir(target, suite_name(r.task)) / REPORT_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(r.model_dump_json(indent=1), encoding="utf-8")
        written.append(path)
    return written


def load_reports(files: list[Path]) -> list[CheckReport]:
    """Reports from saved files (one report or a list each); the newest file wins per task, and
    tasks come in name order. A file that is not a check report is one error naming it."""
    by_task: dict[str, tuple[float, CheckReport]] = {}
    for path in files:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            items = [CheckReport.model_validate(d) for d in (doc if isinstance(doc, list) else [doc])]
        except FileNotFoundError:
            raise HarnessError(f"{path}: no such file; save reports with `harness papers check --all --json RUN_DIR`") from None
        except (ValueError, ValidationError) as exc:
            raise HarnessError(f"{path}: not a `harness papers check` report ({str(exc).splitlines()[0]}); "
                               "write one with `harness papers check TASK --json RUN_DIR`") from None
        stamp = path.stat().st_mtime
        for report in items:
            if report.task not in by_task or by_task[report.task][0] <= stamp:
                by_task[report.task] = (stamp, report)
    return [by_task[t][1] for t in sorted(by_task)]


def saved_files(run_dirs: list[Path]) -> list[Path]:
    """The saved checks under the run dirs (`RUN_DIR/reports/papers.<task>/check.json`)."""
    return sorted(p for d in run_dirs for p in (d / REPORTS_FOLDER).glob(f"papers.*/{REPORT_FILE}"))


class Side(BaseModel):
    solver: str
    mean: float | None
    ci_low: float | None
    ci_high: float | None


class ClaimRow(BaseModel):
    task: str
    claim: str
    criterion: list[ConditionResult]
    metric: str
    setting: str
    method: Side | None
    baseline: Side | None
    difference: ConditionResult | None  # method minus the best baseline, paired by seed
    verdict: str
    verdict_text: str
    seeds: int
    wall_s: float


def _task_class(task: str) -> Any:
    """The task's suite class, or None when it is not installed here (the row then falls back on the
    report alone). Read by its attributes (`claim`, `solvers`, ...): this module stays below `base.py`,
    whose `PaperTask.report_section` calls it."""
    try:
        cls = suite_class(suite_name(task))
    except (HarnessError, ImportError):
        return None
    return cls if all(hasattr(cls, a) for a in ("claim", "solvers", "settings", "metric_names")) else None


def _plan(report: CheckReport) -> tuple[str, str, str, list[str], bool, Any]:
    """(headline metric, setting, method, baselines to consider, higher is better, the criterion's
    condition type to name the paired difference with, or None)."""
    first = report.summaries[0]
    solvers = list(dict.fromkeys(s.solver for s in report.summaries))
    cls = _task_class(report.task)
    if cls is None:
        return first.metric, first.setting, first.solver, solvers[1:], True, None
    head, method = cls.metric_names[0], cls.solvers[0]
    on_head = [c for c in cls.claim.criterion if c.metric == head]
    versus = [c for c in on_head if c.versus]
    decider = (versus or on_head or [None])[0]
    setting = decider.setting if decider is not None else cls.settings[0]
    higher = decider.op == ">=" if decider is not None else not cls.smaller_is_better(head)
    named = list(dict.fromkeys(c.versus for c in versus if c.versus))
    kind = type(cls.claim.criterion[0]) if cls.claim.criterion else None
    return head, setting, method, named or list(cls.solvers[1:]), higher, kind


def claim_row(report: CheckReport) -> ClaimRow:
    head, setting, method, baselines, higher, condition = _plan(report)
    sides = {s.solver: Side(solver=s.solver, mean=s.mean, ci_low=s.ci_low, ci_high=s.ci_high)
             for s in report.summaries if s.metric == head and s.setting == setting}
    scored = [sides[b] for b in baselines if b in sides and sides[b].mean is not None]
    best = (max if higher else min)(scored, key=lambda s: s.mean or 0.0) if scored else None
    diff = None
    if best is not None and condition is not None:  # the check names it so (`claims.check`'s `paired`)
        text = condition(metric=head, setting=setting, solver=method, versus=best.solver, op=">=", threshold=0.0).text()
        diff = next((p for p in report.paired if p.condition == text), None)
    return ClaimRow(task=report.task, claim=report.claim, criterion=report.conditions, metric=head, setting=setting,
                    method=sides.get(method), baseline=best, difference=diff, verdict=report.verdict,
                    verdict_text=verdict_text(report), seeds=report.seeds, wall_s=report.wall_s)


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def _ci(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f" [{lo:.4g}, {hi:.4g}]"


def condition_text(c: ConditionResult) -> str:
    return f"{c.condition}: {_num(c.estimate)}{_ci(c.ci_low, c.ci_high)} -> {c.outcome}"


def verdict_text(report: CheckReport) -> str:
    """The verdict in words; a miss says which condition failed and by how much."""
    if report.verdict == "reproduced":
        return "reproduced: every condition held"
    if report.verdict == "not reproduced":
        failed = "; ".join(condition_text(c) for c in report.conditions if c.outcome == "fails")
        return f"NOT REPRODUCED: the claim did not hold here ({failed})"
    more = f"about {report.seeds_to_decide} seeds would decide it" if report.seeds_to_decide else "more seeds needed"
    return f"inconclusive: an interval straddles its threshold; {more}"


def _side(s: Side | None) -> str:
    return "-" if s is None else f"{s.solver} {_num(s.mean)}{_ci(s.ci_low, s.ci_high)}"


def _diff(c: ConditionResult | None) -> str:
    return "-" if c is None else f"{_num(c.estimate)}{_ci(c.ci_low, c.ci_high)} (n={c.n})"


COLUMNS = ("task", "claim", "criterion", "metric @ setting", "method", "best baseline", "method - baseline (paired)",
           "verdict", "seeds", "wall s")


def row_cells(row: ClaimRow) -> list[str]:
    return [row.task, row.claim, "; ".join(condition_text(c) for c in row.criterion), f"{row.metric} @ {row.setting}",
            _side(row.method), _side(row.baseline), _diff(row.difference), row.verdict_text, str(row.seeds),
            f"{row.wall_s:.1f}"]


def to_csv(rows: list[ClaimRow]) -> str:
    """One header row, one task per row; numbers in their own columns too, for spreadsheets."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    extra = ("verdict_code", "method_mean", "method_ci_low", "method_ci_high", "baseline_mean", "baseline_ci_low",
             "baseline_ci_high", "difference", "difference_ci_low", "difference_ci_high")
    writer.writerow([*COLUMNS, *extra])
    for r in rows:
        m, b, d = r.method, r.baseline, r.difference
        writer.writerow([*row_cells(r), r.verdict,
                         *(("", "", "") if m is None else (m.mean, m.ci_low, m.ci_high)),
                         *(("", "", "") if b is None else (b.mean, b.ci_low, b.ci_high)),
                         *(("", "", "") if d is None else (d.estimate, d.ci_low, d.ci_high))])
    return buf.getvalue()


def to_markdown(rows: list[ClaimRow]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row_cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


VERDICT_CLASS = {"reproduced": "good", "not reproduced": "bad", "inconclusive": "unsure"}


def to_html(rows: list[ClaimRow]) -> str:
    body = []
    for r in rows:
        cells = row_cells(r)
        criterion = "<br>".join(escape(condition_text(c)) for c in r.criterion)
        verdict = f'<span class="{VERDICT_CLASS.get(r.verdict, "")}">{escape(r.verdict_text)}</span>'
        tds = [f"<td><code>{escape(cells[0])}</code></td>", f"<td>{escape(cells[1])}</td>", f"<td>{criterion}</td>",
               *(f'<td class="num">{escape(c)}</td>' for c in cells[3:7]), f"<td>{verdict}</td>",
               f'<td class="num">{escape(cells[8])}</td>', f'<td class="num">{escape(cells[9])}</td>']
        body.append(f'<tr data-verdict="{escape(r.verdict)}">' + "".join(tds) + "</tr>")
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    return f'<table class="claims"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def summary_line(rows: list[ClaimRow]) -> str:
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICT_CLASS}
    return (f"{len(rows)} claims: {counts['reproduced']} reproduced, {counts['not reproduced']} not reproduced, "
            f"{counts['inconclusive']} inconclusive; {sum(r.wall_s for r in rows):.0f} s of checks")


def claims_section(found: ReportInput) -> ReportSection:
    """The papers family's section of the HTML report: the claims table from the saved checks."""
    # Every saved check in the run dirs, not only the tasks installed here: a row needs only its report.
    files = saved_files(list(found.run_dirs))
    rows = [claim_row(r) for r in load_reports(files)]
    title = "Claims: the method papers, checked"
    if not rows:
        return ReportSection(title=title, summary="no saved claim checks", html=(
            '<p class="note">No saved claim checks in these run dirs: run <code>harness papers check --all --json '
            "RUN_DIR</code>.</p>"))
    note = ('<p class="note">Claim: the paper\'s. Criterion: ours, fixed before the first run; each condition with '
            "its estimate, 95% bootstrap CI over seeds and outcome. Method and best baseline: the headline metric's "
            "mean over seeds [95% CI] at the criterion's setting; their difference is paired by seed. "
            "From <code>RUN_DIR/reports/papers.&lt;task&gt;/check.json</code>; CSV: <code>harness papers table "
            "--format csv</code>.</p>")
    return ReportSection(title=title, html=note + to_html(rows), summary=summary_line(rows))
