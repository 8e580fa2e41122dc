"""`harness papers`: the method papers' claims, checked (`harness.commands` entry point `papers`).

`harness papers check TASK [--seeds N]` runs every solver of the task on the same seeds and
prints the claim, the criterion, each condition's estimate and CI, the side-by-side metrics, the
method's paired differences against each baseline, the verdict and its wall time;
`--all` checks every task and ends with one table of verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape
from rich.table import Table

from harness.cli.kit import fail, out
from harness.errors import HarnessError

if TYPE_CHECKING:
    from environments.papers.claims import CheckReport

papers_app = typer.Typer(no_args_is_help=True, help="The method papers as scored tasks: check their claims.")


def ci(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f"[{lo:.4g}, {hi:.4g}]"


def num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def print_report(report: CheckReport) -> None:
    out.print(f"[bold]{report.task}[/] -- {report.seeds} seeds, {report.wall_s:.1f} s", highlight=False)
    out.print(f"claim (the paper's): {report.claim}", highlight=False)
    out.print(f"setting (ours): {report.setting}", highlight=False)
    table = Table(title="criterion (ours, fixed before the run)")
    for col in ("condition", "estimate", "95% CI", "n", "outcome", "seeds to decide"):
        table.add_column(col, overflow="fold")
    for c in report.conditions:
        table.add_row(escape(c.condition), num(c.estimate), ci(c.ci_low, c.ci_high), str(c.n), c.outcome,
                      "" if c.outcome != "undecided" else str(c.seeds_needed or "unbounded"))
    out.print(table)
    sides = Table(title="solvers side by side (mean over seeds, bootstrap 95% CI)")
    for col in ("setting", "solver", "metric", "mean", "95% CI", "n"):
        sides.add_column(col)
    for s in report.summaries:
        sides.add_row(s.setting, s.solver, s.metric, num(s.mean), ci(s.ci_low, s.ci_high), str(s.n))
    out.print(sides)
    paired = Table(title="paired by seed: method minus baseline, headline metric (context)")
    for col in ("comparison", "difference", "95% CI", "n"):
        paired.add_column(col, overflow="fold")
    for c in report.paired:
        paired.add_row(escape(c.condition.replace(" >= 0 @", " @")),
                       num(c.estimate), ci(c.ci_low, c.ci_high), str(c.n))
    out.print(paired)
    more = f" (about {report.seeds_to_decide} seeds would decide it)" if report.seeds_to_decide else ""
    out.print(f"verdict: [bold]{report.verdict}[/]{more}", highlight=False)


@papers_app.command("list")
def list_cmd() -> None:
    """The tasks of the family, with their claims."""
    from environments.papers.tasks import TASKS

    for name, cls in TASKS.items():
        out.print(f"[bold]{name}[/] ({cls.name}): {cls.claim.paper}", highlight=False)


@papers_app.command("check")
def check_cmd(
    task: Optional[str] = typer.Argument(None, help="Task name (see `harness papers list`)."),
    all_tasks: bool = typer.Option(False, "--all", help="Check every task and print one table of verdicts."),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, max=500, help="Seeds per setting (default: the task's)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also save the reports: FILE.json (one list) or a "
                                            "RUN_DIR (RUN_DIR/reports/papers.<task>/check.json, read by the HTML report)."),
) -> None:
    """Run the claim: method and baselines on shared seeds, paired CIs, a verdict."""
    from environments.papers.claims import check
    from environments.papers.tasks import TASKS

    if all_tasks == (task is not None):
        fail("give one TASK or --all (tasks: " + ", ".join(TASKS) + ")")
    names = list(TASKS) if all_tasks else [str(task)]
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        fail(f"unknown task {unknown[0]!r}: choose one of {', '.join(TASKS)}")
    reports = []
    for name in names:
        cls = TASKS[name]
        try:
            report = check(cls, seeds or cls.Options().seeds)
        except (HarnessError, ValueError) as exc:
            fail(f"{name}: {exc}", code=1)
        print_report(report)
        reports.append(report)
    if all_tasks:
        from environments.papers.report import COLUMNS, claim_row, row_cells

        table = Table(title="claims (the same table: `harness papers table --format csv|md`)")
        for col in COLUMNS:
            table.add_column(col, overflow="fold")
        for r in reports:
            table.add_row(*(escape(c) for c in row_cells(claim_row(r))))
        out.print(table)
    if json_out:
        from environments.papers.report import save_reports

        for path in save_reports(reports, json_out):
            out.print(f"saved: {path}", highlight=False)


@papers_app.command("table")
def table_cmd(
    fmt: str = typer.Option("md", "--format", help="csv or md."),
    run_dir: list[Path] = typer.Option([Path("runs")], "--run-dir", help="Where `papers check --json RUN_DIR` saved (repeatable)."),
    reports: list[Path] = typer.Option([], "--reports", help="Report files (`--json FILE.json`) instead of run dirs."),
) -> None:
    """The claims table of the saved checks (claim, criterion, method vs best baseline, verdict, wall time)."""
    from environments.papers.report import claim_row, load_reports, saved_files, to_csv, to_markdown

    if fmt not in ("csv", "md"):
        fail(f"--format {fmt!r}: use csv or md")
    files = list(reports) or saved_files(run_dir)
    if not files:
        fail(f"no saved claim checks in {', '.join(map(str, run_dir))}: run `harness papers check --all --json RUN_DIR`")
    try:
        rows = [claim_row(r) for r in load_reports(files)]
    except HarnessError as exc:
        fail(str(exc))
    print((to_csv if fmt == "csv" else to_markdown)(rows), end="")
