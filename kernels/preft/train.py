"""SFT of a LoRA or ReFT adapter on the code-word task (`task.py`), prefill-only vs all-token.

Modes (what the adapter index marks during training, loss on the answer tokens + EOS only):
- `preft`: the adapter acts on prompt positions only (LoRA: every prompt token; ReFT: its first-n /
  last-m prompt positions), -1 on the answer. Attention is causal, so the teacher-forced loss is
  exactly the loss of prefill-with-adapter, decode-without (what the PreFT engine serves).
- `all-token`: LoRA on every position; ReFT on its prompt positions plus every answer position.

The trainable tensors sit in a one-slot stack (S=1) of `LoraWeights` / `ReftWeights`, so training
runs the very `PreftModel.forward_dense` the checks use. The shared base model is only read:
gradients are taken with `torch.autograd.grad` for the adapter tensors alone, so no base weight
gets a `.grad` and its requires_grad flags are left as they are.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence, TypedDict

import torch
import torch.nn.functional as F

from preft.adapters import LoraAdapter, ReftAdapter, _projection_dims, save_lora_peft_format, save_reft
from preft.grad import no_grad
from preft.model import PROJECTIONS, LoraWeights, PreftModel, ReftWeights
from preft.reft_ops import orthonormal_rows
from preft.task import Example, accuracy, adapter_index, encode, make_task, pad_batch

MODES = ("preft", "all-token")
KINDS = ("lora", "loreft", "direft")
DEFAULT_LR = {"lora": 2e-3, "loreft": 4e-3, "direft": 4e-3}


@dataclass
class TrainConfig:
    kind: str = "lora"
    mode: str = "preft"
    rank: int = 4
    steps: int = 60
    batch: int = 8
    lr: float | None = None  # None: DEFAULT_LR[kind]
    seed: int = 0
    task_seed: int = 0
    alpha: float | None = None  # LoRA alpha; None: 2 * rank (scale 2 at every rank)
    targets: tuple[str, ...] = PROJECTIONS
    reft_layers: tuple[int, ...] = (3, 9, 15, 21)
    first_n: int = 2
    last_m: int = 2
    eos: bool = True  # also train the EOS after the answer


@dataclass
class TrainResult:
    config: TrainConfig  # as trained: `lr` resolved (never None)
    losses: list[float]
    final_loss: float  # mean over the last 10% of steps
    test_loss: float  # teacher-forced, in the training mode
    test_acc: dict[str, float]  # greedy exact match under each inference semantics
    seconds: float
    trainable_params: int
    adapter_dir: str | None = None
    train_seconds: float = 0.0  # the optimisation loop alone


@dataclass
class Trainable:
    """A one-slot adapter stack whose tensors are the optimiser's parameters."""

    kind: str
    rank: int
    lora: LoraWeights | None
    reft: ReftWeights | None
    params: list[torch.Tensor]
    reft_span: tuple[int, int] | None = None
    alpha: float = 0.0
    layers: tuple[int, ...] = ()


def init_lora(config: Any, rank: int, gen: torch.Generator, targets: Sequence[str] = PROJECTIONS,
              alpha: float | None = None) -> Trainable:
    """peft's init: A uniform in +-1/sqrt(d_in) (kaiming_uniform, a=sqrt(5)), B zero -- a no-op at start."""
    dims, alpha = _projection_dims(config), float(alpha if alpha is not None else 2 * rank)
    A, B, scales = {}, {}, {}
    for layer in range(int(config.num_hidden_layers)):
        for proj in targets:
            d_in, d_out = dims[proj]
            A[layer, proj] = ((torch.rand(1, d_in, rank, generator=gen) * 2 - 1) / math.sqrt(d_in)).requires_grad_()
            B[layer, proj] = torch.zeros(1, rank, d_out, requires_grad=True)
            scales[layer, proj] = torch.tensor([alpha / rank])
    return Trainable("lora", rank, LoraWeights(A, B, scales), None, [*A.values(), *B.values()], alpha=alpha)


def init_reft(config: Any, kind: str, rank: int, gen: torch.Generator, layers: Sequence[int],
              first_n: int, last_m: int) -> Trainable:
    """LoReFT: R orthonormal rows, W = R, b = 0 (h + R^T(Wh + b - Rh) = h at start).
    DiReFT: W1 small random, W2 = 0. Either way the untrained adapter changes nothing, like LoRA."""
    d, n_layers = int(config.hidden_size), int(config.num_hidden_layers)
    R = {l: torch.zeros(1, rank, d) for l in range(n_layers)}
    W = {l: torch.zeros(1, rank, d) for l in range(n_layers)}
    b = {l: torch.zeros(1, rank) for l in range(n_layers)}
    params = []
    for l in layers:
        first = orthonormal_rows(rank, d, gen) if kind == "loreft" else torch.randn(rank, d, generator=gen) / math.sqrt(d)
        R[l] = first[None].clone().requires_grad_()
        W[l] = (first[None].clone() if kind == "loreft" else torch.zeros(1, rank, d)).requires_grad_()
        b[l] = torch.zeros(1, rank, requires_grad=True)
        params += [R[l], W[l], b[l]]
    active = torch.zeros(1, n_layers, dtype=torch.bool)
    active[0, list(layers)] = True
    return Trainable(kind, rank, None, ReftWeights(R, W, b, active, [kind]), params, reft_span=(first_n, last_m),
                     layers=tuple(layers))


