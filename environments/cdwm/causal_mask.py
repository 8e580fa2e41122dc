"""The learned causal sparsity mask: per action class x delta dimension, a gate learned jointly with
the delta predictor under a sparsity penalty (issue 40 item 3).

Design. `CausalGates` holds one logit per (action class, dimension); its gate g is the sigmoid,
read as the probability that the edge "this class can change this dimension" exists. A "changes?"
head reads the predictor's hidden state at the end of the prompt (the adapted model's last layer,
so the head's gradient also trains the LoRA adapter) and gives p_d(x), the chance that this
transition changes dimension d if the edge exists. The loss is the expectation over the edge:

    g * BCE(p_d(x), touched_d) + (1 - g) * BCE(0, touched_d) + lambda * g

An absent edge predicts "never changes", so one transition of the class that touches d costs
-log(eps) (~13.8) per row when the gate is shut: a dimension the class touches on any noticeable
share of its rows keeps its gate open whether or not the head can tell *which* rows (the question
the mask answers is whether the class can affect d, not how predictable it is). A dimension it
never touches has BCE(0, 0) = 0 when shut, so the penalty closes it. (Session 25 replaced the
product form BCE(g * p, touched): there g and p trade off, and where the head cannot tell the rows
apart g settles near the base rate -- MiniGrid `forward` -> irreversible, touched in 19% of rows
(a step into lava), ended at g = 0.17, shut, so the grammar could never predict a lava death.)
Added to the SFT loss and minimised by the same optimiser as the adapter (a parameter group of its
own, since a gate needs larger steps than LoRA weights).

What we do not do, and why: scaling each field's token loss by its gate (one reading of "a gate on
the predictor") rewards closing the gate of any field that is hard to predict, whether or not the
class can change it -- the gate would learn difficulty, not causal dependency.

At inference the gates are read as a table (`LearnedMask`: g >= 0.5 is allowed) and turned into an
`ActionMask`; `wm_format.prediction_schema` removes the masked dimensions from the grammar. A class
with no gate (never seen in training) keeps every dimension, as `ActionMask` does for any class it
does not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from agents.trained_world_model import MASK_FILE, MASK_THRESHOLD, read_gates
from harness.environment import DIMENSIONS, ActionMask, Delta, touched

THRESHOLD = MASK_THRESHOLD
EPS = 1e-6  # an absent edge's "never changes", as a probability the log can take


def touched_vector(delta: Delta) -> list[float]:
    dims = touched(delta)
    return [1.0 if d in dims else 0.0 for d in DIMENSIONS]


class CausalGates(nn.Module):  # type: ignore[misc]  # torch is not analysed (follow_imports = skip): Any
    """Gate logits per (class, dimension) and the "changes?" head over a hidden state."""

    def __init__(self, classes: list[str], hidden_size: int, init_logit: float = 1.0) -> None:
        super().__init__()
        self.classes = list(classes)
        self.index = {c: i for i, c in enumerate(self.classes)}
        self.logits = nn.Parameter(torch.full((len(classes), len(DIMENSIONS)), float(init_logit)))
        self.head = nn.Linear(hidden_size, len(DIMENSIONS))

    def gates(self) -> torch.Tensor:
        return torch.sigmoid(self.logits)

    def loss(
        self, hidden: torch.Tensor, class_ids: torch.Tensor, target: torch.Tensor, sparsity: float
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Mean over rows of the expected BCE over the edge (module docstring) + sparsity * sum_d g[c, d].
        hidden [B, H], class_ids [B] (long), target [B, D] in {0, 1}."""
        g = self.gates()[class_ids]
        p = torch.sigmoid(self.head(hidden.to(self.head.weight.dtype))).clamp(EPS, 1 - EPS)
        y = target.to(p.dtype)
        with_edge = nn.functional.binary_cross_entropy(p, y, reduction="none")
        without_edge = nn.functional.binary_cross_entropy(torch.full_like(p, EPS), y, reduction="none")
        bce = (g * with_edge + (1 - g) * without_edge).sum(-1).mean()
        penalty = g.sum(-1).mean()
        total = bce + sparsity * penalty
        return total, {"mask_bce": float(bce.detach()), "mask_penalty": float(penalty.detach())}

    def table(self) -> dict[str, dict[str, float]]:
        g = self.gates().detach().cpu()
        return {c: {d: round(float(g[i, j]), 4) for j, d in enumerate(DIMENSIONS)} for c, i in self.index.items()}


@dataclass
class LearnedMask:
    """The gates as read at inference: class key (`world/class`) -> dimension -> gate value."""

    gates: dict[str, dict[str, float]]
    threshold: float = THRESHOLD

    def allowed(self, key: str) -> frozenset[str] | None:
        """The dimensions a class may touch; None for a class never trained (nothing masked)."""
        row = self.gates.get(key)
        if row is None:
            return None
        return frozenset(d for d, g in row.items() if g >= self.threshold)

    def action_mask(self, world: str, name: str = "learned") -> ActionMask:
        """This world's part as an `ActionMask` (keys without the world prefix)."""
        prefix = f"{world}/"
        return ActionMask(
            {k[len(prefix) :]: self.allowed(k) or frozenset() for k in self.gates if k.startswith(prefix)}, name=name
        )

    def save(self, directory: Path, extra: dict[str, str | None] | None = None) -> Path:
        path = directory / MASK_FILE
        path.write_text(
            json.dumps({"threshold": self.threshold, "gates": self.gates, **(extra or {})}, indent=1, sort_keys=True),
            encoding="utf-8",
        )
        return path

    @classmethod
    def load(cls, directory: Path) -> "LearnedMask":
        gates, threshold = read_gates(directory)  # the one reader, shared with the agent that serves the adapter
        return cls(gates, threshold)


def mask_scores(allowed: dict[str, frozenset[str] | None], rows: list[tuple[str, Delta]]) -> dict[str, float]:
    """How a mask (class key -> allowed dimensions, None = unmasked) fits ground truth:
    precision and recall over (class, dimension) pairs of the classes in `rows` (truth: the
    dimension was touched by some row of the class), and `fact_recall`, the share of true facts
    (plus irreversible rows) in a dimension the mask allows -- what masking never deletes."""
    truth: dict[str, set[str]] = {}
    for key, delta in rows:
        truth.setdefault(key, set()).update(touched(delta))
    tp = fp = fn = 0
    for key, dims in truth.items():
        ok = allowed.get(key)
        ok = frozenset(DIMENSIONS) if ok is None else ok
        tp, fp, fn = tp + len(ok & dims), fp + len(ok - dims), fn + len(dims - ok)
    kept = total = 0
    for key, delta in rows:
        ok = allowed.get(key)
        ok = frozenset(DIMENSIONS) if ok is None else ok
        for dim in DIMENSIONS[:5]:
            n = len(getattr(delta, dim))
            total, kept = total + n, kept + (n if dim in ok else 0)
        if not delta.reversible:
            total, kept = total + 1, kept + ("irreversible" in ok)
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "fact_recall": kept / total if total else 1.0,
        "classes": float(len(truth)),
    }
