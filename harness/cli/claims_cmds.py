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
                details: bool = typer.Option(False, "--details", help="Also print every arm's metrics.")) -> None:
    """Recompute a claim's verdict from its runs' records, without recomputing any cell."""
    recompute_verdict(run_ids, run_dir, details)


@claims_app.command("table")
def table_cmd(fmt: str = typer.Option("md", "--format", help="md, csv or html."),
              run_dir: list[Path] = typer.Option([Path("runs")], "--run-dir", help="Where checks saved (repeatable)."),
              family: Optional[str] = typer.Option(None, "--family", help="Only this family's claims.")) -> None:
    """The one claims table across families, from the saved verdicts."""
    print_claims_table(fmt, run_dir, family, "run `harness claims check CLAIM`")
