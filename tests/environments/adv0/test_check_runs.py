"""ADV-0's claim checks as ordinary runs (issue 35, item 2): a check on the toy world at its smallest
(C5: 2 arms x 2 seeds, 4 cells of ~0.1 s) leaves one `adv0-check` run per arm with one record per
cell; killed after its first cell and started again it computes only the missing cells and gives
the uninterrupted check's verdict; the verdict is a pure function of the records (`harness adv0
verdict RUN...`) and equals the one computed from the same numbers directly through
`harness.claims` (Newcombe's interval, `decide`, `combine`); bad input is one error naming the piece."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from environments.adv0.checks import checks
from environments.adv0.checks.cells import ARMS
from environments.adv0.checks.check_runs import SUITE, verdict_from_runs
from environments.adv0.checks.check_runs import run_check_as_runs as check_as_runs
from environments.adv0.checks.claims import CRITERIA_LOG, MIN_RATE_EFFECT, claim_family, registered_claim
from environments.adv0.commands import adv0_app
from harness.claims import combine, decide, load_verdicts
from harness.claims.prereg import load_log, unregistered
from harness.claims.runs import load_runs
from harness.errors import HarnessError
from harness.run_folder import RunIndex
from harness.stats import newcombe_difference

# The smallest scenario: the toy world, 1 training context, 1 round, 4 evaluation episodes per cell.
FLAGS = {"family": "toy", "episodes": 4, "seeds": 1, "rounds": 1}
SEEDS = 2


def check(run_dir: Path):
    return check_as_runs("C5", run_dir, replicates=SEEDS, log=lambda line: None, **FLAGS)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("fresh")
    finding, verdict = check(run_dir)
    return run_dir, finding, verdict


def cell_ids(run) -> list[str]:
    return [r.sample_id for r in run.records]


def test_one_run_per_arm_one_record_per_cell(uninterrupted):
    run_dir, finding, verdict = uninterrupted
    assert list(verdict.runs) == list(ARMS["C5"]) == ["adv0", "sage"]
    runs = load_runs(run_dir, [ids[0] for ids in verdict.runs.values()])
    for arm, run in zip(ARMS["C5"], runs):
        config = run.manifest.config
        assert run.manifest.status == "complete" and config.suite == SUITE
        assert config.claim == registered_claim("C5").stamp()
        assert config.suite_options["check"] == "C5" and config.suite_options.get("arm", "adv0") == arm
        assert cell_ids(run) == ["toy/seed000", "toy/seed001"] and all(r.status == "ok" for r in run.records)
        assert all(r.scores["eval_episodes"] == 4 for r in run.records)
    index = RunIndex(run_dir)  # what `harness runs` lists
    try:
        assert {row["run_id"] for row in index.runs()} == {ids[0] for ids in verdict.runs.values()}
    finally:
        index.close()
    assert finding.parts[0].n.endswith("/8 vs " + finding.parts[0].n.split(" vs ")[1]) and finding.parts[0].size == 8
    assert verdict.claim == "adv0.C5" and verdict.sentence and verdict.departures and len(verdict.criterion_hash) == 16


def test_the_verdict_is_the_one_harness_claims_gives_from_the_same_numbers(uninterrupted):
    run_dir, finding, verdict = uninterrupted
    runs = load_runs(run_dir, [ids[0] for ids in verdict.runs.values()])
    failures = {}
    for arm, run in zip(ARMS["C5"], runs):  # the pooled counts, read straight from the records
        episodes = [e for r in run.records for e in r.output["episodes"]["eval"]]
        k = sum(
            e["crashed"] and e["collision"] is not None and e["collision"]["fault"] in ("defender", "shared")
            for e in episodes
        )
        failures[arm] = (k, len(episodes))
    d, lo, hi = newcombe_difference(*failures["adv0"], *failures["sage"], 0.95)
    outcome = decide(lo, hi, ">", 0.0, MIN_RATE_EFFECT)
    [c] = verdict.conditions
    assert (c.estimate, c.ci_low, c.ci_high, c.outcome) == pytest.approx((d, lo, hi, outcome))
    assert verdict.verdict == combine([outcome]) == verdict.looks[0].verdict
    # ... and from the records alone, again, it is the same verdict (the wall time aside)
    again_finding, again = verdict_from_runs(runs)
    assert again.model_dump(exclude={"wall_s"}) == verdict.model_dump(exclude={"wall_s"}) and again.wall_s is None
    assert again_finding.parts == finding.parts
    # ... and the same as the check run in one process
    in_process = checks.run_check("C5", replicates=SEEDS, **FLAGS)
    assert in_process.parts == finding.parts and in_process.overrides == again_finding.overrides


class Killed(BaseException):
    """What a kill looks like to the runner: not an error it records on the sample."""


def test_a_killed_check_resumes_computing_only_the_missing_cells(uninterrupted, tmp_path, monkeypatch):
    played: list[tuple[str, int]] = []
    cell = checks.cell

    def dies_at_the_second(check, arm, seed, **flags):
        if played:
            raise Killed
        played.append((arm, seed))
        return cell(check, arm, seed, **flags)

    monkeypatch.setattr(checks, "cell", dies_at_the_second)
    with pytest.raises(Killed):
        check(tmp_path)
    [first] = [p for p in tmp_path.glob("*/samples.jsonl")]
    kept = first.read_text().splitlines()
    assert len(kept) == 1 and not (tmp_path / "claims").exists()

    def counted(check, arm, seed, **flags):
        played.append((arm, seed))
        return cell(check, arm, seed, **flags)

    monkeypatch.setattr(checks, "cell", counted)
    logged: list[str] = []
    finding, verdict = check_as_runs("C5", tmp_path, replicates=SEEDS, log=logged.append, **FLAGS)
    assert played == [("adv0", 0), ("adv0", 1), ("sage", 0), ("sage", 1)]  # each cell once, over both tries
    assert any("resuming" in line and "(1 cells done)" in line for line in logged)
    assert first.read_text().splitlines()[:1] == kept  # the finished cell's record is untouched
    _, _, fresh = uninterrupted
    same = ("verdict", "conditions", "looks", "seeds", "criterion_hash", "summaries")
    assert {k: getattr(verdict, k) for k in same} == {k: getattr(fresh, k) for k in same}
    played.clear()
    _, reused = check_as_runs("C5", tmp_path, replicates=SEEDS, log=logged.append, **FLAGS)
    assert played == [] and reused.runs == verdict.runs  # a finished check is its runs, reused


def test_verdict_command_recomputes_and_names_bad_input(uninterrupted, tmp_path):
    run_dir, _, verdict = uninterrupted
    ids = [i[0] for i in verdict.runs.values()]
    result = CliRunner().invoke(
        adv0_app, ["verdict", *ids, "--run-dir", str(run_dir), "--json", str(tmp_path / "f.json")]
    )
    assert result.exit_code == 0, result.output
    assert f"verdict: {verdict.verdict.upper()}" in result.output and json.loads((tmp_path / "f.json").read_text())
    [saved] = load_verdicts([run_dir])
    assert saved.verdict == verdict.verdict and saved.runs == verdict.runs
    short = CliRunner().invoke(adv0_app, ["verdict", ids[0], "--run-dir", str(run_dir)])
    assert short.exit_code == 2 and "no cell of arm 'sage'" in " ".join(short.output.split())
    runs = load_runs(run_dir, ids)

    def swapped(run, **config):
        manifest = run.manifest.model_copy(update={"config": run.manifest.config.model_copy(update=config)})
        return type(run)(run.run_id, manifest, run.records)

    opts = runs[1].manifest.config.suite_options
    cases = {
        "started under criterion adv0.C5@0123456789abcdef": swapped(runs[1], claim="adv0.C5@0123456789abcdef"),
        "not started for claim adv0.C5": swapped(runs[1], claim=None),
        "a adv0 run, not adv0-check": swapped(runs[1], suite="adv0", suite_options={}),
        "differ in size": swapped(runs[1], suite_options=opts | {"episodes": 5}),
        "lacks cell toy/seed001": type(runs[1])(runs[1].run_id, runs[1].manifest, runs[1].records[:1]),
    }
    for message, bad in cases.items():
        with pytest.raises(HarnessError, match=message):
            verdict_from_runs([runs[0], bad])


def test_the_criteria_did_not_move():
    """Running as cells changed no registered criterion: every hash is still the logged one."""
    family = claim_family()
    assert family.verdict_command.startswith("harness adv0 verdict")
    assert unregistered(family.claims, load_log(CRITERIA_LOG)) == []
