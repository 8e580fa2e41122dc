"""`harness claims`: every family's claims -- list them with their criterion hashes and
registration, check one (each arm an ordinary run), recompute a verdict from runs, print the one
claims table. The check and verdict bodies live in `harness.cli.kit`, which family command groups
(`harness papers check`) call too."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from harness.cli.kit import RUN_DIR, check_claims, out, print_claims_table, recompute_verdict

claims_app = typer.Typer(no_args_is_help=True, help="Papers' claims, every family: list, check, verdict, table.")


@claims_app.command("list")
def list_cmd() -> None:
    """Every family's claims: the paper's sentence, the criterion hash, when it was registered."""
    from harness.claims.prereg import load_log, unregistered
    from harness.claims.registry import families

    table = Table()
    for col in ("claim", "criterion hash", "registered (git)", "log entry", "departures", "paper's sentence"):
        table.add_column(col, overflow="fold")
    for family in families().values():
        log = load_log(family.log)
        missing = {line.split(":", 1)[0] for line in unregistered(family.claims, log)}
        for c in family.claims:
            table.add_row(c.id, c.criterion_hash(), family.registered(c) or "not committed",
                          "MISSING" if c.id in missing else "ok", str(len(c.departures)), escape(c.sentence))
    out.print(table)


@claims_app.command("check")
def check_cmd(
    claim: list[str] = typer.Argument(..., help="Claim ids (`harness claims list`)."),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, max=500, help="Exploratory: a one-look plan of N seeds "
                                        "instead of the registered plan (its hash is then not registered)."),
    run_dir: Path = RUN_DIR,
    executor: str = typer.Option("asyncio", "--executor", help="asyncio or ray."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --executor ray: HOST:PORT."),
    details: bool = typer.Option(False, "--details", help="Also print every arm's metrics side by side."),
) -> None:
    """Check claims: each arm is an ordinary run (resumable, cached, on any executor); the verdict
    is saved under RUN_DIR/claims/."""
    check_claims(claim, run_dir, seeds=seeds, executor=executor, ray_address=ray_address, details=details)


@claims_app.command("verdict")
def verdict_cmd(run_ids: list[str] = typer.Argument(..., help="The runs of one check (every arm, every look)."),
                run_dir: Path = RUN_DIR,
                details: bool = typer.Option(False, "--details", help="Also print every arm's metrics."),
                save: bool = typer.Option(False, "--save", help="Save it as RUN_DIR/claims/CLAIM.json (the claims "
                                          "table and the report read it; its wall time: none, recomputed).")) -> None:
    """Recompute a claim's verdict from its runs' records, without recomputing any cell."""
    from harness.claims.verdict import ClaimVerdict, save_verdict, verdict_path

    verdict = recompute_verdict(run_ids, run_dir, details)
    if not save:
        return
    path = verdict_path(run_dir, verdict.claim, verdict.subject)
    try:
        old = ClaimVerdict.model_validate_json(path.read_text()) if path.is_file() else None
    except ValueError:
        old = None  # not a verdict: replaced, as `load_verdicts` would refuse it
    if old is not None:  # the check's own save: say whether the records give it again, keep its wall time
        # The numbers and the decision; the prose beside them (sentence, setting, departures) may be reworded.
        numbers = {"claim", "subject", "criterion_hash", "verdict", "seeds", "conditions", "looks", "summaries", "runs"}
        same = old.model_dump(include=numbers) == verdict.model_dump(include=numbers)
        prose = old.model_dump(include={"sentence", "setting", "departures"}) != verdict.model_dump(
            include={"sentence", "setting", "departures"})
        out.print(f"the saved verdict ({old.verdict}, criterion {old.criterion_hash}) has "
                  f"{'the same' if same else 'DIFFERENT'} numbers{' (its prose was reworded since)' if prose else ''}: "
                  "replaced", highlight=False)
        if old.runs == verdict.runs and old.criterion_hash == verdict.criterion_hash:
            verdict = verdict.model_copy(update={"wall_s": old.wall_s})  # the same runs: the check's wall time
    out.print(f"saved: {save_verdict(run_dir, verdict)}", highlight=False)


@claims_app.command("table")
def table_cmd(fmt: str = typer.Option("md", "--format", help="md, csv or html."),
              run_dir: list[Path] = typer.Option([Path("runs")], "--run-dir", help="Where checks saved (repeatable)."),
              family: Optional[str] = typer.Option(None, "--family", help="Only this family's claims."),
              complete: bool = typer.Option(False, "--complete", help="A row for every registered claim: 'not run', "
                                            "with the size its plan needs and the command, where no verdict of its "
                                            "current criterion is saved in any --run-dir.")) -> None:
    """The one claims table across families, from the saved verdicts (a later --run-dir wins for the
    same claim)."""
    print_claims_table(fmt, run_dir, family, "run `harness claims check CLAIM`", complete=complete)
