"""PreFT's RL claim, `preft.rl_parity`: does prefill-only LoRA approach all-token LoRA under RL?

The claim as data: `rl_claim(ranks, plan, **train)`; `CLAIM` (ranks 2 and 8, the seed plan below,
the suite's default training settings) is the criterion registered in `criteria_log.toml` (the log
says when each version was written and which results had been seen: the seeds were raised after
inconclusive looks, 4 -> 11 -> 20 -> 40).
- The check is ordinary runs of the suite `preft.rl` (`rl_suite.py`): each arm (`solver` preft or
  all-token) at each look is one run whose cells `r{rank}/seed{NNN}` are RL trainings.
  `harness claims check preft.rl_parity` (or `harness preft check rl`) runs them through the core's
  `run_check` -- a finished run is reused, an unfinished one resumed, `--executor ray` spreads the
  cells -- and `harness claims verdict RUN...` recomputes the verdict from the records alone.
- final reward of a run = its mean sampled reward over the last quarter of steps (the suite's scorer);
- per rank, the paired difference d = final(preft) - final(all-token) at each seed (same seed: same
  init, same prompt order), with the Student-t interval of the mean of d over seeds; each rank
  decided by the core's one rule, `decide(lo, hi, ">=", -MARGIN)`; `combine`: reproduced if every
  rank holds, not reproduced if any fails, else inconclusive;
- the learn gate (`learn_gate`, the family's `ClaimFamily.gate`, applied by the core at every look,
  in a check and from records alike): inconclusive, whatever the intervals say, if all-token did not
  learn (its mean over seeds of final reward minus first-step reward < `learn_min` at every rank):
  parity with no learning says nothing about the claim;
- the protocol (`Claim.protocol`, in the criterion hash): `learn_min` and the training settings the
  runs are judged at (model, steps, prompts, group, lr, temperature, std_norm) -- the suite's
  defaults, so a check started with no options trains at them and changing a default is an
  amendment;
- seed plan: looks at 4, 11, 20 and 40 seeds (the looks that were taken), each at
  1 - 0.05 / 4 = 98.75% (Bonferroni over the looks), stopping at the first look that decides.
`--seeds N` is an exploratory one-look plan: its hash is not the registered one.

The 160 runs kept before the check ran through the runner (`docs/data/preft-rl/rl_check.json`: each
run's settings and reward curve; no run records, so `harness claims verdict` cannot read them) stay
recomputable: `kept_verdict` scores them with the suite's scorer (`cell_scores`) and decides them
with the core's `verdict_from_table` and the same gate (`harness preft check rl --kept FILE`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from harness.claims import CellTable, Claim, ClaimVerdict, Condition, Departure, SeedPlan
from harness.claims.model import Scalar
from harness.claims.registry import ClaimFamily
from harness.errors import HarnessError
from preft.rl_suite import ARMS, EMBEDDED, RlOptions, cell_scores, training

MARGIN = 0.10
LEARN_MIN = 0.10
RANKS = (2, 8)  # the registered ranks: r = 2 and 4r
SUITE = "preft.rl"
CRITERIA_LOG = Path(__file__).with_name("criteria_log.toml")
KEPT = Path(__file__).resolve().parents[2] / "docs" / "data" / "preft-rl" / "rl_check.json"
SENTENCE = "on RL prefill-only adapters nearly match ordinary ones"
PLAN = SeedPlan(looks=(4, 11, 20, 40), level=0.95)
TRAINING = training(RlOptions())  # the suite's defaults: the settings the criterion is judged at
DEPARTURES = [
    Departure(paper="RL of adapters on the paper's models (its serving results are on Llama 3.1 70B)",
              ours="SmolLM2-135M-Instruct, the harness's embedded model (its GGUF dequantized to fp32), on the CPU",
              why="a CPU-only, offline machine: the embedded model is the one that can be trained here, 160 runs of "
                  "30 steps in hours",
              effect="RL dynamics of a 135M model need not carry over to large ones; a small model may leave less "
                     "for the decode positions to add"),
    Departure(paper="the paper's RL tasks",
              ours="one task built in code: few-shot two-digit addition (450 prompts), reward 1 iff the sampled "
                   "completion up to its first newline is the sum; temperature 0.7",
              why="a verifiable reward the 135M model sometimes earns at the start (~12% at 0.7), so GRPO groups "
                  "carry signal (a first task was never rewarded and nothing learned)",
              effect="the completion is 2-3 tokens and a newline: few decode positions, which is where the modes "
                     "differ, so this task favours parity; a long-completion task could show a larger gap"),
    Departure(paper="the paper's RL algorithm and budget",
              ours="GRPO-style, on-policy: 4 prompts x 6 samples a step, advantage = reward - group mean, one AdamW "
                   "update a step (lr 1e-3, no KL, no clipping), 30 steps",
              why="the smallest RL loop that learns on this task within minutes a run on the CPU (lr 8e-3 collapsed)",
              effect="30 steps is early training (final rewards ~0.6-0.7): parity early need not hold at convergence"),
    Departure(paper="prefill-only LoRA and ReFT adapters against ordinary ones, at the paper's ranks",
              ours="LoRA only, on all seven projections of every layer, at ranks 2 and 8 (r and 4r)",
              why="the RL loop is written for LoRA; two ranks show whether a larger rank closes a gap, as the "
                  "paper says for SFT",
              effect="says nothing of ReFT under RL; at rank 2 prefill-only trails a little"),
    Departure(paper="'nearly match' (no number in the abstract)",
              ours=f"non-inferiority within {MARGIN} reward: per rank the interval of the paired difference must lie "
                   f"above -{MARGIN}; final reward = mean over the last quarter of steps; all-token must have learned",
              why="a claim of near-parity needs a margin to be checkable; 0.10 was fixed in code before the first run",
              effect="the margin decides the verdict: 0.10 of a reward near 0.7 is generous, a tighter one would "
                     "leave rank 2 undecided or failed"),
]


def rl_claim(ranks: Sequence[int] = RANKS, plan: SeedPlan = PLAN, **train: Scalar) -> Claim:
    """The claim at these ranks (settings `r2`, `r8`, ...; one condition each), judged at the
    suite's default training settings updated by `train` (other settings: another criterion)."""
    unknown = sorted(set(train) - set(TRAINING))
    if unknown:
        raise ValueError(f"rl_claim: {unknown[0]!r} is not a training setting ({', '.join(TRAINING)})")
    settings = tuple(f"r{r}" for r in ranks)
    protocol: dict[str, Scalar] = {"learn_min": LEARN_MIN, **TRAINING, **train}
    return Claim(
        id="preft.rl_parity", sentence=SENTENCE,
        setting=(f"SmolLM2-135M, GRPO-style RL on few-shot addition, LoRA at ranks {', '.join(map(str, ranks))}; "
                 "final reward = mean sampled reward over the last quarter of steps; seeds paired (same init and "
                 "prompt order); each arm a run of the suite preft.rl"),
        arms=ARMS, settings=settings,
        conditions=[Condition(metric="final_reward", setting=s, arm="preft", versus="all-token", op=">=",
                              threshold=-MARGIN) for s in settings],
        plan=plan, protocol=protocol, departures=DEPARTURES,
        note=("Gate (protocol learn_min): inconclusive if all-token's mean gain over its first-step reward is below "
              "learn_min at every rank. The RL learning rate (1e-3) was chosen from probes on seeds 0-1, which the "
              "check also uses."))


