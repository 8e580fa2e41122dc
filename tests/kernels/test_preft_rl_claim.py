"""PreFT's RL claim (`preft.rl_parity`) as ordinary runs of the suite `preft.rl`: the protocol in the
criterion hash, the learn gate applied by the core at every look, the kept pre-runner runs still
recomputable, and -- on a random 2-layer model (`model=random-tiny`, 3 steps: a check of the
plumbing, not a result) -- a check whose arms are runs with records, whose verdict recomputed from
the records equals the printed one, and whose second invocation recomputes no cell.

The synthetic tables below are labelled: cells made up to exercise the decision logic."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from harness.claims import SeedPlan
from harness.claims.prereg import load_log, unregistered
from harness.claims.registry import ClaimFamily
from harness.claims.runs import load_runs, verdict_from_runs, verdict_from_table
from harness.stats import mean_interval
from preft.rl_check import (CLAIM, CRITERIA_LOG, KEPT, LEARN_MIN, MARGIN, PLAN, TRAINING, claim_family, kept_verdict,
                            learn_gate, rl_claim, suite_options)
from preft.rl_suite import RlOptions, RlSuite, cell_scores
from tests.conftest import REPO

NEAR_ZERO = [0.0, 0.01, -0.01, 0.005]
TINY = {"model": "random-tiny", "steps": 3, "prompts": 2, "group": 2}


def synthetic(diffs: dict[str, list[float]], gain: float | dict[str, float] = 0.5) -> dict:
    """Labelled synthetic cells: per setting, all-token's reward curve gains `gain` over its first
    step; preft's final reward differs from it by diffs[setting][seed] (4 steps: final = last)."""
    table = {}
    for setting, ds in diffs.items():
        g = gain[setting] if isinstance(gain, dict) else gain
        for seed, d in enumerate(ds):
            base = 0.1 + 0.01 * seed
            table[("all-token", setting, seed)] = cell_scores([base, base, base, base + g], 1.0)
            table[("preft", setting, seed)] = cell_scores([base, base, base, base + g + d], 1.0)
    return table


def verdict_of(diffs, gain=0.5, plan=PLAN):
    claim = rl_claim(tuple(int(s[1:]) for s in diffs), plan=plan)
    return verdict_from_table(claim, synthetic(diffs, gain), gate=learn_gate)


# ------------------------------------------------------------------ the criterion and its protocol
def test_protocol_holds_the_learn_gate_and_the_suites_default_training_settings():
    from preft.rl import RlConfig

    assert CLAIM.protocol == {"learn_min": LEARN_MIN, **TRAINING}
    defaults = RlConfig()
    assert {k: getattr(defaults, k) for k in TRAINING if k != "model"} == {k: v for k, v in TRAINING.items() if k != "model"}
    assert RlSuite.Options.model_validate(suite_options(CLAIM)) == RlOptions()  # the check's runs train at it
    assert rl_claim(steps=31).criterion_hash() != CLAIM.criterion_hash()
    assert CLAIM.model_copy(update={"protocol": CLAIM.protocol | {"learn_min": 0.05}}).criterion_hash() != CLAIM.criterion_hash()
    assert "learn_min = 0.1" in CLAIM.criterion_text() and "steps = 30" in CLAIM.criterion_text()
    with pytest.raises(ValueError, match="not a training setting"):
        rl_claim(stepz=3)


def test_criterion_hashes_are_in_the_log():
    log = load_log(CRITERIA_LOG)
    assert unregistered([CLAIM], log) == []
    [current] = [e for e in log if e.hash == CLAIM.criterion_hash()]
    assert "160" in current.results_seen and "protocol" in current.change
    # every criterion before the protocol was registered: 2, 4, 11, 20, 40 seeds, then the looks
    bare = CLAIM.model_copy(update={"protocol": {}})
    past = [bare.model_copy(update={"plan": SeedPlan(looks=(n,))}) for n in (2, 4, 11, 20, 40)] + [bare]
    assert unregistered(past, log) == []
    assert unregistered([rl_claim(plan=SeedPlan(looks=(4, 11, 20, 40, 80)))], log)  # a new look needs an entry
    assert unregistered([rl_claim(steps=60)], log)  # so does another training setting
    family = claim_family()
    assert family.suite_of is not None and family.suite_of(CLAIM) == "preft.rl" and family.gate is learn_gate


