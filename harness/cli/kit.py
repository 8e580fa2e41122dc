"""The CLI kit: what every `harness` command -- the core's and the plugins' (`harness.commands`
entry points) -- uses to talk to the user: the consoles, one error style, the run-dir option, and
run-and-report for anything that runs a suite. Plugin command modules import only this module."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import JsonValue
from rich.console import Console
from rich.markup import escape
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
        if not plan.config.source_run:  # a re-score runs no solver: it needs none of the solver's programs
            plan.suite.check_ready()
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
    print_spend(summary)
    print_judge_note(path)
    out.print(f"records: {path}", highlight=False)
    if summary.stop_reason:  # stopped at a budget: say so, and how to go on, and exit non-zero
        err.print(f"[yellow]stopped[/]: {summary.stop_reason}; {summary.run_id} is saved. Continue with a higher cap: "
                  f"`harness eval --resume {summary.run_id} --run-dir {path.parent} --budget ROLE=AMOUNT` "
                  "(paid calls come from the cache)")
        raise typer.Exit(3)


def print_judge_note(path: Path) -> None:
    """Say so when a judge of the run was the embedded model (the demo's, or opted in)."""
    from harness.providers.embedded import judge_note
    from harness.run_folder import RunFolder, judge_label

    note = judge_note(judge_label(RunFolder(path.parent, path.name).read_manifest().config.models))
    if note:
        err.print(f"[yellow]{note}[/]: the embedded 135M judge passes nearly everything; name a real judge "
                  "with --judge-model SPEC for numbers that mean something", highlight=False)


def print_spend(summary: Any) -> None:
    """What each role paid in this run (all sessions), with its dollars where a price is known."""
    if not summary.spend:
        return
    table = Table(title="spend (calls not answered from the cache)")
    for col in ("role", "calls", "prompt tokens", "completion tokens", "USD"):
        table.add_column(col, justify="right")
    for role, s in summary.spend.items():
        usd = "no known price" if s.usd is None else f"{s.usd:.4f}"
        table.add_row(role, str(s.calls), f"{s.prompt_tokens:,}", f"{s.completion_tokens:,}", usd)
    out.print(table)




# The claim commands' bodies, shared by `harness claims` and the families' own groups.
def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def print_verdict(v: Any, details: bool = False) -> None:
    """A verdict as the commands print it: the paper's sentence, the criterion with its hash and
    registration, each condition's estimate and interval, the looks, the departures."""
    wall = f"{v.wall_s:.1f} s wall" if v.wall_s is not None else f"{v.cells_s:.1f} s of cells (recomputed from records)"
    out.print(f"[bold]{escape(v.label)}[/] -- {v.seeds} seeds, {wall}", highlight=False)
    out.print(f"claim (the paper's): {escape(v.sentence)}", highlight=False)
    out.print(f"setting (ours): {escape(v.setting)}", highlight=False)
    out.print(f"criterion {v.criterion_hash}, registered {v.registered or 'NOT COMMITTED'}: {escape(v.criterion)}",
              highlight=False)
    table = Table(title=f"conditions ({v.conditions[0].level:.2%} Student-t intervals over seeds)")
    for col in ("condition", "estimate", "CI", "n", "outcome", "seeds to decide"):
        table.add_column(col, overflow="fold")
    for c in v.conditions:
        ci = "" if c.ci_low is None or c.ci_high is None else f"[{c.ci_low:.4g}, {c.ci_high:.4g}]"
        table.add_row(escape(c.condition), _num(c.estimate), ci, str(c.n), c.outcome,
                      "" if c.outcome != "undecided" else str(c.seeds_needed or "unbounded"))
    out.print(table)
    if len(v.looks) > 1:
        out.print("looks: " + "; ".join(f"{lk.seeds} seeds -> {lk.verdict}" for lk in v.looks), highlight=False)
    if v.note:
        out.print(f"note: {escape(v.note)}", highlight=False)
    if details:
        sides = Table(title="arms side by side (mean over seeds, t interval)")
        for col in ("setting", "arm", "metric", "mean", "CI", "n"):
            sides.add_column(col)
        for s in v.summaries:
            m = s.value
            ci = "" if m.ci_low is None else f"[{m.ci_low:.4g}, {m.ci_high:.4g}]"
            sides.add_row(s.setting, s.arm, s.metric, _num(m.value), ci, str(m.n))
        out.print(sides)
    for i, d in enumerate(v.departures, 1):
        out.print(f"departure {i}: the paper {escape(d.paper)}; we {escape(d.ours)} -- why: {escape(d.why)} -- "
                  f"effect: {escape(d.effect)}", highlight=False)
    more = f" (about {v.seeds_to_decide} seeds would decide it)" if v.seeds_to_decide else ""
    out.print(f"verdict: [bold]{v.verdict}[/]{more}", highlight=False)


def check_claims(claim_ids: Sequence[str], run_dir: Path, *, seeds: int | None = None, executor: str = "asyncio",
                 ray_address: str | None = None, options: Mapping[str, JsonValue] | None = None, progress: bool = False,
                 details: bool = False) -> list[Any]:
    """Check each claim (its arms as runs in `run_dir`), print and save each verdict."""
    from harness.claims.model import SeedPlan
    from harness.claims.registry import find_claim
    from harness.claims.runs import ClaimSuite, run_check
    from harness.claims.verdict import save_verdict
    from harness.executors import make_executor

    check_run_dir(run_dir)
    verdicts = []
    for claim_id in claim_ids:
        try:
            family, claim = find_claim(claim_id)
            if family.suite_of is None:
                how = family.check_command or f"harness {family.name} check"
                raise HarnessError(f"claim {claim.id}: family {family.name}'s checks are not SETTING/seedNNN cell "
                                   f"runs; run it with `{how}`")
            make_executor(executor, ray_address=ray_address)  # bad flags fail before anything runs
            plan = SeedPlan(looks=(seeds,), level=claim.plan.level) if seeds else None
            if plan is not None and plan != claim.plan:
                out.print(f"[yellow]{claim.id}: --seeds {seeds} is not the registered seed plan "
                          f"({claim.plan.text()}): an exploratory check, its criterion hash is not registered[/]")
            cs = ClaimSuite(claim=claim, suite=family.suite_of(claim), arm_option=family.arm_option,
                            options=options or {}, gate=family.gate)
            verdict = run_check(cs, run_dir, lambda: make_executor(executor, ray_address=ray_address), plan=plan,
                                registered=family.registered(claim) if plan is None or plan == claim.plan else None,
                                progress=progress, log=lambda line: out.print(escape(line), highlight=False))
        except HarnessError as exc:
            fail(str(exc), code=1)
        print_verdict(verdict, details)
        out.print(f"saved: {save_verdict(run_dir, verdict)}", highlight=False)
        verdicts.append(verdict)
    return verdicts


def recompute_verdict(run_ids: Sequence[str], run_dir: Path, details: bool = False) -> Any:
    """The verdict of a claim from its runs' records alone (no cell is recomputed)."""
    from harness.claims.registry import find_claim
    from harness.claims.runs import claim_of_runs, load_runs, verdict_from_runs

    try:
        runs = load_runs(run_dir, run_ids)
        stamps = {r.manifest.config.claim for r in runs}
        if None in stamps:
            bare = next(r.run_id for r in runs if r.manifest.config.claim is None)
            raise HarnessError(f"run {bare}: not started by a claim check (it records no claim); give a check's runs")
        claim_id = str(next(iter(stamps))).split("@", 1)[0]
        family, registered_claim = find_claim(claim_id)
        if family.suite_of is None:
            how = f"`{family.verdict_command}`" if family.verdict_command else "the family's own command"
            raise HarnessError(f"claim {claim_id}: its checks are not SETTING/seedNNN cell runs; recompute its verdict "
                               f"with {how}")
        claim, registered = claim_of_runs(registered_claim, runs)
        if not registered:
            out.print(f"[yellow]{claim.id}: these runs are an exploratory check ({claim.plan.text()}), not the "
                      f"registered plan ({registered_claim.plan.text()})[/]")
        verdict = verdict_from_runs(claim, runs, arm_option=family.arm_option, gate=family.gate,
                                    registered=family.registered(claim) if registered else None)
    except HarnessError as exc:
        fail(str(exc), code=1)
    print_verdict(verdict, details)
    return verdict


def print_claims_table(fmt: str, run_dirs: Sequence[Path], family: str | None, hint: str,
                       complete: bool = False) -> None:
    """The claims table of the saved verdicts (every family, or one), for `harness claims table` and
    the families' own `table` commands; `hint` says how to make a verdict when there is none.
    `complete`: a row for every registered claim too, "not run" where no verdict of its current
    criterion is saved (`harness.claims.table.complete`)."""
    from harness.claims.table import complete as complete_rows
    from harness.claims.table import registered_claims, summary_line, to_csv, to_html, to_markdown
    from harness.claims.verdict import load_verdicts

    if fmt not in ("md", "csv", "html"):
        fail(f"--format {fmt!r}: use md, csv or html")
    try:
        verdicts = [v for v in load_verdicts(list(run_dirs)) if family is None or v.family == family]
        rows = (complete_rows(verdicts, registered_claims(family)) if complete
                else sorted(verdicts, key=lambda v: v.label))
    except HarnessError as exc:
        fail(str(exc))
    if not rows:
        fail(f"no saved claim verdicts in {', '.join(map(str, run_dirs))}/claims: {hint}")
    print({"md": to_markdown, "csv": to_csv, "html": to_html}[fmt](rows), end="")
    if complete and fmt == "md":
        print("\n" + summary_line(rows))