@no_grad
def reproject(t: Trainable) -> None:
    """Put each LoReFT R back on the manifold of orthonormal rows: the nearest such matrix (polar
    factor U V^T of R = U S V^T), so R R^T = I holds after every optimiser step."""
    if t.kind != "loreft" or t.reft is None:
        return
    for l in t.layers:
        U, _, Vh = torch.linalg.svd(t.reft.R[l][0], full_matrices=False)
        t.reft.R[l][0].copy_(U @ Vh)


def build_batch(examples: Sequence[Example], mode: str, reft_span: tuple[int, int] | None, eos_id: int | None,
                pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """tokens [B,T], adapter index [B,T] and next-token targets [B,T] (-100 except answer + EOS)."""
    seqs, idx, tgt = [], [], []
    for prompt, answer in examples:
        response = list(answer) + ([eos_id] if eos_id is not None else [])
        seq = list(prompt) + response
        seqs.append(seq)
        idx.append(adapter_index(len(prompt), len(seq), mode, reft_span))
        tgt.append([-100] * len(prompt) + response)
    tokens, index = pad_batch(seqs, idx, pad_id)
    targets, _ = pad_batch(tgt, idx, -100)
    return tokens, index, targets


def batch_loss(pm: PreftModel, tokens: torch.Tensor, index: torch.Tensor, targets: torch.Tensor,
               adapter: Trainable | None = None) -> torch.Tensor:
    """Mean cross-entropy of the response tokens; logits at t predict token t+1."""
    lora = adapter.lora if adapter is not None else None
    reft = adapter.reft if adapter is not None else None
    logits = pm.forward_dense(tokens, lora=lora, lora_idx=index if lora is not None else None,
                              reft=reft, reft_idx=index if reft is not None else None)
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), targets[:, 1:].reshape(-1), ignore_index=-100)


def export(t: Trainable, name: str, directory: str | Path) -> Path:
    """Save the trained adapter: LoRA in peft's format, ReFT in this project's format."""
    if t.lora is not None:
        modules = {k: (t.lora.A[k][0].detach().clone(), t.lora.B[k][0].detach().clone(), t.alpha / t.rank) for k in t.lora.A}
        return save_lora_peft_format(LoraAdapter(name, t.rank, modules), directory, alpha=t.alpha)
    assert t.reft is not None and t.reft_span is not None
    layers = {l: (t.reft.R[l][0].detach().clone(), t.reft.W[l][0].detach().clone(), t.reft.b[l][0].detach().clone())
              for l in t.layers}
    return save_reft(ReftAdapter(name, t.kind, t.rank, t.reft_span[0], t.reft_span[1], layers), directory)


def make_trainable(cfg: TrainConfig, config: Any) -> Trainable:
    gen = torch.Generator().manual_seed(cfg.seed)
    if cfg.kind == "lora":
        return init_lora(config, cfg.rank, gen, cfg.targets, cfg.alpha)
    if cfg.kind in ("loreft", "direft"):
        return init_reft(config, cfg.kind, cfg.rank, gen, cfg.reft_layers, cfg.first_n, cfg.last_m)
    raise ValueError(f"kind {cfg.kind!r}: use one of {KINDS}")