def test_the_claim_loads_without_torch():
    code = ("import sys; import preft.rl_check, preft.rl_suite; preft.rl_check.claim_family(); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# ------------------------------------------------------------------ the decision and the gate (synthetic)
def test_reproduced_when_every_rank_is_inside_the_margin():
    v = verdict_of({"r2": NEAR_ZERO, "r8": NEAR_ZERO})
    assert v.verdict == "reproduced" and [c.outcome for c in v.conditions] == ["holds", "holds"]
    assert v.seeds == 4 and v.criterion_hash == CLAIM.criterion_hash() and v.looks[0].gate is None


def test_interval_is_the_t_interval_of_the_paired_differences_at_the_looks_level():
    diffs = [-0.2, 0.1, -0.05, 0.0]
    v = verdict_of({"r2": diffs, "r8": NEAR_ZERO})
    mean, lo, hi = mean_interval(diffs, 1 - 0.05 / 4)  # Bonferroni over the plan's 4 looks
    c = v.conditions[0]
    assert (c.estimate, c.ci_low, c.ci_high, c.level) == pytest.approx((mean, lo, hi, 0.9875))
    assert c.outcome == "undecided" and v.verdict == "inconclusive" and v.seeds_to_decide


def test_not_reproduced_beyond_the_margin_inconclusive_across_it():
    v = verdict_of({"r2": [-0.4, -0.41, -0.39, -0.4], "r8": NEAR_ZERO})
    assert v.conditions[0].ci_high < -MARGIN and v.verdict == "not reproduced"
    v = verdict_of({"r2": [-0.3, 0.2, -0.1, 0.1], "r8": NEAR_ZERO})
    assert v.conditions[0].ci_low < -MARGIN < v.conditions[0].ci_high and v.verdict == "inconclusive"


def test_learn_gate_makes_any_verdict_inconclusive_when_all_token_did_not_learn():
    # parity everywhere, but all-token gained less than learn_min at every rank: says nothing
    v = verdict_of({"r2": NEAR_ZERO, "r8": NEAR_ZERO}, gain=LEARN_MIN / 2)
    assert [c.outcome for c in v.conditions] == ["holds", "holds"] and v.verdict == "inconclusive"
    assert "all-token did not learn" in v.looks[0].gate and "inconclusive by the gate" in v.note
    assert v.seeds_to_decide is None
    # even a failed rank is not "not reproduced" without learning
    assert verdict_of({"r2": [-0.4, -0.41, -0.39, -0.4], "r8": NEAR_ZERO}, gain=0.0).verdict == "inconclusive"
    # learning at one rank is enough
    assert verdict_of({"r2": NEAR_ZERO, "r8": NEAR_ZERO}, gain={"r2": 0.0, "r8": LEARN_MIN + 0.01}).verdict == "reproduced"
    # the gate reads the claim's protocol, not the module constant
    lax = rl_claim().model_copy(update={"protocol": CLAIM.protocol | {"learn_min": 0.0}})
    assert verdict_from_table(lax, synthetic({"r2": NEAR_ZERO, "r8": NEAR_ZERO}, 0.0), gate=learn_gate).verdict == "reproduced"


def test_looks_stop_at_the_first_that_decides_and_a_gated_look_goes_on():
    wide = [-0.2, 0.1, -0.05, 0.05]  # undecided at 4 seeds, inside the margin at 11
    v = verdict_of({"r2": wide + [0.0] * 7, "r8": NEAR_ZERO * 2 + [0.0] * 3})
    assert [(lk.seeds, lk.verdict) for lk in v.looks] == [(4, "inconclusive"), (11, "reproduced")]
    early = verdict_of({"r2": NEAR_ZERO * 2 + [-0.5] * 3, "r8": NEAR_ZERO * 2 + [-0.5] * 3})
    assert [lk.seeds for lk in early.looks] == [4] and early.verdict == "reproduced"  # later seeds do not override
    # the first 4 seeds did not learn: that look is gated, the 11-seed look (mean gain 0.32) decides
    table = synthetic({"r2": NEAR_ZERO * 2 + [0.0] * 3, "r8": NEAR_ZERO * 2 + [0.0] * 3},
                      gain=0.5)
    for s in range(4):
        for r in ("r2", "r8"):
            table[("all-token", r, s)] = cell_scores([0.1, 0.1], 1.0)
            table[("preft", r, s)] = cell_scores([0.1, 0.1], 1.0)
    gated = verdict_from_table(CLAIM, table, gate=learn_gate)
    assert [(lk.seeds, lk.verdict, lk.gate is not None) for lk in gated.looks] == [(4, "inconclusive", True),
                                                                                  (11, "reproduced", False)]
    assert gated.note == ""


def test_the_kept_runs_of_the_four_looks_recompute_their_verdict():
    """docs/data/preft-rl: the 160 runs trained before the check ran through the runner."""
    v = kept_verdict(KEPT)
    assert [(lk.seeds, lk.verdict) for lk in v.looks] == [(4, "inconclusive"), (11, "inconclusive"),
                                                          (20, "inconclusive"), (40, "reproduced")]
    r2, r8 = v.conditions
    assert (round(r2.estimate, 3), round(r2.ci_low, 3), round(r2.ci_high, 3)) == (-0.044, -0.095, 0.007)
    assert (round(r8.estimate, 3), round(r8.ci_low, 3), round(r8.ci_high, 3)) == (0.005, -0.091, 0.102)
    with pytest.raises(Exception, match="the claim is judged at"):
        kept_verdict(KEPT, rl_claim(steps=12))


def test_suite_options_cells_scores_and_leaderboard_refusal():
    from harness.suite import get_suite

    suite = get_suite("preft.rl", {"ranks": "1,4", "seeds": 2, "first_seed": 3, "solver": "all-token"})
    assert [s.id for s in suite.load_samples(None)] == ["r1/seed003", "r1/seed004", "r4/seed003", "r4/seed004"]
    with pytest.raises(Exception, match="distinct positive"):
        get_suite("preft.rl", {"ranks": "2,2"})
    assert cell_scores([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 0.8], 3.0) == pytest.approx(
        {"final_reward": 0.9, "first_reward": 0.0, "gain": 0.9, "wall_s": 3.0})
    assert RlSuite.leaderboard_refusal({"model": "random-tiny"}) and RlSuite.leaderboard_refusal({}) is None


# ------------------------------------------------------------------ real runs on a random tiny model
@pytest.fixture
def tiny_family(monkeypatch, tmp_path):
    """The claim at a tiny protocol and a one-look 2-seed plan, as the `preft` family's only claim."""
    import harness.claims.registry as registry

    claim = rl_claim((1, 2), plan=SeedPlan(looks=(2,)), **TINY)
    family = ClaimFamily(name="preft", log=tmp_path / "log.toml", claims=(claim,), suite_of=lambda c: "preft.rl",
                         gate=learn_gate)
    monkeypatch.setattr(registry, "families", lambda: {"preft": family})
    return claim


def test_a_check_is_runs_with_records_recomputable_and_reused(tiny_family, tmp_path, capsys):
    from harness.cli.claims_cmds import claims_app
    from harness.cli.kit import check_claims
    from harness.run_folder import RunIndex

    claim, run_dir = tiny_family, tmp_path / "runs"
    [printed] = check_claims([claim.id], run_dir, options=suite_options(claim))
    first = capsys.readouterr().out
    assert "verdict: inconclusive" in first and "note: inconclusive by the gate: all-token did not learn" in first
    run_ids = [r for ids in printed.runs.values() for r in ids]
    runs = load_runs(run_dir, run_ids)
    assert len(runs) == 2 and {r.manifest.config.claim for r in runs} == {claim.stamp()}
    records = [rec for run in runs for rec in run.records]
    assert sorted(rec.sample_id for rec in records) == sorted(["r1/seed000", "r1/seed001", "r2/seed000", "r2/seed001"] * 2)
    assert all({"final_reward", "gain", "wall_s"} <= set(rec.scores) and len(rec.output["rewards"]) == 3 for rec in records)
    index = RunIndex(run_dir)
    assert {r["status"] for r in index.runs("preft.rl")} == {"complete"}  # in `harness runs` and the leaderboard
    index.close()
    # the verdict from the records alone equals the printed one, and the gate is what made it inconclusive
    again = verdict_from_runs(claim, runs, gate=learn_gate)
    assert again.model_dump(exclude={"wall_s"}) == printed.model_dump(exclude={"wall_s"})
    assert printed.looks[0].gate and [c.outcome for c in printed.conditions] == ["holds", "holds"]
    assert verdict_from_runs(claim, runs).verdict == "reproduced"  # the would-be verdict, without the gate
    saved = json.loads((run_dir / "claims" / "preft.rl_parity.json").read_text())
    assert saved["verdict"] == "inconclusive" and saved["runs"] == printed.runs
    cli = CliRunner().invoke(claims_app, ["verdict", *run_ids, "--run-dir", str(run_dir)])
    assert cli.exit_code == 0, cli.output
    assert "verdict: inconclusive" in cli.output and "all-token did not learn" in cli.output
    # a second invocation reuses both finished runs: no cell is recomputed
    lines = {p: p.read_text() for p in run_dir.glob("*/samples.jsonl")}
    [second] = check_claims([claim.id], run_dir, options=suite_options(claim))
    out = capsys.readouterr().out
    assert out.count("reusing finished run") == 2 and second.runs == printed.runs
    assert {p: p.read_text() for p in run_dir.glob("*/samples.jsonl")} == lines


def test_preft_check_rl_is_the_kits_check_and_reads_the_kept_runs(tmp_path):
    from preft.commands import preft_app

    runner = CliRunner()
    bad = runner.invoke(preft_app, ["check", "rl", "--executor", "nope", "--run-dir", str(tmp_path)])
    assert bad.exit_code == 1 and "--executor 'nope'" in bad.output  # routed to check_claims, nothing trained
    kept = runner.invoke(preft_app, ["check", "rl", "--kept", str(KEPT)])
    assert kept.exit_code == 0, kept.output
    assert "verdict: reproduced" in kept.output and CLAIM.criterion_hash() in kept.output
