"""`harness describe`, `harness list`, `harness runs`: what is installed and what has run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from harness.cli.kit import RUN_DIR, fail, fmt, out
from harness.errors import HarnessError

app = typer.Typer()


@app.command("describe")
def describe_cmd(suite: str = typer.Argument(..., help="Suite name (see `harness list`).")) -> None:
    """A suite's contract: options (type, bounds, default, description), roles, scorers, metrics."""
    try:
        describe_suite(suite)
    except HarnessError as exc:
        fail(str(exc))


def describe_suite(name: str) -> None:
    from harness.suite import describe_field, get_suite

    suite = get_suite(name)
    # Descriptions are text, not markup: a "[0, 1]" in one must print as written.
    out.print(f"[bold]{escape(suite.name)}[/] {escape(suite.version)} -- {escape(suite.description)}", highlight=False)
    out.print(escape(f"roles: {', '.join(suite.roles)} (solver: {', '.join(suite.solver_roles) or 'none'})"), highlight=False)
    out.print(escape(f"headline metric: {suite.headline_metric}"), highlight=False)
    table = Table(title="options (--suite-option KEY=VALUE)")
    for col in ("option", "type and default", "description"):
        table.add_column(col, overflow="fold")
    for key, info in type(suite.options).model_fields.items():
        table.add_row(escape(key), escape(describe_field(info)), escape(info.description or ""))
    out.print(table)
    scorers = Table(title="scorers (--scorer NAME; the first is the default)")
    for col in ("scorer", "roles", "description"):
        scorers.add_column(col, overflow="fold")
    for key, sc in suite.scorers().items():
        scorers.add_row(escape(key), escape(", ".join(sc.roles) or "-"), escape(sc.description))
    out.print(scorers)


@app.command("list")
def list_cmd(options: Optional[str] = typer.Option(None, "--options", help="Print this suite's options (= harness describe SUITE).")) -> None:
    """Suites installed, with version and sample count of their default corpus."""
    from harness.suite import available_suites, get_suite

    if options is not None:
        try:
            describe_suite(options)
        except HarnessError as exc:
            fail(str(exc))
        return
    table = Table()
    for col in ("suite", "version", "samples", "description"):
        table.add_column(col)
    for name in sorted(available_suites()):
        try:
            suite = get_suite(name)
            n = str(len(suite.load_samples(None)))
            table.add_row(name, suite.version, n, suite.description)
        except (HarnessError, ImportError) as exc:
            table.add_row(name, "?", "?", f"unavailable: {exc}")
    out.print(table)


@app.command("runs")
def runs_cmd(run_dir: Path = RUN_DIR, suite: Optional[str] = typer.Option(None, "--suite")) -> None:
    """Runs in a run dir, with status and headline metric."""
    from harness.providers.embedded import judge_note
    from harness.run_folder import RunIndex

    if not (run_dir / "index.sqlite").exists():
        fail(f"no runs in {run_dir}: run `harness eval` first or pass --run-dir DIR")
    index = RunIndex(run_dir)
    table = Table()
    for col in ("run_id", "suite", "model", "judge", "status", "samples", "errors", "headline", "spend"):
        table.add_column(col, overflow="fold")
    for r in index.runs(suite):
        head = f"{r['headline_metric']}={fmt(r['headline_value'])}" if r["headline_metric"] else ""
        note = judge_note(r["judge"])
        judge = f"{r['judge']} [yellow]({note})[/]" if note else r["judge"] or ""
        table.add_row(r["run_id"], f"{r['suite']} {r['suite_version']}", r["model"], judge,
                      r["status"], str(r["samples"]), str(r["errors"]), head, _spend(run_dir, r["run_id"]))
    index.close()
    out.print(table)


def _spend(run_dir: Path, run_id: str) -> str:
    """What a run paid, per role, from its summary ("" before it has one, or for runs written
    before spend was recorded): dollars where priced, else tokens."""
    from harness.run_folder import RunFolder

    folder = RunFolder(run_dir, run_id)
    summary = folder.read_summary() if folder.exists() else None
    if summary is None:
        return ""
    return ", ".join(f"{role} ${s.usd:.4f}" if s.usd else f"{role} {s.prompt_tokens + s.completion_tokens:,} tok"
                     for role, s in summary.spend.items())
