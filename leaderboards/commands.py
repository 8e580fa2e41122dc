"""`harness leaderboard ...` and `harness view`, registered through the entry-point group
`harness.commands` (pyproject.toml), so the core CLI does not import this package."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional, cast

import typer
from rich.console import Console
from rich.table import Table

from harness.errors import HarnessError

leaderboard_app = typer.Typer(no_args_is_help=True, help="Leaderboards over the runs in one or more run dirs.")
view_app = typer.Typer(help="Browse runs and their samples in a web page on 127.0.0.1.")

out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)
RUN_DIRS = typer.Option([Path("runs")], "--run-dir", help="Folder holding runs and index.sqlite; repeat for several.")


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@leaderboard_app.command("export")
def export_cmd(
    suite: Optional[str] = typer.Option(None, "--suite", help="Suite whose runs to rank (see `harness runs`); "
                                        "html without it: one report of every suite, the benchmarks and the claims."),
    fmt: str = typer.Option("csv", "--format", help="csv, md, html (report with charts), json, or eee (EvalEval's "
                                                     "every-eval-ever schema, one document per row, JSON Lines)."),
    run_dir: list[Path] = RUN_DIRS,
    out_file: Optional[Path] = typer.Option(None, "--out", help="Write here instead of stdout."),
    metric: Optional[str] = typer.Option(None, "--metric", help="Metric to rank by (default: the suite's headline)."),
    group_by: list[str] = typer.Option(["judge", "suite_version"], "--group-by",
                                       help="Rank within groups of model, judge or suite_version (repeatable)."),
    include_incomplete: bool = typer.Option(False, "--include-incomplete",
                                            help="Also pool runs that are running, interrupted or failed."),
    prices: Optional[Path] = typer.Option(None, "--prices",
                                          help='JSON {"provider/model": {"input_per_mtok": x, "output_per_mtok": y}}.'),
    bench: list[Path] = typer.Option([], "--bench", help="adapters_bench.json (or its folder) to plot in the HTML report."),
    with_published: bool = typer.Option(False, "--with-published",
                                        help="Add the suite's published results as reference rows (from --published)."),
    published: Optional[Path] = typer.Option(None, "--published", help="Folder of the published results "
                                             "--with-published reads (read in place, never copied)."),
) -> None:
    """One row per (model, judge, suite version): n, every metric with its 95% CI, rank with ties,
    run ids, tokens and cost per role, date. `--format html` without `--suite`: one offline report
    of every suite in the run dirs (leaderboards and each suite's own section), the serving
    benchmarks (`--bench`) and the papers' claims table. `--with-published --published DIR`: the
    suite's published results beside the runs, marked published, with their judge and source file;
    a run judged by another model is flagged as not directly comparable."""
    from leaderboards.aggregate import add_reference_rows, build_leaderboard
    from leaderboards.combined import combined_report
    from leaderboards.export import FORMATS, render, write_output
    from harness.prices import load_price_file
    from leaderboards.sections import suite_section

    try:
        if fmt not in FORMATS:  # before any reading: a typo should not cost a pass over the runs
            raise HarnessError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
        if published is not None and not with_published:
            raise HarnessError("--published DIR is read by --with-published: add it")
        if suite is None:
            if with_published:
                raise HarnessError("--with-published needs --suite: published results belong to one suite")
            if fmt != "html" or metric:
                raise HarnessError("--suite is needed for csv, md, json and --metric; html without --suite is the "
                                   "whole report (every suite, the benchmarks, the claims)")
            text = write_output(combined_report(run_dir, bench=bench, group_by=tuple(group_by),
                                                include_incomplete=include_incomplete,
                                                prices=load_price_file(prices)), out_file)
        else:
            board = build_leaderboard(run_dir, suite, metric=metric, group_by=tuple(group_by),
                                      include_incomplete=include_incomplete, prices=load_price_file(prices))
            if with_published:
                add_reference_rows(board, published)
            section, notes = suite_section(board) if fmt == "html" else (None, [])
            text = write_output(render(board, fmt, bench=bench, section=section, notes=notes), out_file)
    except HarnessError as exc:
        _fail(str(exc))
    if text is not None:
        sys.stdout.write(text)
    else:
        err.print(f"written: {out_file}", highlight=False)


def _num(v: float | None, signed: bool = False) -> str:
    return "n/a" if v is None else (f"{v:+.3f}" if signed else f"{v:.3f}")


@leaderboard_app.command("compare")
def compare_cmd(
    run_a: str = typer.Argument(..., help="Run id A."),
    run_b: str = typer.Argument(..., help="Run id B."),
    run_dir: list[Path] = RUN_DIRS,
    metric: list[str] = typer.Option([], "--metric", help="Only these metrics (repeatable; default all)."),
    resamples: int = typer.Option(2000, "--resamples", min=100, help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed (the comparison is deterministic)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Paired bootstrap over the samples both runs share: A - B per metric with a 95% CI, a
    p-value, and how many samples flipped."""
    from leaderboards.compare import compare_runs, comparison_dict

    try:
        result = compare_runs(run_dir, run_a, run_b, metrics=metric or None, resamples=resamples, seed=seed)
    except HarnessError as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps(comparison_dict(result), indent=2))
        return
    for note in result.notes:
        err.print(f"[yellow]note:[/] {note}", highlight=False)
    table = Table(title=f"A {result.run_a.run_id} vs B {result.run_b.run_id}: {result.shared} shared samples "
                        f"(only A {result.only_a}, only B {result.only_b}); paired bootstrap, "
                        f"{result.resamples} resamples, seed {result.seed}")
    for col in ("metric", "A", "B", "A - B", "95% CI", "p", "n", "A better", "B better"):
        table.add_column(col)
    for m in result.metrics:
        table.add_row(m.metric, _num(m.mean_a), _num(m.mean_b), _num(m.diff, True),
                      f"[{_num(m.ci_low, True)}, {_num(m.ci_high, True)}]" if m.ci_low is not None else "",
                      "n/a" if m.p_value is None else f"{m.p_value:.4f}", str(m.n), str(m.a_better), str(m.b_better))
    out.print(table)
    out.print("A, B: mean per-sample value over the shared samples; flipped = A better + B better.", highlight=False)


@view_app.callback(invoke_without_command=True)
def view_cmd(
    run_dir: list[Path] = RUN_DIRS,
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free port)."),
) -> None:
    """Serve a browsable list of runs and, per sample, the transcript, rubric, verdict and errors."""
    from leaderboards.viewer import make_server

    try:
        server = make_server(run_dir, port)
    except HarnessError as exc:
        _fail(str(exc))
    # After bind, an AF_INET server's address is getsockname()'s (str host, port); typeshed also allows bytes.
    host, bound = cast("tuple[str, int]", server.server_address[:2])
    # First line, flushed: scripts and tests read the URL from it (useful with --port 0).
    print(f"serving http://{host}:{bound}/ (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