def train(cfg: TrainConfig, *, model: Any = None, tokenizer: Any = None, out_dir: str | Path | None = None,
          log: Any = None) -> TrainResult:
    """Train one adapter, evaluate it on the held-out split, optionally save it under out_dir."""
    if cfg.mode not in MODES:
        raise ValueError(f"mode {cfg.mode!r}: use one of {MODES}")
    if model is None or tokenizer is None:
        from harness.providers.embedded import load_model

        model, tokenizer = load_model()
    start = time.perf_counter()
    pm = PreftModel(model)
    train_pairs, test_pairs = make_task(cfg.task_seed)
    train_ex, test_ex = encode(tokenizer, train_pairs), encode(tokenizer, test_pairs)
    eos_id = tokenizer.eos_token_id if cfg.eos else None
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    adapter = make_trainable(cfg, model.config)
    opt = torch.optim.AdamW(adapter.params, lr=cfg.lr or DEFAULT_LR[cfg.kind], weight_decay=0.0)
    order = torch.Generator().manual_seed(cfg.seed + 1)
    queue: list[int] = []
    losses: list[float] = []
    for step in range(cfg.steps):
        if len(queue) < cfg.batch:  # epochs of a seeded shuffle
            queue += torch.randperm(len(train_ex), generator=order).tolist()
        chosen, queue = queue[: cfg.batch], queue[cfg.batch:]
        tokens, index, targets = build_batch([train_ex[i] for i in chosen], cfg.mode, adapter.reft_span, eos_id, pad_id)
        loss = batch_loss(pm, tokens, index, targets, adapter)
        for p, g in zip(adapter.params, torch.autograd.grad(loss, adapter.params)):
            p.grad = g
        opt.step()
        opt.zero_grad(set_to_none=True)
        reproject(adapter)
        losses.append(loss.detach().item())
        if log is not None and (step % 10 == 0 or step == cfg.steps - 1):
            log(f"{cfg.kind} {cfg.mode} r{cfg.rank} step {step}: loss {losses[-1]:.4f}")
    train_seconds = time.perf_counter() - start
    with torch.no_grad():
        test_loss = float(batch_loss(pm, *build_batch(test_ex, cfg.mode, adapter.reft_span, eos_id, pad_id), adapter))
    common = dict(lora=adapter.lora, reft=adapter.reft, reft_span=adapter.reft_span, pad_id=pad_id, batch=64)
    test_acc = {sem: accuracy(pm, test_ex, semantics=sem, **common) for sem in MODES}
    tail = max(1, len(losses) // 10)
    saved = None if out_dir is None else str(export(adapter, f"{cfg.kind}-{cfg.mode}-r{cfg.rank}", out_dir))
    config = replace(cfg, lr=cfg.lr or DEFAULT_LR[cfg.kind])
    return TrainResult(config, losses, sum(losses[-tail:]) / tail if losses else float("nan"), test_loss, test_acc,
                       time.perf_counter() - start, sum(p.numel() for p in adapter.params), saved, train_seconds)


def compare(ranks: Sequence[int] = (4, 16), kinds: Sequence[str] = ("lora", "loreft"), modes: Sequence[str] = MODES,
            steps: int = 60, seed: int = 0, out: str | Path = "preft-train", batch: int = 8,
            log: Any = print, **overrides: Any) -> list[SummaryRow]:
    """Train every kind x mode x rank, write results.json, loss_curves.csv/png and the adapters
    into `out`, and return the summary rows."""
    from harness.providers.embedded import load_model

    model, tokenizer = load_model()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pm = PreftModel(model)
    _, test_pairs = make_task(overrides.get("task_seed", 0))
    base_acc = accuracy(pm, encode(tokenizer, test_pairs), pad_id=tokenizer.eos_token_id, batch=64)
    results = []
    for kind, rank, mode in itertools.product(kinds, ranks, modes):
        cfg = TrainConfig(kind=kind, mode=mode, rank=rank, steps=steps, batch=batch, seed=seed, **overrides)
        results.append(train(cfg, model=model, tokenizer=tokenizer, out_dir=out / "adapters" / f"{kind}-{mode}-r{rank}", log=log))
        if log is not None:
            log(format_table([summary_row(results[-1])]))
    rows = [summary_row(r) for r in results]
    payload = {"base_test_acc": base_acc, "summary": rows, "runs": [asdict(r) for r in results]}
    (out / "results.json").write_text(json.dumps(payload, indent=2) + "\n")
    with open(out / "loss_curves.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["kind", "mode", "rank", "step", "loss"])
        for r in results:
            writer.writerows([r.config.kind, r.config.mode, r.config.rank, i, f"{v:.6f}"] for i, v in enumerate(r.losses))
    plot_curves(results, out / "loss_curves.png")
    return rows


class SummaryRow(TypedDict):
    """One trained adapter's line of the comparison; a plain dict because results.json holds it as is."""

    kind: str
    mode: str
    rank: int
    steps: int
    final_loss: float
    mean_loss: float
    test_loss: float
    acc_preft: float
    acc_all_token: float
    params: int
    seconds: float


def summary_row(r: TrainResult) -> SummaryRow:
    return {"kind": r.config.kind, "mode": r.config.mode, "rank": r.config.rank, "steps": len(r.losses),
            "final_loss": round(r.final_loss, 4), "mean_loss": round(sum(r.losses) / max(1, len(r.losses)), 4),
            "test_loss": round(r.test_loss, 4),
            "acc_preft": round(r.test_acc["preft"], 3), "acc_all_token": round(r.test_acc["all-token"], 3),
            "params": r.trainable_params, "seconds": round(r.seconds, 1)}


def format_table(rows: Sequence[SummaryRow]) -> str:
    if not rows:
        return ""
    keys = list(rows[0])
    cells = [[str(v) for v in r.values()] for r in rows]  # every row has the keys in the same order
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    lines = ["  ".join(k.ljust(w) for k, w in zip(keys, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def plot_curves(results: Sequence[TrainResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(r.config.kind for r in results))
    fig, axes = plt.subplots(1, len(kinds), figsize=(6 * len(kinds), 4), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for r in (r for r in results if r.config.kind == kind):
            ax.plot(r.losses, label=f"{r.config.mode} r{r.config.rank}",
                    linestyle="-" if r.config.mode == "preft" else "--")
        ax.set(title=kind, xlabel="step", ylabel="train loss (answer tokens)", yscale="log")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
