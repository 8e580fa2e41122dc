"""ADV-0's claims as the core registers them (`harness claims list`, the pre-registration test): one
`Claim` per check C1..C9, with the paper's sentence and departures (`paper.py`), the conditions the
check judges by, the size it is judged at (the seed plan's one look, in the check's unit) and the
rest of its default size as the protocol. This module is the one home of every threshold the checks
judge by: the check modules import them from here.

A check run at its default size is judged by its registered criterion (its hash and the date it
entered `criteria_log.toml` print beside the verdict); one run at another size, family or model is
exploratory -- the same conditions at the size it ran, a hash that is not registered, said so
beside the verdict (`verdicts.claim_of`). A check whose parts no longer match its registered
conditions is an error at its first run (`verdicts.claim_of`), so a threshold cannot move without an
amendment.

ADV-0's checks are ordinary runs of the suite `adv0-check`, one per arm, a cell per seed
(`check_runs.py`), each stamped with the claim's `stamp()`; their cells are not the core's paired
SETTING/seedNNN means (most conditions are rates over the pooled episodes), so the family names its
own check and verdict commands.

May import: `harness`, `environments.adv0.checks.paper`, `environments.adv0.checks.power`, `environments.adv0.sim.scenario`,
`environments.adv0.sim.geometry` (the fault rule's version, part of every highway check's protocol).
"""

from __future__ import annotations

from pathlib import Path

from environments.adv0.checks.paper import departures_for, sentence_for
from environments.adv0.checks.power import PowerPlan
from environments.adv0.sim.geometry import FAULT_RULE
from environments.adv0.sim.scenario import HELD_OUT_FAMILIES
from harness.claims import Claim, Condition, SeedPlan
from harness.claims.model import Scalar
from harness.claims.registry import ClaimFamily

CRITERIA_LOG = Path(__file__).with_name("criteria_log.toml")
LEVEL = 0.95

# ---------------------------------------------------------------- the thresholds the checks judge by
MIN_RATE_EFFECT = 0.05  # a failure-rate difference smaller than 5 points is not the effect the claims are about
ATTACKER_FAULT_LIMIT = 0.05  # C3: the attacker-at-fault share of ADV-0's crashes
C4_MIN_FAILURES = 5  # added after the first run (see the README): fewer failures leave the bootstrap degenerate
NORMAL_RETURN_LOSS = -0.05  # C6/C7: the adversarially trained defender may lose at most 5% of normal return
C1_RATIO_MAX = 0.5  # KL(q || q*) must at least halve the reference's KL(p0 || q*)
C2_BOUND_TOL = 1e-9  # V_tau - E_p0[J] <= 0 up to float rounding

# ---------------------------------------------------------------- the default sizes (the protocol)
# Each check's size comes from a power calculation (`power.py`) written here before the run it
# sizes (issue 41, item 3; the criterion log's session-22 amendments say what had been seen: the
# inconclusive looks at 30-48 episodes per arm). Its inputs and result are in the protocol, so the
# hash moves with them.
SEEN_BASELINES = (
    "0 defender failures in 120 episodes of random, scripted, CAT-like and SAGE-like (30 each, session 19-20)"
)
POWER: dict[str, PowerPlan] = {
    "C1": PowerPlan(
        kind="mean",
        effect=0.9531,
        sd=1.9069,
        seen="8 contexts: KL(q||q*) - 0.5 KL(p0||q*) per context, mean 0.953, sd 1.907 (one context 5.6)",
    ),
    "C2": PowerPlan(
        kind="mean",
        effect=MIN_RATE_EFFECT,
        sd=0.414,
        seen="16 held-out contexts: rise -0.314 [-0.534, -0.093] (t, 15 df): sd 0.414; planned at a rise "
        "of 0.05 of return, the smallest that matters",
    ),
    "C3": PowerPlan(kind="two_rates", effect=MIN_RATE_EFFECT, seen_k=0, seen_n=120, seen=SEEN_BASELINES),
    "C5": PowerPlan(kind="two_rates", effect=MIN_RATE_EFFECT, seen_k=0, seen_n=120, seen=SEEN_BASELINES),
    "C6": PowerPlan(
        kind="two_rates",
        effect=MIN_RATE_EFFECT,
        seen_k=11,
        seen_n=96,
        seen="held-out defender failures 6/48 (adv0-trained) and 5/48 (normally trained), session 19",
    ),
    "C7": PowerPlan(
        kind="two_rates",
        effect=MIN_RATE_EFFECT,
        seen_k=14,
        seen_n=48,
        seen="held-out defender failures 9/24 and 5/24 at a reduced size (1 seed, 1 round x 500 steps)",
    ),
    "C8": PowerPlan(
        kind="two_rates",
        effect=MIN_RATE_EFFECT,
        seen_k=6,
        seen_n=60,
        seen="defender failures against its own final planner 3/30 (iterated) and 3/30 (frozen), session 19",
    ),
    "C9": PowerPlan(
        kind="two_rates",
        effect=MIN_RATE_EFFECT,
        seen_k=4,
        seen_n=4,
        seen="highway, local/smollm2-135m: evaluation crashes 2/2 with and 2/2 without reflections (session 9)",
    ),
}
# C6/C7's normal-traffic return: Welch's interval of the relative change must clear the 5% loss when
# the true change is 0 (C6's look: 0.449 vs 0.399 over 16 episodes each, relative +0.124 [-0.143,
# +0.379] -> a per-episode sd of 0.144). C7's look (a DQN at a reduced size, base 0.038) gives no
# usable base: C7 plans its normal episodes at C6's figure.
NORMAL_RETURN_POWER = PowerPlan(
    kind="two_means",
    effect=-NORMAL_RETURN_LOSS,
    sd=0.144,
    base=0.399,
    seen="C6 session 19: normal return 0.449 vs 0.399, 16 episodes each, relative +0.124 [-0.143, +0.379]",
)
CONDITIONS_PER_ARM = 1 + len(
    HELD_OUT_FAMILIES
)  # held-out conditions: the training map's held-out manoeuvres + each family