CLAIM = rl_claim()


def suite_options(claim: Claim) -> dict[str, Scalar | list[int]]:
    """The `preft.rl` options every arm of the claim's check runs with: its ranks and training settings."""
    return {"ranks": [int(s.removeprefix("r")) for s in claim.settings],
            **{k: v for k, v in claim.protocol.items() if k in TRAINING}}


def learn_gate(claim: Claim, table: CellTable, seeds: Sequence[int]) -> str | None:
    """None when all-token learned at some rank (mean gain over seeds >= the protocol's learn_min),
    else why the look cannot decide."""
    learn_min = float(claim.protocol["learn_min"])
    gains: dict[str, float | None] = {}
    for setting in claim.settings:
        known = [g for s in seeds if (g := table[("all-token", setting, s)].get("gain")) is not None]
        gains[setting] = sum(known) / len(known) if known else None
    if any(g is not None and g >= learn_min for g in gains.values()):
        return None
    shown = ", ".join(f"{s} {'n/a' if g is None else f'{g:+.3f}'}" for s, g in gains.items())
    return (f"all-token did not learn: its mean gain over its first-step reward is below {learn_min:g} at every rank "
            f"({shown}); parity without learning says nothing of the claim")


def claim_family() -> ClaimFamily:
    """PreFT's claims and their criterion log, for the core's registry (entry point `preft` under
    `harness.claims`): the check runs as suite runs of `preft.rl`, behind the learn gate."""
    return ClaimFamily(name="preft", log=CRITERIA_LOG, claims=(CLAIM,), suite_of=lambda c: SUITE, arm_option="solver",
                       gate=learn_gate)


def kept_verdict(path: Path = KEPT, claim: Claim = CLAIM) -> ClaimVerdict:
    """The verdict of RL runs kept before the check ran through the runner (an `rl_check.json` of
    `harness preft check rl --out DIR`, as in docs/data/preft-rl: a list of runs, each its RlConfig,
    reward curve and seconds), scored by the suite's scorer and decided by the core with the same
    gate. Every run must have been trained at the claim's protocol (those runs were all on the
    embedded model, which they do not record)."""
    from harness.claims.runs import verdict_from_table

    try:
        runs = json.loads(path.read_text())["runs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{path}: not a kept rl_check.json with a 'runs' list ({exc})") from None
    expected = {k: v for k, v in claim.protocol.items() if k in TRAINING} | {"model": EMBEDDED}
    table: dict[tuple[str, str, int], dict[str, float | None]] = {}
    for run in runs:
        cfg = dict(run["config"])
        trained = {k: cfg.get(k, EMBEDDED if k == "model" else None) for k in expected}
        if trained != expected:
            raise HarnessError(f"{path}: run {cfg.get('mode')} r{cfg.get('rank')} seed {cfg.get('seed')} was trained at "
                               f"{trained}, the claim is judged at {expected}")
        table[(str(cfg["mode"]), f"r{cfg['rank']}", int(cfg["seed"]))] = cell_scores(run["rewards"], run["seconds"])
    return verdict_from_table(claim, table, gate=learn_gate, registered=claim_family().registered(claim),
                              runs={arm: [str(path)] for arm in ARMS},
                              cells_s=sum(float(r["seconds"]) for r in runs))
