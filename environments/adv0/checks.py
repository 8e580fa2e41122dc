"""ADV-0's claim checks (`harness adv0 check NAME`, C1..C9): each check states the claim, the
criterion it is judged by (fixed in code before any run; the README lists them and the one
change made after a first run), the numbers with 95% CIs, and a verdict by the rules of
`verdicts.py`: reproduced, not reproduced, or inconclusive with the sample size that would decide it.

This module is the registry (`CHECKS`, `run_check`) and C1/C2, which wrap the toy world's exact
checks (`toy_checks.py`). C3-C5 pit attackers against one fixed, under-cautious IDM/MOBIL planner
on the same evaluation seeds (`checks_exposure.py`); C6-C9 run whole min-max loops and compare the
defenders or attackers they produce (`checks_loops.py`).

May import: `harness`, `environments.adv0`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from environments.adv0.checks_exposure import check_c3, check_c4, check_c5
from environments.adv0.checks_loops import check_c6, check_c7, check_c8, check_c9
from environments.adv0.loop import cpu_seconds
from environments.adv0.verdicts import Finding, Part, Verdict, fmt_metric, render, scaled_n
from harness.errors import HarnessError
from harness.records import Metric

__all__ = ["CHECKS", "Finding", "render", "run_check"]


# ---------------------------------------------------------------- the toy checks (toy_checks.py), as findings
def _toy_numbers(numbers: dict[str, Any]) -> dict[str, str]:
    out = {}
    for k, v in numbers.items():
        if isinstance(v, Metric):
            out[k] = fmt_metric(v)
        elif isinstance(v, float):
            out[k] = f"{v:.4g}"
        elif isinstance(v, list):
            out[k] = "[" + ", ".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in v) + "]"
        else:
            out[k] = str(v)
    return out


def check_c1(episodes: int | None = None, seeds: int | None = None, **_: object) -> Finding:
    from environments.adv0 import toy_checks

    n = seeds or len(toy_checks.C1_SEEDS)
    tc = toy_checks.check_c1(seeds=range(n))
    ratio: Metric = tc.numbers["ratio"]  # type: ignore[assignment]
    r = ratio.value if ratio.value is not None else float("nan")
    notes = [tc.note]
    needed = None
    if tc.verdict == "inconclusive":
        if r < toy_checks.C1_RATIO_MAX:
            needed = scaled_n(n, ratio, toy_checks.C1_RATIO_MAX - r)
        elif r >= 1.0:
            needed = scaled_n(n, ratio, r - 1.0)
        else:  # between the thresholds: more contexts narrow the CI but never decide
            notes.append(f"the ratio {r:.3f} lies between {toy_checks.C1_RATIO_MAX} and 1: the criterion leaves that "
                         "band inconclusive whatever the number of contexts")
    part = Part(what="mean KL(q||q*) / mean KL(p0||q*) over contexts", value=ratio.value, ci_low=ratio.ci_low,
                ci_high=ratio.ci_high, n=f"{n} contexts", verdict=tc.verdict, needed_n=needed, unit="contexts",
                rule=f"CI upper end < {toy_checks.C1_RATIO_MAX}: reproduced; CI lower end >= 1: not reproduced")
    return Finding.judge("C1", tc.claim, tc.criterion, [part], numbers=_toy_numbers(tc.numbers), notes=notes,
                         wall_s=tc.wall_s)


def check_c2(episodes: int | None = None, seeds: int | None = None, **_: object) -> Finding:
    from environments.adv0 import toy_checks

    train = range(seeds or len(toy_checks.C2_TRAIN_SEEDS))
    test = range(100, 100 + (episodes or len(toy_checks.C2_TEST_SEEDS)))
    tc = toy_checks.check_c2(train_seeds=train, test_seeds=test)
    rise: Metric = tc.numbers["rise"]  # type: ignore[assignment]
    gap_max = float(tc.numbers["v_minus_ep0j_max"])  # type: ignore[arg-type]
    bound = Part(what="max over contexts and defenders of V_tau - E_p0[J] (exact)", value=gap_max, ci_low=gap_max,
                 ci_high=gap_max, n="every context, every round", verdict="reproduced" if gap_max <= 1e-9 else "not reproduced",
                 rule="<= 0 (exact, by enumeration): reproduced")
    rise_verdict: Verdict = ("reproduced" if (rise.ci_low or 0) > 0 else "not reproduced" if (rise.ci_high or 0) < 0
                             else "inconclusive")
    raise_part = Part(what="mean rise of V_tau on held-out contexts after min-max training", value=rise.value,
                      ci_low=rise.ci_low, ci_high=rise.ci_high, n=f"{len(test)} contexts", verdict=rise_verdict,
                      needed_n=scaled_n(len(test), rise, max(abs(rise.value or 0), 1e-3)) if rise_verdict == "inconclusive" else None,
                      unit="held-out contexts", rule="CI > 0: reproduced; CI < 0: not reproduced")
    return Finding.judge("C2", tc.claim, tc.criterion, [bound, raise_part], numbers=_toy_numbers(tc.numbers),
                         notes=[tc.note, "toy world only: V_tau needs J over the whole space, which highway-env cannot enumerate"],
                         wall_s=tc.wall_s)


CHECKS: dict[str, tuple[Callable[..., Finding], str]] = {
    "C1": (check_c1, "quick: toy world, exact q* (< 1 min)"),
    "C2": (check_c2, "quick: toy world, V_tau <= E[J] and its rise under min-max"),
    "C3": (check_c3, "quick: failure exposure vs random/scripted/CAT, attacker-at-fault <= 5% (highway, minutes)"),
    "C4": (check_c4, "quick: failure diversity (distinct clusters) vs random/scripted/CAT (highway, minutes)"),
    "C5": (check_c5, "quick: aligned utility vs the open-loop surrogate (SAGE-like) (highway, minutes)"),
    "C6": (check_c6, "quick: the CEM-tuned planner on held-out families, normal return within 5% (highway, minutes)"),
    "C7": (check_c7, "long: the DQN's held-out generalisation, 3 seeds (about 1.5 CPU-hours; needs the checkpoint)"),
    "C8": (check_c8, "quick: iterated vs frozen attacker against an adapting planner (highway, minutes)"),
    "C9": (check_c9, "long: the LLM driver with vs without reflections from ADV-0's failures (model calls)"),
}


def run_check(name: str, *, episodes: int | None = None, seeds: int | None = None, family: str | None = None,
              model: str = "local/smollm2-135m", rounds: int | None = None, dqn_steps: int | None = None,
              dqn_checkpoint: str | None = None) -> Finding:
    """Run check `name` (C1..C9) and time it (wall and CPU-seconds of this process and its children).
    `rounds` (C3-C9), `dqn_steps` and `dqn_checkpoint` (C7) and `model` (C9) override a check's size."""
    key = name.upper()
    if key not in CHECKS:
        raise HarnessError(f"check {name!r} is unknown; use one of {', '.join(CHECKS)}")
    if family is not None and key in ("C1", "C2") and family != "toy":
        raise HarnessError(f"check {key} runs on the toy world only (it enumerates J); drop --family")
    sizes: dict[str, Any] = {k: v for k, v in (("rounds", rounds), ("dqn_steps", dqn_steps),
                                               ("dqn_checkpoint", dqn_checkpoint)) if v is not None}
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    finding = CHECKS[key][0](episodes=episodes, seeds=seeds, family=family, model=model, **sizes)
    return finding.model_copy(update={"wall_s": time.perf_counter() - wall0, "cpu_s": cpu_seconds() - cpu0})
