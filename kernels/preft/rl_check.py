"""`harness preft check rl`: does prefill-only LoRA approach all-token LoRA under RL?

The claim as data: `rl_claim(ranks)` (id `preft.rl_parity`); `CLAIM`, at the default ranks 2 and 8,
is the criterion registered in `criteria_log.toml` (the log says when it was written and which
results had been seen: the seeds were raised after inconclusive looks, 4 -> 11 -> 20 -> 40).
- final reward of a run = its mean sampled reward over the last quarter of steps;
- per rank, the paired difference d = final(preft) - final(all-token) at each seed (same seed:
  same init, same prompt order), with the Student-t interval of the mean of d over seeds
  (`harness.stats.mean_interval`, through the core's `evaluate`);
- each rank is decided by the core's one rule, `decide(lo, hi, ">=", -MARGIN)`: holds if the
  interval's lower end >= -MARGIN, fails if its upper end < -MARGIN, else undecided; `combine`:
  reproduced if every rank holds, not reproduced if any fails, else inconclusive;
- the learn gate: inconclusive, whatever the intervals say, if all-token did not learn (its mean
  over seeds of final reward minus first-step reward < LEARN_MIN at every rank): parity with no
  learning says nothing about the claim. The gate is outside the core's conditions (a gate never
  makes a claim fail), so `CLAIM.criterion_hash()` does not cover LEARN_MIN; `criterion_text`
  states it;
- seed plan: looks at 4, 11, 20 and 40 seeds (the looks that were taken), each at
  1 - 0.05 / 4 = 98.75% (Bonferroni over the looks), stopping at the first look that decides.
A seed count that is not a look of the plan is an exploratory one-look plan: its hash is not the
registered one, and the saved verdict says so.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from harness.claims import (CellTable, Claim, ClaimVerdict, Condition, Departure, Look, Outcome, SeedPlan, Summary,
                            Verdict, combine, evaluate, save_verdict)
from harness.claims.prereg import first_committed
from harness.claims.registry import ClaimFamily
from harness.stats import mean_metric

if TYPE_CHECKING:  # torch is imported only to train: the claim and its verdict load without it
    from preft.rl import RlConfig, RlResult

MARGIN = 0.10
LEARN_MIN = 0.10
RANKS = (2, 8)  # the registered ranks: r = 2 and 4r (the command's default --rank 2)
ARMS = ("preft", "all-token")
CRITERIA_LOG = Path(__file__).with_name("criteria_log.toml")
SENTENCE = "on RL prefill-only adapters nearly match ordinary ones"
PLAN = SeedPlan(looks=(4, 11, 20, 40), level=0.95)
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


def rl_claim(ranks: Sequence[int] = RANKS, plan: SeedPlan = PLAN) -> Claim:
    """The claim at these ranks: one condition per rank (settings `r2`, `r8`, ...)."""
    settings = tuple(f"r{r}" for r in ranks)
    return Claim(
        id="preft.rl_parity", sentence=SENTENCE,
        setting=(f"SmolLM2-135M, GRPO-style RL on few-shot addition, LoRA at ranks {', '.join(map(str, ranks))}; "
                 "final reward = mean sampled reward over the last quarter of steps; seeds paired (same init and "
                 "prompt order)"),
        arms=ARMS, settings=settings,
        conditions=[Condition(metric="final_reward", setting=s, arm="preft", versus="all-token", op=">=",
                              threshold=-MARGIN) for s in settings],
        plan=plan, departures=DEPARTURES,
        note=(f"Gate (not in the criterion hash): inconclusive if all-token's mean gain over its first-step reward is "
              f"below {LEARN_MIN} at every rank. The RL learning rate (1e-3) was chosen from probes on seeds 0-1, "
              "which the check also uses."))


CLAIM = rl_claim()


def claim_family() -> ClaimFamily:
    """PreFT's claims and their criterion log, for the core's registry (entry point `preft` under
    `harness.claims`; the check is `harness preft check rl`, not suite runs)."""
    return ClaimFamily(name="preft", log=CRITERIA_LOG, claims=(CLAIM,), suite_of=None)


def criterion_text(claim: Claim) -> str:
    return (f"{claim.criterion_text()}; per rank, Student-t interval over seeds of final reward (mean over the last "
            f"quarter of steps) preft - all-token; gate: inconclusive unless all-token's mean gain over its first-step "
            f"reward is >= {LEARN_MIN} at some rank")


def final_reward(rewards: Sequence[float]) -> float:
    tail = max(1, len(rewards) // 4)
    return sum(rewards[-tail:]) / tail


def cell_table(results: Sequence[RlResult]) -> CellTable:
    """(mode, rN, seed) -> the run's final reward and all-token-style gain over its first step."""
    table: dict[tuple[str, str, int], dict[str, float | None]] = {}
    for r in results:
        fin = final_reward(r.rewards)
        table[(r.config["mode"], f"r{r.config['rank']}", r.config["seed"])] = {
            "final_reward": fin, "gain": fin - r.rewards[0]}
    return table


