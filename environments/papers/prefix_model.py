"""The model behind `prefix_linear_forcing`: a small GPT-2 (transformers' `GPT2LMHeadModel`: token
and position embeddings, pre-LayerNorm blocks of causal multi-head attention and a GELU MLP, a final
LayerNorm, the unembedding tied to the token embedding) trained briefly on a synthetic corpus, so it
is a pretrained model and not a random one; and the pieces the prefix solve needs: the forced
positions' logits as a function of the prefix embeddings, their Jacobian, greedy decoding from
`prefix + x`, and the range certificate for a token.

The corpus is a seeded mixture of `MODES` sparse Markov chains over the corpus tokens (each token has
a few successors in each chain); a sequence's first token picks its chain (first token mod `MODES`),
so the model learns a real next-token distribution that depends on the start of its context and not
only on the last token. A prefix sits at the start of the context, so it has leverage on the decode
(with one first-order chain the model learned to read the last token alone and random prefixes
rarely changed its decode). One extra vocabulary entry, the `ghost`, never
occurs in the corpus; after training its (tied) embedding row is set to the mean of two other rows,
so its logit is always the mean of theirs and it is never the strict argmax: the planted
out-of-range token whose unreachability the range test (`never_argmax`) must certify.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.optimize import linprog

if TYPE_CHECKING:  # torch and transformers load only when a model is built (the CLI lists tasks without them)
    import torch

MODES = 2  # chains in the corpus; a sequence's first token mod MODES picks its chain


@dataclass(frozen=True)
class ModelSize:
    """The GPT-2 shape and its training budget; `scale` multiplies width, depth, vocabulary and steps."""

    vocab: int = 32  # corpus tokens are 0..vocab-2; vocab-1 is the ghost
    width: int = 48
    layers: int = 3
    heads: int = 4
    context: int = 32
    train_steps: int = 200
    batch: int = 32
    seq: int = 24

    @classmethod
    def scaled(cls, scale: int) -> ModelSize:
        return cls(
            vocab=32 * scale,
            width=48 * scale,
            layers=3 * scale,
            heads=4 * scale,
            context=32 * scale,
            train_steps=200 * scale,
        )

    @property
    def ghost(self) -> int:
        return self.vocab - 1


@dataclass(frozen=True)
class Trained:
    model: Any  # transformers.GPT2LMHeadModel
    size: ModelSize
    successors: np.ndarray  # (MODES, vocab-1, k) each chain's successor tokens
    probs: np.ndarray  # (MODES, vocab-1, k) their probabilities
    heldout_accuracy: float  # next-token accuracy of the model's argmax on fresh corpus text
    chain_accuracy: float  # the same for the sequence's chain's most likely successor (the best possible)


def sample_corpus(
    successors: np.ndarray, probs: np.ndarray, rng: np.random.Generator, n: int, length: int
) -> np.ndarray:
    """n sequences: the first token uniform, then each token drawn from the sequence's chain
    (`successors[mode]`, mode = first token mod the number of chains) given the token before."""
    out = np.empty((n, length), dtype=np.int64)
    out[:, 0] = rng.integers(0, successors.shape[1], size=n)
    mode = out[:, 0] % len(successors)
    for t in range(1, length):
        p = probs[mode, out[:, t - 1]]
        choice = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
        out[:, t] = successors[mode, out[:, t - 1], np.minimum(choice, p.shape[1] - 1)]
    return out


@lru_cache(maxsize=8)
def trained_model(seed: int, size: ModelSize = ModelSize(), device: str = "cpu") -> Trained:
    """The seed's corpus and its GPT-2, trained `size.train_steps` AdamW steps (deterministic on one
    device and thread count), with the ghost row planted after training."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    rng = np.random.default_rng([seed, 7])
    n_tokens = size.vocab - 1
    successors = np.stack(
        [[rng.choice(n_tokens, size=4, replace=False) for _ in range(n_tokens)] for _ in range(MODES)]
    )
    probs = rng.dirichlet(np.full(4, 0.7), size=(MODES, n_tokens))
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # tiny tensors on shared cores: more threads only spin against each other
    config = GPT2Config(
        vocab_size=size.vocab,
        n_positions=size.context,
        n_embd=size.width,
        n_layer=size.layers,
        n_head=size.heads,
        bos_token_id=None,
        eos_token_id=None,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(config).to(device)
    model.config._attn_implementation = "eager"  # differentiable twice and by torch.func, on any device
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    for _ in range(size.train_steps):
        batch = torch.as_tensor(sample_corpus(successors, probs, rng, size.batch, size.seq), device=device)
        loss = model(input_ids=batch, labels=batch).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    wte = model.transformer.wte.weight  # tied with lm_head
    wte[size.ghost] = (wte[0] + wte[1]) / 2
    test = torch.as_tensor(sample_corpus(successors, probs, rng, 64, size.seq), device=device)
    with torch.no_grad():
        predicted = model(input_ids=test).logits[:, :-1].argmax(-1).cpu().numpy()
    prev = test[:, :-1].cpu().numpy()
    nxt = test[:, 1:].cpu().numpy()
    mode = (prev[:, :1] % MODES).repeat(prev.shape[1], axis=1)
    best = successors[mode, prev, probs[mode, prev].argmax(-1)]
    return Trained(
        model=model,
        size=size,
        successors=successors,
        probs=probs,
        heldout_accuracy=float((predicted == nxt).mean()),
        chain_accuracy=float((best == nxt).mean()),
    )


def forced_logits(model: Any, prefix: torch.Tensor, context: torch.Tensor, k: int) -> torch.Tensor:
    """Logits (k, vocab) at the k positions that predict the target's tokens, for the input
    `prefix` (m, d) embeddings followed by the token embeddings of `context` = x + y[:-1]
    (teacher forcing: under greedy decoding these are exactly the contexts when every earlier
    target token was produced)."""
    import torch

    embeds = torch.cat([prefix, model.transformer.wte(context)])[None]
    return model(inputs_embeds=embeds).logits[0, -k:]


def margins(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(k, vocab): logit of the target token minus every logit (0 at the target itself)."""
    return logits.gather(1, target[:, None]) - logits


def greedy_decode(model: Any, prefix: torch.Tensor, x: torch.Tensor, k: int) -> list[int]:
    """k tokens by greedy decoding from `prefix + x` (ties go to the lowest token id, torch's argmax)."""
    import torch

    tokens: list[int] = []
    with torch.no_grad():
        for _ in range(k):
            context = torch.cat([x, torch.as_tensor(tokens, dtype=x.dtype, device=x.device)])
            embeds = torch.cat([prefix, model.transformer.wte(context)])[None]
            tokens.append(int(model(inputs_embeds=embeds).logits[0, -1].argmax()))
    return tokens


def never_argmax(unembed: np.ndarray, token: int, tol: float = 1e-6) -> bool:
    """The range certificate for one token: True when no hidden state whatever makes `token` the
    strict argmax of `h @ unembed.T`. By Gordan's alternative, no h has (w_y - w_v) . h > 0 for
    every v != y exactly when some lambda >= 0, sum 1, has sum_v lambda_v (w_y - w_v) = 0. One
    linear program finds the smallest |sum_v lambda_v (w_y - w_v)|_1 over the simplex; a value
    within `tol` of the rows' size (float32 weights round the exact zero) certifies the token.
    Sufficient for 'out of range at every position under every prefix'; it ignores the final
    LayerNorm's constraints, so a token it clears may still be unreachable."""
    diffs = np.asarray(unembed, dtype=np.float64)
    diffs = diffs[token][None] - np.delete(diffs, token, axis=0)  # (n, d)
    n, d = diffs.shape
    eye = np.eye(d)
    # variables (lambda (n), s (d)): minimise sum s with -s <= diffs^T lambda <= s, sum lambda = 1
    a_ub = np.block([[diffs.T, -eye], [-diffs.T, -eye]])
    a_eq = np.concatenate([np.ones(n), np.zeros(d)])[None]
    res = linprog(
        np.concatenate([np.zeros(n), np.ones(d)]),
        A_ub=a_ub,
        b_ub=np.zeros(2 * d),
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=(0, None),
        method="highs",
    )
    return bool(res.status == 0 and res.fun <= tol * np.abs(diffs).max() * d)
