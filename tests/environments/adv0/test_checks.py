"""The claim checks' verdict logic (`verdicts.py`, on the core's `decide`) on fixed numbers (reproduced / not
reproduced / inconclusive and the sample size it would need), one real exposure experiment on the toy world, and
the commands' bad input: one error line, never a traceback. The C1 case, the property that a verdict is what its
printed interval says, and the saved `ClaimVerdict`s: `test_verdicts.py`."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from environments.adv0.checks import checks, checks_exposure, checks_loops, verdicts
from environments.adv0.checks.checks_exposure import Arm, diversity_parts
from environments.adv0.commands import adv0_app
from environments.adv0.sim.scenario import Collision, EpisodeResult, ScenarioParams
import harness.claims
from harness.stats import newcombe_difference, welch_interval, wilson_interval


# ---------------------------------------------------------------- statistics on fixed numbers
def test_two_proportion_sample_size_matches_the_textbook_figure():
    assert verdicts.two_proportion_n(0.35, 0.25) == 329  # the design's "~330 episodes per arm"
    assert verdicts.two_proportion_n(0.5, 0.3) == 93
    assert verdicts.two_proportion_n(0.2, 0.2) is None


def test_wilson_and_newcombe_come_from_harness_stats():
    for gone in ("wilson", "newcombe_diff", "bootstrap_diff", "mean_metric"):
        assert not hasattr(verdicts, gone), gone  # the copies are deleted: one home for intervals
    assert verdicts.combine is harness.claims.combine and verdicts.decide is harness.claims.decide  # and for the rule
    lo, hi = wilson_interval(0, 20)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.1611, abs=1e-3)
    d, lo, hi = newcombe_difference(56, 70, 48, 80)  # Newcombe (1998) table II, example (a)
    assert d == pytest.approx(0.2, abs=1e-9)
    assert lo == pytest.approx(0.0524, abs=1e-3) and hi == pytest.approx(0.3339, abs=1e-3)


def higher(k1: int, n1: int, k2: int, n2: int, min_effect: float = 0.05) -> verdicts.Part:
    return verdicts.rate_higher("a - b", k1, n1, k2, n2, min_effect, metric="rate", arm="a", versus="b")


def test_rate_higher_reaches_each_verdict():
    clear = higher(40, 100, 10, 100)
    assert clear.verdict == "reproduced" and clear.ci_low > 0 and clear.needed_n is None
    reversed_ = higher(5, 200, 40, 200)
    assert reversed_.verdict == "not reproduced" and reversed_.ci_high < 0.05
    small = higher(4, 30, 2, 30)
    assert small.verdict == "inconclusive"
    # The needed size is the two-proportion n for the observed effect (larger than min_effect here).
    assert small.needed_n == verdicts.two_proportion_n(2 / 30 + (4 / 30 - 2 / 30), 2 / 30)
    # No effect observed: sized for the smallest effect that matters.
    none_seen = higher(1, 30, 1, 30)
    assert none_seen.verdict == "inconclusive"
    assert none_seen.needed_n == verdicts.two_proportion_n(1 / 30 + 0.05, 1 / 30)
    empty = higher(0, 0, 1, 30)
    assert empty.verdict == "inconclusive" and empty.ci_low is None


def at_most(k: int, n: int, limit: float = 0.05) -> verdicts.Part:
    return verdicts.rate_at_most("share", k, n, limit, metric="share", arm="a")


def test_rate_at_most_reaches_each_verdict():
    assert at_most(0, 200).verdict == "reproduced"
    assert at_most(30, 100).verdict == "not reproduced"
    few = at_most(0, 10)
    assert few.verdict == "inconclusive"
    assert few.needed_n == math.ceil(verdicts.Z_ALPHA**2 * 0.95 / 0.05) == 73  # Wilson's upper end at k = 0
    assert at_most(0, 0).needed_n == 73  # nothing seen yet: at least that many
    assert at_most(0, 0).ci_low == 0.0 and at_most(0, 0).ci_high == 1.0  # Wilson's [0, 1]: undecided by its interval
    assert at_most(0, few.needed_n).verdict == "reproduced"
    some = at_most(1, 30)
    assert some.verdict == "inconclusive" and some.needed_n == verdicts.one_proportion_n(1 / 30, 0.05)


def test_bootstrap_comparison_needs_30_episodes_per_arm_and_combination_is_the_cores():
    a, b = [1.0] * 30 + [0.0] * 10, [0.0] * 30 + [1.0] * 10
    mean = lambda x: float(x.mean())  # noqa: E731
    kw = dict(metric="m", arm="a", versus="b")
    assert verdicts.stat_higher("mean", a, b, mean, 0.1, **kw).verdict == "reproduced"
    assert verdicts.stat_higher("mean", b, a, mean, 0.1, **kw).verdict == "not reproduced"
    flat = verdicts.stat_higher("mean", [0.0, 1.0] * 20, [1.0, 0.0] * 20, mean, 0.1, **kw)
    assert flat.verdict == "inconclusive" and flat.needed_n and flat.needed_n > 40
    few = verdicts.stat_higher("mean", a[:20], b[:20], mean, 0.1, **kw)  # < 30 per arm: no interval judged
    assert few.verdict == "inconclusive" and few.ci_low is None and few.needed_n == 30 and few.value == 1.0
    rep = verdicts.judged("x", 1, 1, 1, op=">", threshold=0, method="m", n="1", size=1, metric="x",
                          arm="a")
    inc = verdicts.judged("x", 0, -1, 1, op=">", threshold=0, method="m", n="1", size=1, metric="x",
                          arm="a").model_copy(update={"needed_n": 400})
    inc2 = inc.model_copy(update={"needed_n": 90, "unit": "contexts"})
    nope = verdicts.judged("x", -1, -2, -1, op=">=", threshold=0, method="m", n="1", size=1, metric="x", arm="a")
    judge = lambda parts: verdicts.Finding.judge("CX", "c", "k", parts)  # noqa: E731
    assert (judge([rep, rep]).verdict, judge([rep, rep]).needed_n) == ("reproduced", None)
    f = judge([rep, inc, inc2])
    assert (f.verdict, f.needed_n, f.needed_unit) == ("inconclusive", 400, "episodes per arm")
    assert judge([inc, nope]).verdict == "not reproduced" and judge([inc, nope]).needed_n is None


def test_relative_return_bound_uses_welch():
    base = [0.8] * 20 + [0.7] * 20
    kw = dict(metric="r", arm="a", versus="b")
    ok = verdicts.relative_not_below("r", [0.79] * 20 + [0.69] * 20, base, -0.05, **kw)
    assert ok.verdict == "reproduced" and ok.method.startswith("Welch")
    d, lo, hi = welch_interval([0.79] * 20 + [0.69] * 20, base)
    assert (ok.value, ok.ci_low, ok.ci_high) == pytest.approx((d / 0.75, lo / 0.75, hi / 0.75))
    assert verdicts.relative_not_below("r", [0.5] * 40, base, -0.05, **kw).verdict == "not reproduced"
    assert verdicts.relative_not_below("r", [0.5] * 40, [0.0] * 40, -0.05, **kw).verdict == "inconclusive"


def failure(seed: int, manoeuvre: str | None, slot: int = 0) -> EpisodeResult:
    """An episode result; `manoeuvre` set: a defender-at-fault rear-end under that attack."""
    if manoeuvre is None:
        return EpisodeResult(family="toy", seed=seed, attack=None, defender="t", steps=12, duration_s=12, crashed=False)
    attack = ScenarioParams(slot=slot, manoeuvre=manoeuvre, trigger_s=1.0, intensity=1.0, hold_s=1.0, gap_m=5.0)
    hit = Collision(t=3.0, other="attacker", fault="defender", rule="rear-end: ego behind, closing", geometry=[])
    return EpisodeResult(family="toy", seed=seed, attack=attack, defender="t", steps=3, duration_s=3.0, crashed=True,
                         collision=hit)


def test_diversity_needs_enough_failures_before_it_can_say_not_reproduced():
    quiet = [failure(i, None) for i in range(30)]
    none_seen = diversity_parts(Arm(name="adv0", results=quiet), [Arm(name="b", results=quiet)])
    assert [p.verdict for p in none_seen] == ["inconclusive"]  # the bootstrap of nothing is [0, 0]: no verdict
    assert none_seen[0].ci_low is None and none_seen[0].ci_high is None  # no interval judged below 5 failures
    assert none_seen[0].needed_n == math.ceil(5 / wilson_interval(0, 30)[1])
    mans = ["cut_in", "cut_in_brake", "brake_check", "tailgate", "swerve_return"]
    diverse = [failure(i, mans[i % 5], slot=i % 3) for i in range(12)] + quiet[:18]
    same = [failure(i, "cut_in_brake") for i in range(12)] + quiet[:18]
    more = diversity_parts(Arm(name="adv0", results=diverse), [Arm(name="b", results=same)])
    assert more[0].verdict == "reproduced" and more[0].value == 12 - 1  # 12 distinct (manoeuvre, slot) vs 1
    fewer = diversity_parts(Arm(name="adv0", results=same), [Arm(name="b", results=diverse)])
    assert fewer[0].verdict == "not reproduced"


# ---------------------------------------------------------------- a real experiment, rendered
def test_exposure_on_the_toy_world_counts_rollouts_and_renders_a_verdict():
    arms = checks_exposure.exposure(["adv0", "scripted", "sage"], "toy", episodes=8, contexts=2, rounds=1, k=3)
    assert [a.name for a in arms] == ["adv0", "scripted", "sage"]
    assert [a.train_rollouts for a in arms] == [2 * (3 + 1), 0, 0]  # K + 1 reference draw per context; SAGE open loop
    assert all(len(a.results) == 8 for a in arms)
    assert [r.seed for r in arms[0].results] == [r.seed for r in arms[1].results]  # the same evaluation seeds
    parts = [verdicts.rate_higher("dfr", *arms[0].count("defender_failure"), *arms[1].count("defender_failure"), 0.05,
                                  metric="defender-failure rate", arm="adv0", versus="scripted")]
    f = verdicts.Finding.judge("CX", "claim", "criterion", parts, numbers=checks_exposure.arm_numbers(arms))
    text = verdicts.render(f)
    assert "verdict: " in text and "scripted: defender-failure rate" in text and f.verdict in text.lower()


# ---------------------------------------------------------------- bad input: one line, no traceback
def run_cli(*args: str):
    return CliRunner().invoke(adv0_app, list(args))


@pytest.mark.parametrize("args, needle", [
    (["train", "--defender", "pilot"], "--defender 'pilot' is unknown; use one of idm, dqn, llm"),
    (["train", "--attacker", "ghost"], "--attacker 'ghost' is unknown"),
    (["train", "--family", "mars"], "--family 'mars' is unknown; use one of highway, toy"),
    (["train", "--attacker", "random", "--ablation", "frozen"], "--ablation frozen applies to --attacker adv0 only"),
    (["train", "--defender", "dqn", "--family", "toy"], "--defender dqn needs --family highway"),
    (["train", "--defender", "llm", "--model", "nonsense"], "is not a model spec"),
    (["check", "C42"], "check 'C42' is unknown; use one of C1, C2"),
    (["check", "C1", "--family", "highway"], "check C1 runs on the toy world only"),
    (["check", "C7", "--family", "toy"], "check C7 (DQN) runs on --family highway only"),
    (["check", "C9", "--model", "nonsense"], "is not a model spec"),
])
def test_bad_input_is_one_error_line(args, needle, tmp_path):
    result = run_cli(*args, *(["--run-dir", str(tmp_path)] if args[0] == "train" else []))
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert needle in text and "error:" in text and "Traceback" not in text
    assert not list(tmp_path.glob("adv0-train/*")) if args[0] == "train" else True  # no run folder for bad input


def test_missing_dqn_checkpoint_names_the_pretrain_command(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    result = run_cli("train", "--defender", "dqn", "--run-dir", str(tmp_path))
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "harness adv0 pretrain-dqn --steps 20000" in text and "Traceback" not in text
    assert not (tmp_path / "adv0-train").exists()


def test_c7_without_its_checkpoint_names_the_pretrain_command_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    result = run_cli("check", "C7", "--dqn-checkpoint", str(tmp_path / "dqn-highway-500steps-seed0.zip"))
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "harness adv0 pretrain-dqn --steps 500" in text and "Traceback" not in text


def test_resume_of_an_unknown_run_is_one_error_line(tmp_path):
    result = run_cli("train", "--resume", "adv0-nope", "--run-dir", str(tmp_path))
    assert result.exit_code == 2 and "--resume adv0-nope: no ADV-0 training run" in " ".join(result.output.split())


# ---------------------------------------------------------------- C9 with a scripted model (our own logic)
class LessonHeedingModel:
    """Drives FASTER until a lesson is in its prompt, then SLOWER; asked for a lesson, gives one."""

    name = "scripted/heeds-lessons"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, messages, config):
        from harness.providers.base import ModelOutput

        self.calls += 1
        if "lesson" in (config.json_schema or {}).get("properties", {}):
            return ModelOutput(text='{"lesson": "Slow down when a car ahead may brake."}')
        heeded = "Lessons from your earlier crashes" in messages[0]["content"]
        return ModelOutput(text='{"action": "%s"}' % ("SLOWER" if heeded else "FASTER"))

    async def aclose(self) -> None:
        pass


def counted(text: str) -> tuple[int, int]:
    """(k, n) of a `fmt_rate` string: '0.250 [0.046, 0.699] (1/4)'."""
    k, n = text.rsplit("(", 1)[1].rstrip(")").split("/")
    return int(k), int(n)


def test_c9_runs_end_to_end_and_sees_the_effect_of_a_lesson_heeding_driver(monkeypatch):
    import harness.providers

    model = LessonHeedingModel()
    monkeypatch.setattr(harness.providers, "load_model", lambda spec: model)
    f = checks.run_check("C9", episodes=5, seeds=1, family="toy", rounds=1)
    nums = f.numbers
    assert nums["training: driver episodes (attacker rollouts + reflection scenarios)"] == f"{checks_loops.C9_K + 1} + 2"
    crashes, lessons = map(int, nums["training: crashes / lessons written per round"].split("/"))
    assert crashes >= lessons > 0 and int(nums["lessons in memory"]) == lessons  # one round, a lesson per own crash
    # Asked in the constrained form, the lesson is the lesson (in free form it once stored an action).
    assert "note: lesson: Slow down when a car ahead may brake." in checks.render(f)
    k_with, n_with = counted(nums["with reflections: crash rate"])
    k_without, n_without = counted(nums["without: crash rate"])
    assert n_with == n_without == 5 and k_without > k_with  # the heeding driver slows down and crashes less
    assert int(nums["evaluation episodes whose crash outcome differs between the arms"]) >= k_without - k_with
    assert f.parts[0].value == pytest.approx((k_without - k_with) / 5) and f.parts[0].n == f"{k_without}/5 vs {k_with}/5"
    assert model.calls >= int(nums["evaluation driving steps (model calls, both arms)"])
    assert checks_loops.c9_driver_episodes(5, 1, 1) == (checks_loops.C9_K + 1) + 2 + 10


def test_entropy_of_one_cluster_is_plus_zero_and_prints_without_a_sign():
    import numpy as np

    from environments.adv0.metrics import entropy
    from harness.cli.kit import fmt

    one = entropy(np.array([4, 0, 0]))
    assert one == 0.0 and math.copysign(1.0, one) == 1.0  # -0.0 printed as "-0.000" in a run's CI
    assert checks_exposure.cluster_entropy(np.array(["cut_in/lateral", "cut_in/lateral"], dtype=object)) == 0.0
    assert entropy(np.array([0, 0])) is None
    assert abs(entropy(np.array([1, 1])) - math.log(2)) < 1e-12
    assert fmt(-1e-17) == "0.000" and fmt(-0.0) == "0.000" and fmt(-0.0004) == "0.000"
    assert fmt(-0.0006) == "-0.001" and fmt(None) == "n/a"