def mean_gain(table: CellTable, setting: str, seeds: Sequence[int]) -> float:
    gains = [table[("all-token", setting, s)]["gain"] for s in seeds]
    return sum(g for g in gains if g is not None) / len(gains)


def gated(outcomes: Sequence[Outcome], all_token_gains: Sequence[float]) -> Verdict:
    """`combine`, behind the learn gate: inconclusive when all-token learned at no rank."""
    if not any(g >= LEARN_MIN for g in all_token_gains):
        return "inconclusive"
    return combine(outcomes)


def look(claim: Claim, table: CellTable, seeds: Sequence[int]) -> Look:
    level = claim.plan.look_level
    conditions = [evaluate(c, table, seeds, level) for c in claim.conditions]
    verdict = gated([c.outcome for c in conditions], [mean_gain(table, s, seeds) for s in claim.settings])
    return Look(seeds=len(seeds), level=level, verdict=verdict, conditions=conditions)


def plan_for(claim: Claim, seeds: int) -> tuple[Claim, str]:
    """The claim under which `seeds` seeds are judged: the registered plan when it is one of its looks
    (looks after it are not taken), else an exploratory one-look plan (a different hash)."""
    if seeds in claim.plan.looks:
        return claim, ""
    exploratory = claim.model_copy(update={"plan": SeedPlan(looks=(seeds,), level=claim.plan.level)})
    return exploratory, (f"EXPLORATORY: {seeds} seeds is not a look of the registered plan "
                         f"({', '.join(map(str, claim.plan.looks))}); its criterion hash is not registered. ")


def judge(results: Sequence[RlResult], ranks: Sequence[int], seeds: Sequence[int], *,
          wall_s: float | None = None) -> ClaimVerdict:
    """The verdict from the runs: the plan's looks up to len(seeds) replayed in order, stopping at the
    first that decides (a later look never overrides an earlier decision)."""
    claim, note = plan_for(rl_claim(ranks), len(seeds))
    table = cell_table(results)
    missing = [(m, s, seed) for m in ARMS for s in claim.settings for seed in seeds if (m, s, seed) not in table]
    if missing:
        raise ValueError(f"rl check: no run of {missing[0][0]} at {missing[0][1]}, seed {missing[0][2]} "
                         f"(and {len(missing) - 1} more)")
    looks = []
    for size in [n for n in claim.plan.looks if n <= len(seeds)]:
        looks.append(look(claim, table, list(seeds)[:size]))
        if looks[-1].verdict != "inconclusive":
            break
    final = looks[-1]
    used = list(seeds)[:final.seeds]
    learned = any(mean_gain(table, s, used) >= LEARN_MIN for s in claim.settings)
    needed = [c.seeds_needed for c in final.conditions if c.outcome == "undecided" and c.seeds_needed]
    if not learned:
        note += f"All-token did not learn (mean gain < {LEARN_MIN} at every rank): inconclusive by the gate. "
    registered = first_committed(CRITERIA_LOG, claim.criterion_hash()) if tuple(ranks) == RANKS else None
    if tuple(ranks) != RANKS:
        note += f"Ranks {tuple(ranks)} are not the registered {RANKS}: a different criterion. "
    shared = {json.dumps({k: v for k, v in r.config.items() if k not in ("mode", "rank", "seed")}, sort_keys=True)
              for r in results}
    setting = f"{claim.setting}; the runs' training settings: {' | '.join(sorted(shared))}"
    summaries = [Summary(arm=arm, setting=s, metric=metric,
                         value=mean_metric([table[(arm, s, seed)][metric] or 0.0 for seed in used], final.level))
                 for s in claim.settings for arm in ARMS for metric in ("final_reward", "gain")]
    return ClaimVerdict(
        claim=claim.id, sentence=claim.sentence, setting=setting, criterion=criterion_text(claim),
        criterion_hash=claim.criterion_hash(), registered=registered, verdict=final.verdict, seeds=final.seeds,
        conditions=final.conditions, looks=looks, departures=claim.departures,
        seeds_to_decide=max(needed) if final.verdict == "inconclusive" and learned and needed else None,
        summaries=summaries,
        runs={m: [f"{m}_r{r.config['rank']}_s{r.config['seed']}" for r in results if r.config["mode"] == m] for m in ARMS},
        cells_s=round(sum(r.seconds for r in results), 2), wall_s=wall_s, note=note + claim.note)


