"""The CLI kit: what every `harness` command -- the core's and the plugins' (`harness.commands`
entry points) -- uses to talk to the user: the consoles, one error style, the run-dir option, and
run-and-report for anything that runs a suite. Plugin command modules import only this module."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from harness.errors import HarnessError

# Wide enough when piped (rich falls back to 80 columns), so ids and specs are not cut.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)
RUN_DIR = typer.Option(Path("runs"), "--run-dir", help="Folder holding runs, index.sqlite and the call cache.")


def fail(message: str, code: int = 2) -> NoReturn:
    """The one error style: `error: <what was wrong and how to fix it>` on stderr, exit code 2."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def check_run_dir(run_dir: Path) -> None:
    if run_dir.exists() and not run_dir.is_dir():
        raise HarnessError(f"--run-dir {run_dir}: is a file, not a folder; give a folder (it is created if missing)")


def run_config(config: Any, run_dir: Path, *, resume: str | None = None, suite: Any = None,
               progress: bool = True, executor: Any = None) -> tuple[Any, Path]:
    """Plan, check endpoints, run (`executor`: harness.executors, default asyncio); bad input is
    one error line, Ctrl-C leaves a resumable run."""
    from harness.providers import check_reachable
    from harness.runner import plan_run, run_eval

    try:
        plan = plan_run(config, run_dir, resume=resume, suite=suite, command=sys.argv)
        check_reachable(plan.endpoints())
    except HarnessError as exc:
        fail(str(exc))
    run_id = plan.manifest.run_id
    if plan.resumed:
        err.print(f"resuming {run_id}: {len(plan.done)} samples done, {len(plan.todo)} to go")
    try:
        summary = run_eval(plan, show_progress=progress, executor=executor)
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted[/]: {run_id} is saved; resume with "
                  f"`harness eval --resume {run_id} --run-dir {run_dir}`")
        raise typer.Exit(130) from None
    except HarnessError as exc:
        fail(str(exc))
    return summary, plan.folder.path


def fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    text = f"{v:.3f}"
    # A value that rounds to zero from below (a bootstrap's -1e-17) prints as 0.000, not -0.000.
    return "0.000" if text == "-0.000" else text


def print_summary(summary: Any, path: Path) -> None:
    table = Table(title=f"{summary.suite} {summary.suite_version} -- {summary.run_id}")
    for col in ("metric", "value", "95% CI", "n"):
        table.add_column(col)
    for name, m in summary.metrics.items():
        style = "bold" if name == summary.headline_metric else None
        ci = f"[{fmt(m.ci_low)}, {fmt(m.ci_high)}]" if m.value is not None else ""
        table.add_row(name, fmt(m.value), ci, str(m.n), style=style)
    out.print(table)
    for kind, groups in summary.breakdowns.items():
        cells = ", ".join(f"{k}={fmt(m.value)} (n={m.n})" for k, m in groups.items())
        out.print(f"{summary.headline_metric} by {kind}: {cells}", highlight=False)
    if summary.epochs:
        head = summary.epochs.get(summary.headline_metric, {})
        out.print(f"{summary.headline_metric} per epoch: {[fmt(v) for v in head.get('values', [])]} "
                  f"mean {fmt(head.get('mean'))} sd {fmt(head.get('std'))}", highlight=False)
    out.print("counts: " + ", ".join(f"{k}={v}" for k, v in summary.counts.items()), highlight=False)
    out.print(f"records: {path}", highlight=False)


