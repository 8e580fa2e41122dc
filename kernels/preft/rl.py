"""GRPO-style RL of a LoRA adapter, prefill-only (`preft`) vs all-token, on a verifiable task.

Task (built in code): few-shot addition, "2+3=5\n6+1=7\n4+4=8\n{a}+{b}=" with a in [10, 60) and
b in [1, 10); the target is the sum's digits and the newline, tokenised as they stand after the
prompt. Reward 1 exactly when the sampled completion, cut at its first newline, is that target;
else 0. The embedded model gets part of these right at temperature 1, so groups carry signal from
the first step. (A first version asked for " animal" + EOS after "Word: tiger\nCategory:": the
untrained model never sampled it, every reward was 0 and nothing was updated -- measured, 8 runs.)
The completion has several positions after the prompt (digits, then the newline), which is where
the two modes differ: under `preft` generated positions carry adapter index -1 (the base model
decodes from an adapted prefix), under `all-token` the adapter acts on them too.

Per prompt a group of G completions is sampled from the current policy; advantage = reward minus
the group mean (optionally divided by the group std); loss = -mean over completions of advantage
x mean log-prob of the sampled tokens. One update per batch (on-policy), so no ratio/clip is
needed. Adapter tensors, init and the autograd.grad update are train.py's.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import torch

from preft.grad import no_grad
from preft.model import PreftModel
from preft.train import DEFAULT_LR, TrainConfig, Trainable, make_trainable

SHOTS = "2+3=5\n6+1=7\n4+4=8\n"  # the format, shown; the sums asked are two-digit

Prompt = tuple[list[int], list[int]]  # (prompt ids, target completion ids ending in the stop token)


@dataclass
class RlConfig:
    mode: str = "preft"
    rank: int = 2
    steps: int = 30
    prompts: int = 4  # prompts per step
    group: int = 6  # completions per prompt
    # 8e-3 (4x the supervised default) collapsed every run to reward 0 within 2-4 steps (session 10);
    # at 1e-3 both modes learn (probes: seeds 0-1, 30 steps, 0.04-0.12 -> 0.75-1.0)
    lr: float = DEFAULT_LR["lora"] / 2
    temperature: float = 0.7  # the base model's sampled reward is ~12% here (6% at 1.0): groups carry signal
    std_norm: bool = False
    seed: int = 0


@dataclass
class RlResult:
    config: RlConfig  # a copy of the config trained
    rewards: list[float] = field(default_factory=list)  # mean sampled reward per step
    seconds: float = 0.0


def stop_token(tokenizer: Any) -> int:
    """The newline's id: a completion ends there (the shots' format)."""
    return int(tokenizer("\n")["input_ids"][-1])


def make_prompts(tokenizer: Any, low: int = 10, high: int = 60) -> list[Prompt]:
    """Every a+b with a in [low, high), b in [1, 10): the prompt's ids and the target's ids as they
    are tokenised after the prompt (the sum's digits, then the newline)."""
    out = []
    for a in range(low, high):
        for b in range(1, 10):
            prompt = f"{SHOTS}{a}+{b}="
            ids, full = tokenizer(prompt)["input_ids"], tokenizer(f"{prompt}{a + b}\n")["input_ids"]
            if full[: len(ids)] != ids or full[-1] != stop_token(tokenizer):
                raise ValueError(f"the tokenizer merges {prompt!r} with its answer: the target cannot be cut out")
            out.append((ids, full[len(ids):]))
    return out


def group_advantages(rewards: torch.Tensor, std_norm: bool = False, eps: float = 1e-6) -> torch.Tensor:
    """rewards [P, G] -> advantages [P, G], each row summing to zero."""
    adv = rewards - rewards.mean(dim=1, keepdim=True)
    if std_norm:
        adv = adv / (rewards.std(dim=1, keepdim=True, unbiased=False) + eps)
    return adv


def _indices(n: int, length: int, on: bool) -> torch.Tensor:
    """Adapter slot 0 where the adapter acts, -1 elsewhere: prompts always, completions in all-token."""
    return torch.full((n, length), 0 if on else -1, dtype=torch.long)


def _grouped_logits(pm: PreftModel, prompts: Sequence[list[int]], completions: torch.Tensor, mode: str,
                    adapter: Trainable | None) -> torch.Tensor:
    """Logits predicting each completion position, [P*G, Tc+1, V]: position 0 from the prompt's last
    token, position j from completion token j-1. Each distinct prompt runs once (`forward_grouped`)."""
    ptoks = torch.tensor(prompts)
    lora = adapter.lora if adapter is not None else None
    pidx = _indices(ptoks.shape[0], ptoks.shape[1], on=True) if lora is not None else None
    cidx = _indices(completions.shape[0], completions.shape[1], on=mode == "all-token") if lora is not None else None
    last, comp = pm.forward_grouped(ptoks, completions, lora=lora, prompt_idx=pidx, completion_idx=cidx)
    group = completions.shape[0] // ptoks.shape[0]
    return torch.cat([last.repeat_interleave(group, 0)[:, None], comp], dim=1)


def _distinct(prompts: Sequence[list[int]], group: int) -> list[list[int]]:
    """The distinct prompts of a batch laid out as G copies of each, in order; they must share one length."""
    distinct = [prompts[i] for i in range(0, len(prompts), group)]
    if any(prompts[i] != distinct[i // group] for i in range(len(prompts))) or len({len(p) for p in distinct}) > 1:
        raise ValueError("a batch must be G copies of each prompt, and its prompts must share one token length")
    return distinct


@no_grad
def sample(pm: PreftModel, prompts: Sequence[list[int]], max_new: int, mode: str, adapter: Trainable | None,
           gen: torch.Generator, stop_id: int, temperature: float = 1.0, group: int = 1) -> list[list[int]]:
    """One completion per prompt (prompts laid out as G copies of each), cut after its first stop
    token. Re-runs the short completions each token; each distinct prompt runs once per token."""
    distinct = _distinct(prompts, group)
    done: list[list[int]] = [[] for _ in prompts]
    finished = [False] * len(prompts)
    for step in range(max_new):
        so_far = torch.tensor([c + [stop_id] * (step - len(c)) for c in done], dtype=torch.long).view(len(done), step)
        logits = _grouped_logits(pm, distinct, so_far, mode, adapter)[:, step]
        picks = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen)[:, 0].tolist()
        for i, tok in enumerate(picks):
            if not finished[i]:
                done[i].append(int(tok))
                finished[i] = tok == stop_id
        if all(finished):
            break
    return done


def completion_logprob(pm: PreftModel, prompts: Sequence[list[int]], completions: Sequence[list[int]], mode: str,
                       adapter: Trainable | None, pad_id: int, group: int = 1) -> torch.Tensor:
    """Mean log-prob of each completion's tokens under the policy, [N] (differentiable)."""
    width = max(len(c) for c in completions)
    padded = torch.tensor([c + [pad_id] * (width - len(c)) for c in completions], dtype=torch.long)
    logp = torch.log_softmax(_grouped_logits(pm, _distinct(prompts, group), padded[:, :-1], mode, adapter), -1)
    picked = logp.gather(-1, padded[:, :, None])[:, :, 0]  # [N, width]
    real = torch.tensor([[j < len(c) for j in range(width)] for c in completions])
    return (picked * real).sum(1) / real.sum(1)


def rl_step(pm: PreftModel, adapter: Trainable, opt: torch.optim.Optimizer, batch: Sequence[Prompt], cfg: RlConfig,
            gen: torch.Generator, stop_id: int) -> float:
    """Sample G per prompt, reward, group baseline, one policy-gradient update; returns the mean reward."""
    prompts = [p for p, _ in batch for _ in range(cfg.group)]
    targets = [t for _, t in batch for _ in range(cfg.group)]
    max_new = max(len(t) for t in targets)
    comps = sample(pm, prompts, max_new, cfg.mode, adapter, gen, stop_id, cfg.temperature, cfg.group)
    rewards = torch.tensor([float(c == t) for c, t in zip(comps, targets)]).view(len(batch), cfg.group)
    adv = group_advantages(rewards, cfg.std_norm).reshape(-1)
    if adv.abs().sum() > 0:  # an all-equal group carries no signal; skip the backward
        loss = -(adv * completion_logprob(pm, prompts, comps, cfg.mode, adapter, stop_id, cfg.group)).mean()
        for p, g in zip(adapter.params, torch.autograd.grad(loss, adapter.params)):
            p.grad = g
        opt.step()
        opt.zero_grad(set_to_none=True)
    return float(rewards.mean())


def train_rl(cfg: RlConfig, model: Any, tokenizer: Any, log: Any = None) -> RlResult:
    if cfg.mode not in ("preft", "all-token"):
        raise ValueError(f"mode {cfg.mode!r}: use preft or all-token")
    start = time.perf_counter()
    torch.manual_seed(cfg.seed)
    pm = PreftModel(model)
    adapter = make_trainable(TrainConfig(kind="lora", rank=cfg.rank, seed=cfg.seed), model.config)
    opt = torch.optim.AdamW(adapter.params, lr=cfg.lr, weight_decay=0.0)
    prompts = make_prompts(tokenizer)
    order = random.Random(cfg.seed)  # same prompt sequence for both modes at a given seed (paired)
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    result = RlResult(config=replace(cfg))
    for step in range(cfg.steps):
        batch = order.sample(prompts, cfg.prompts)
        result.rewards.append(rl_step(pm, adapter, opt, batch, cfg, gen, stop_token(tokenizer)))
        if log is not None:
            log(f"rl {cfg.mode} r{cfg.rank} seed {cfg.seed} step {step}: reward {result.rewards[-1]:.3f}")
    result.seconds = time.perf_counter() - start
    return result