def _per(total: int, parts: int) -> int:
    return -(-total // parts)


SIZES: dict[str, dict[str, Scalar]] = {
    "C1": {"contexts": POWER["C1"].n(), "rounds": 60},
    "C2": {"train_contexts": 8, "test_contexts": POWER["C2"].n(), "rounds": 2, "attacker_rounds": 15},
    "C3": {"episodes": POWER["C3"].n(), "contexts": 6, "rounds": 3, "k": 6},
    "C4": {"episodes": POWER["C3"].n(), "contexts": 6, "rounds": 3, "k": 6},
    "C5": {"episodes": POWER["C5"].n(), "contexts": 6, "rounds": 3, "k": 6},
    # episodes: normal-traffic episodes per arm and seed; held_out: episodes per held-out condition and seed
    "C6": {
        "episodes": NORMAL_RETURN_POWER.n(),
        "held_out": _per(POWER["C6"].n(), CONDITIONS_PER_ARM),
        "seeds": 1,
        "rounds": 2,
    },
    "C7": {
        "episodes": _per(NORMAL_RETURN_POWER.n(), 3),
        "held_out": _per(POWER["C7"].n(), 3 * CONDITIONS_PER_ARM),
        "seeds": 3,
        "rounds": 3,
        "dqn_steps": 3000,
    },
    "C8": {"episodes": POWER["C8"].n(), "contexts": 4, "rounds": 3},
    "C9": {"episodes": POWER["C9"].n(), "contexts": 4, "rounds": 2, "model": "local/smollm2-135m"},
}


def size(check: str, name: str) -> int:
    """One default size of a check (an int)."""
    value = SIZES[check][name]
    assert isinstance(value, int)
    return value


def held_out_episodes(per_condition: int, seeds: int) -> int:
    """Held-out episodes per arm in C6/C7: `per_condition` in each held-out condition (the training
    map under held-out manoeuvres and each held-out family), per seed."""
    return CONDITIONS_PER_ARM * per_condition * seeds


def power_protocol(check: str) -> dict[str, Scalar]:
    """The power calculation behind a check's size, as its protocol records it; a highway check's
    protocol also names the fault rule that decides who was at fault (`geometry.FAULT_RULE`), so a
    change of the rule moves its hash and needs an amendment (session 28: "v1" -> "v2")."""
    if check == "C4":  # a count of distinct clusters has no closed-form power: C4 runs at C3's size
        return {"power_size_from": "C3", "fault_rule": FAULT_RULE}
    out: dict[str, Scalar] = dict(POWER[check].protocol())
    if check in ("C6", "C7"):
        out |= {f"normal_{k}": v for k, v in NORMAL_RETURN_POWER.protocol().items()}
    if check not in TOY_CHECKS:
        out["fault_rule"] = FAULT_RULE
    return out


# ---------------------------------------------------------------- the conditions
def _rate_higher(metric: str, arm: str, versus: str, setting: str = "highway") -> Condition:
    """A rate difference arm - versus above 0 (Newcombe), refuted when it cannot reach MIN_RATE_EFFECT."""
    return Condition(
        metric=metric, setting=setting, arm=arm, versus=versus, op=">", threshold=0.0, refute_at=MIN_RATE_EFFECT
    )


DFR = "defender-failure rate"
CONDITIONS: dict[str, list[Condition]] = {
    "C1": [
        Condition(
            metric="KL(q||q*) / KL(p0||q*), ratio of means over contexts",
            setting="toy",
            arm="adv0",
            op="<=",
            threshold=C1_RATIO_MAX,
        )
    ],
    "C2": [
        Condition(
            metric="max V_tau - E_p0[J] over contexts and rounds",
            setting="toy",
            arm="adv0",
            op="<=",
            threshold=C2_BOUND_TOL,
        ),
        Condition(
            metric="V_tau(final) - V_tau(start), held-out contexts", setting="toy", arm="adv0", op=">", threshold=0.0
        ),
    ],
    "C3": [
        *(_rate_higher(DFR, "adv0", b) for b in ("random", "scripted", "cat")),
        Condition(
            metric="attacker-at-fault share of crashes",
            setting="highway",
            arm="adv0",
            op="<=",
            threshold=ATTACKER_FAULT_LIMIT,
        ),
    ],
    "C4": [
        Condition(
            metric=f"distinct defender-failure clusters (judged at >= {C4_MIN_FAILURES} failures)",
            setting="highway",
            arm="adv0",
            versus=b,
            op=">",
            threshold=0.0,
            refute_at=1.0,
        )
        for b in ("random", "scripted", "cat")
    ],
    "C5": [_rate_higher(DFR, "adv0", "sage")],
    "C6": [
        _rate_higher(f"held-out {DFR}", "normally-trained", "adv0-trained"),
        Condition(
            metric="normal-traffic return, relative change",
            setting="highway",
            arm="adv0-trained",
            versus="normally-trained",
            op=">=",
            threshold=NORMAL_RETURN_LOSS,
        ),
    ],
    "C8": [_rate_higher(f"{DFR} against its own final defender", "iterated", "frozen")],
    "C9": [_rate_higher("crash rate", "without-reflections", "with-reflections")],
}
CONDITIONS["C7"] = [c.model_copy() for c in CONDITIONS["C6"]]

# The plan's one look: the check's default size in its unit (what `seeds` counts in its verdict).
LOOKS: dict[str, int] = {
    "C1": size("C1", "contexts"),
    "C2": size("C2", "test_contexts"),
    "C3": size("C3", "episodes"),
    "C4": size("C4", "episodes"),
    "C5": size("C5", "episodes"),
    "C6": held_out_episodes(size("C6", "held_out"), size("C6", "seeds")),
    "C7": held_out_episodes(size("C7", "held_out"), size("C7", "seeds")),
    "C8": size("C8", "episodes"),
    "C9": size("C9", "episodes"),
}
UNITS = {
    "C1": "contexts",
    "C2": "held-out contexts",
    "C6": "held-out episodes per arm",
    "C7": "held-out episodes per arm",
}
SETTINGS = {"C1": "the toy world, exact q*", "C2": "the toy world, exact V_tau"}
TOY_CHECKS = ("C1", "C2")  # the toy world has no vehicles, so no fault rule


def registered_claim(check: str) -> Claim:
    conditions = CONDITIONS[check]
    arms = tuple(dict.fromkeys(a for c in conditions for a in (c.arm, c.versus) if a))
    world = conditions[0].setting
    return Claim(
        id=f"adv0.{check}",
        sentence=sentence_for(check),
        setting=SETTINGS.get(check, f"{world}, the check's default size"),
        arms=arms,
        settings=(world,),
        conditions=conditions,
        plan=SeedPlan(looks=(LOOKS[check],), level=LEVEL, unit=UNITS.get(check, "episodes per arm")),
        protocol=dict(SIZES[check]) | power_protocol(check),
        departures=departures_for(check),
    )


CLAIMS: tuple[Claim, ...] = tuple(registered_claim(c) for c in CONDITIONS if c in SIZES)


def claim_family() -> ClaimFamily:
    """ADV-0's claims and their criterion log, for the core's registry (entry point `adv0` under
    `harness.claims`; its checks are `harness adv0 check` -- runs of `adv0-check` -- and its verdicts
    `harness adv0 verdict RUN...`)."""
    return ClaimFamily(
        name="adv0",
        log=CRITERIA_LOG,
        claims=tuple(sorted(CLAIMS, key=lambda c: c.id)),
        suite_of=None,
        check_command="harness adv0 check CN --run-dir DIR",
        verdict_command="harness adv0 verdict RUN... --run-dir DIR",
    )