def summarise(verdict: ClaimVerdict, ranks: Sequence[int]) -> list[dict[str, Any]]:
    """One display row per rank, from the deciding look (numbers rounded; the verdict is not read from them)."""
    value = {(s.arm, s.setting, s.metric): s.value.value or 0.0 for s in verdict.summaries}
    rows = []
    for rank, cond in zip(ranks, verdict.conditions):
        s = f"r{rank}"
        rows.append({
            "rank": rank,
            "preft": round(value[("preft", s, "final_reward")], 3),
            "all_token": round(value[("all-token", s, "final_reward")], 3),
            "diff": round(cond.estimate or 0.0, 3),
            "ci_low": None if cond.ci_low is None else round(cond.ci_low, 3),
            "ci_high": None if cond.ci_high is None else round(cond.ci_high, 3),
            "level": round(cond.level, 4),
            "outcome": cond.outcome,
            "all_token_gain": round(value[("all-token", s, "gain")], 3),
        })
    return rows


def run_once(cfg: RlConfig, out: Path, model: Any, tokenizer: Any, log: Any) -> RlResult:
    """One training run, kept in out/runs/ as soon as it ends: a rerun with the same settings reuses
    it, so a check stopped midway (a kill, a busy machine) loses at most the run in flight."""
    from preft.rl import RlResult, train_rl

    path = out / "runs" / f"{cfg.mode}_r{cfg.rank}_s{cfg.seed}.json"
    if path.exists():
        kept = json.loads(path.read_text())
        if kept["config"] == vars(cfg):
            log(f"rl {cfg.mode} r{cfg.rank} seed {cfg.seed}: reused {path}")
            return RlResult(**kept)
    result = train_rl(cfg, model, tokenizer, log=log)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(result)) + "\n")
    tmp.replace(path)
    return result


def run_check(ranks: Sequence[int], seeds: int | None, out: Path, run_dir: Path, log: Callable[[str], Any] = print,
              **cfg: Any) -> dict[str, Any]:
    """Train look by look (only the new seeds at each look) until a look decides, or up to `seeds`
    seeds when given (a planned look: the plan's looks up to it; any other count: exploratory).
    Writes out/rl_check.json and out/rl_curves.csv; saves the verdict as RUN_DIR/claims/preft.rl_parity.json."""
    from harness.providers.local_weights import load_model
    from preft.rl import RlConfig

    t0 = time.perf_counter()
    claim = rl_claim(ranks)
    sizes = [n for n in claim.plan.looks if seeds is None or n <= seeds]
    if seeds is not None and seeds not in claim.plan.looks:
        sizes = [seeds]
    model, tokenizer = load_model()
    results: list[RlResult] = []
    done = 0
    verdict: ClaimVerdict | None = None
    for size in sizes:
        log(f"{claim.id}: look at {size} seeds")
        results += [run_once(RlConfig(mode=m, rank=r, seed=s, **cfg), out, model, tokenizer, log)
                    for r in ranks for s in range(done, size) for m in ARMS]
        done = size
        verdict = judge(results, ranks, list(range(size)), wall_s=round(time.perf_counter() - t0, 2))
        if verdict.verdict != "inconclusive":
            break
    assert verdict is not None  # at least one look
    saved = save_verdict(run_dir, verdict)
    payload = {
        "claim": verdict.claim,
        "sentence": verdict.sentence,
        "criterion": verdict.criterion,
        "criterion_hash": verdict.criterion_hash,
        "margin": MARGIN,
        "learn_min": LEARN_MIN,
        "rows": summarise(verdict, ranks),
        "verdict": verdict.verdict,
        "claim_verdict": str(saved),
        "runs": [asdict(r) for r in results],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "rl_check.json").write_text(json.dumps(payload, indent=2) + "\n")
    with open(out / "rl_curves.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["mode", "rank", "seed", "step", "reward"])
        for r in results:
            w.writerows(
                [r.config["mode"], r.config["rank"], r.config["seed"], i, f"{v:.4f}"] for i, v in enumerate(r.rewards)
            )
    return payload
