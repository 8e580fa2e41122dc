"""The one claims table, complete (issue 35, item 6): a row for every registered claim -- its saved
verdict under the current criterion, else "not run" with the size its plan needs and the command
that runs it (naming a saved verdict of an older criterion, never showing it as the claim's);
verdicts no family registers kept; the same rows in Markdown, CSV and HTML; and
`harness claims table --complete` over several run dirs."""

from __future__ import annotations

import csv
import io

from typer.testing import CliRunner

from harness.claims import Claim, Condition, SeedPlan, save_verdict
from harness.claims.runs import verdict_from_table
from harness.claims.table import NotRun, Registered, complete, summary_line, to_csv, to_html, to_markdown
from harness.cli.claims_cmds import claims_app


def claim(name: str, threshold: float = 0.1, looks: tuple[int, ...] = (3,)) -> Claim:
    return Claim(
        id=f"toy.{name}",
        sentence=f"{name}: a beats b",
        setting="toy",
        arms=("a", "b"),
        settings=("s",),
        conditions=[Condition(metric="m", setting="s", arm="a", versus="b", op=">=", threshold=threshold)],
        plan=SeedPlan(looks=looks, unit="episodes per arm"),
    )


def verdict(c: Claim, gain: float = 0.5):
    table = {
        (arm, "s", seed): {"m": (gain if arm == "a" else 0.0) + 0.01 * seed} for arm in ("a", "b") for seed in range(3)
    }
    return verdict_from_table(c, table, registered="2026-12-06", wall_s=2.0)


def test_every_registered_claim_has_a_row_and_an_old_criterion_is_not_shown_as_current():
    run, moved, never = claim("run"), claim("moved"), claim("never", looks=(30, 1074))
    old = verdict(claim("moved", threshold=0.2))  # saved under the criterion before its amendment
    stray = verdict(claim("stray"))  # no family registers it (a removed claim, a test's)
    registered = [Registered(c, "2026-12-07", f"harness x check {c.id} --run-dir DIR") for c in (run, moved, never)]
    rows = complete([verdict(run), old, stray], registered)

    assert [r.label for r in rows] == ["toy.moved", "toy.never", "toy.run", "toy.stray"]
    assert [r.verdict for r in rows] == ["not run", "not run", "reproduced", "reproduced"]
    gone, missing = rows[0], rows[1]
    assert isinstance(gone, NotRun) and old.criterion_hash in gone.why and moved.criterion_hash() != old.criterion_hash
    assert isinstance(missing, NotRun) and missing.why == "no saved verdict"

    md = to_markdown(rows).splitlines()
    assert len(md) == 2 + 4
    assert (
        "| toy.never | never: a beats b | not run (no saved verdict): needs 1,074 episodes per arm, command "
        f"`harness x check toy.never --run-dir DIR` |  | 0 | {never.criterion_hash()} (2026-12-07) | 0 |  |"
    ) == md[3]
    assert f"| {old.criterion_hash} (reproduced)" not in md[2] and run.criterion_hash() in md[4]
    table = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert [r["verdict_code"] for r in table] == ["not run", "not run", "reproduced", "reproduced"]
    assert table[1]["criterion"] == never.criterion_text() and table[2]["wall s"] == "2"
    html = to_html(rows)
    assert html.count('data-verdict="not run"') == 2 and html.count("<details>") == 2  # details: verdicts only
    assert summary_line(rows) == "4 claims: 2 reproduced, 0 not reproduced, 0 inconclusive, 2 not run"


def test_complete_table_over_several_run_dirs_names_every_registered_claim(tmp_path, monkeypatch):
    from harness.claims import registry
    from harness.claims.registry import families

    # The registration date is `git log -S` per claim (tested in test_claims_prereg): seconds each here.
    monkeypatch.setattr(registry, "first_committed", lambda log, criterion_hash: "2026-12-06")

    first, second = tmp_path / "a", tmp_path / "b"
    papers = families()["papers"]
    done = papers.claims[0]
    saved = verdict(claim("x")).model_copy(update={"claim": done.id, "criterion_hash": done.criterion_hash()})
    save_verdict(first, saved.model_copy(update={"verdict": "inconclusive"}))
    save_verdict(second, saved)  # a later --run-dir wins for the same claim
    made = CliRunner().invoke(
        claims_app, ["table", "--complete", "--format", "csv", "--run-dir", str(first), "--run-dir", str(second)]
    )
    assert made.exit_code == 0, made.output
    rows = {r["claim"]: r for r in csv.DictReader(io.StringIO(made.stdout))}
    assert set(rows) == {c.id for f in families().values() for c in f.claims}
    assert rows[done.id]["verdict_code"] == "reproduced"
    c6 = rows["adv0.C6"]
    assert c6["verdict_code"] == "not run" and "harness adv0 check C6 --run-dir DIR" in c6["verdict"]
    assert "episodes per arm" in c6["verdict"]
    assert c6["criterion hash (registered)"] == f"{families()['adv0'].claim('C6').criterion_hash()} (2026-12-06)"
