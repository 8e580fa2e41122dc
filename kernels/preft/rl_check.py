"""`harness preft check rl`: does prefill-only LoRA approach all-token LoRA under RL?

The criterion is fixed here, before any run, and is not tuned on results:
- final reward of a run = its mean sampled reward over the last quarter of steps;
- per rank, the paired difference d = final(preft) - final(all-token) at each seed (same seed:
  same init, same prompt order), with a 95% bootstrap CI of the mean of d over seeds;
- reproduced if the CI's lower end >= -MARGIN at every rank; not reproduced if the CI's upper end
  < -MARGIN at any rank; otherwise inconclusive. Also inconclusive if all-token did not learn
  (final all-token reward < first-step reward + LEARN_MIN at every rank): parity with no learning
  says nothing about the claim.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from preft.rl import RlConfig, RlResult, train_rl

CLAIM = "On RL, prefill-only (PreFT) adapters approach parity with ordinary (all-token) ones."
MARGIN = 0.10
LEARN_MIN = 0.10
CRITERION = (
    f"per rank: 95% paired-bootstrap CI (over seeds) of final reward preft - all-token has lower end >= "
    f"-{MARGIN}; final = mean sampled reward over the last quarter of steps; all-token must gain >= {LEARN_MIN}"
)


def final_reward(rewards: Sequence[float]) -> float:
    tail = max(1, len(rewards) // 4)
    return sum(rewards[-tail:]) / tail


def bootstrap_ci(values: Sequence[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def verdict(rows: Sequence[dict[str, Any]]) -> str:
    if not any(r["all_token_gain"] >= LEARN_MIN for r in rows):
        return "inconclusive"
    if any(r["ci_high"] < -MARGIN for r in rows):
        return "not reproduced"
    if all(r["ci_low"] >= -MARGIN for r in rows):
        return "reproduced"
    return "inconclusive"


def summarise(results: Sequence[RlResult], ranks: Sequence[int], seeds: Sequence[int]) -> list[dict[str, Any]]:
    by = {(r.config["mode"], r.config["rank"], r.config["seed"]): r.rewards for r in results}
    rows = []
    for rank in ranks:
        pre = [final_reward(by["preft", rank, s]) for s in seeds]
        allt = [final_reward(by["all-token", rank, s]) for s in seeds]
        diffs = [a - b for a, b in zip(pre, allt)]
        low, high = bootstrap_ci(diffs)
        gain = sum(a - by["all-token", rank, s][0] for a, s in zip(allt, seeds)) / len(seeds)
        rows.append(
            {
                "rank": rank,
                "preft": round(sum(pre) / len(pre), 3),
                "all_token": round(sum(allt) / len(allt), 3),
                "diff": round(sum(diffs) / len(diffs), 3),
                "ci_low": round(low, 3),
                "ci_high": round(high, 3),
                "all_token_gain": round(gain, 3),
            }
        )
    return rows


def run_once(cfg: RlConfig, out: Path, model: Any, tokenizer: Any, log: Any) -> RlResult:
    """One training run, kept in out/runs/ as soon as it ends: a rerun with the same settings reuses
    it, so a check stopped midway (a kill, a busy machine) loses at most the run in flight."""
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


def run_check(ranks: Sequence[int], seeds: Sequence[int], out: Path, log: Any = print, **cfg: Any) -> dict[str, Any]:
    from harness.providers.local_weights import load_model

    model, tokenizer = load_model()
    results = [
        run_once(RlConfig(mode=m, rank=r, seed=s, **cfg), out, model, tokenizer, log)
        for r in ranks
        for s in seeds
        for m in ("preft", "all-token")
    ]
    rows = summarise(results, ranks, seeds)
    payload = {
        "claim": CLAIM,
        "criterion": CRITERION,
        "margin": MARGIN,
        "rows": rows,
        "verdict": verdict(rows),
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
