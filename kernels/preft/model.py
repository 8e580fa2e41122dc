"""A Llama forward over flat token batches that applies per-token LoRA and ReFT adapters.

It reuses the HF model's own modules and weights (embedding, RMSNorms, rotary embedding, the
projection weights, the LM head) and re-implements only the wiring, because the wiring is what
PreFT changes: every token carries its own LoRA slot and ReFT slot (-1 = none), so one forward can
mix requests in prefill (adapted) and in decode (bare) -- and the base matmuls stay one GEMM each.

Two attention paths share the layer code:
- `forward_cached`: inference. Tokens of several sequences are flattened; each sequence writes its
  keys/values into its row of a `KVPool` and attends over its own cache (a prefill chunk causally,
  a decode token over everything before it).
- `forward_dense`: training and checks. A right-padded [B, T] batch with causal attention and no
  cache, differentiable with respect to the adapter weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from preft.lora_ops import (adapter_runs, lora_add_gathered_, lora_add_module_runs_, lora_add_runs_,
                                    lora_delta)
from preft.reft_ops import reft_apply

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LoraWeights:
    """Stacked LoRA weights of S slots: per (layer, projection) A [S, in, r], B [S, r, out], scales [S]."""

    A: dict[tuple[int, str], torch.Tensor]
    B: dict[tuple[int, str], torch.Tensor]
    scales: dict[tuple[int, str], torch.Tensor]
    backend: str = "segmented"
    # alias slots (CPU): slot s -> its adapter's own {(layer, proj): (A [in, r], B [r, out], scale)}
    # instead of stacked copies; used by the inference ops only
    slot_modules: list[dict[tuple[int, str], Any] | None] | None = None
    # alias slots: False (default) one op per run (`lora_add_module_runs_`); True the runs of all
    # adapters in batched GEMMs per projection (`lora_add_gathered_`), measured slower on this CPU
    # at rank 16 (docs/preft.md, session 14)
    gather: bool = False


@dataclass
class ReftWeights:
    """Stacked ReFT weights of S slots: per layer R/W [S, r, d], b [S, r]; which slots act on which
    layer (`active` [S, L] bool) and each slot's kind (`kinds`, index into reft_ops.KINDS)."""

    R: dict[int, torch.Tensor]
    W: dict[int, torch.Tensor]
    b: dict[int, torch.Tensor]
    active: torch.Tensor
    kinds: list[str]


@dataclass
class Span:
    """One sequence's tokens inside a flat batch: flat rows [start, start+count), written to KV
    pool row `slot` at cache positions [past, past+count)."""

    slot: int
    start: int
    count: int
    past: int


class KVPool:
    """Keys and values of running sequences: per layer [rows, kv_heads, capacity, head_dim].

    Row i belongs to the i-th running sequence. Both rows and capacity grow on demand (doubling,
    contents copied); the engine keeps rows x capacity inside its KV budget before admitting."""

    def __init__(self, config: Any, rows: int = 1, capacity: int = 64, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.layers = int(config.num_hidden_layers)
        self.kv_heads = int(config.num_key_value_heads)
        self.head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
        self.dtype = dtype
        self.rows = self.capacity = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.ensure(capacity, rows)

    def bytes_per_token(self) -> int:
        return int(2 * self.layers * self.kv_heads * self.head_dim * torch.finfo(self.dtype).bits // 8)

    def grown(self, capacity: int, rows: int) -> tuple[int, int]:
        """(rows, capacity) after `ensure(capacity, rows)`: doubling, so growth is rare."""
        new_rows = self.rows if rows <= self.rows else max(rows, 2 * self.rows)
        new_cap = self.capacity if capacity <= self.capacity else max(capacity, 2 * self.capacity, 64)
        return new_rows, new_cap

    def ensure(self, capacity: int, rows: int | None = None) -> None:
        rows = self.rows if rows is None else rows
        if capacity <= self.capacity and rows <= self.rows:
            return
        new_rows, new_cap = self.grown(capacity, rows)
        shape = (new_rows, self.kv_heads, new_cap, self.head_dim)
        new_k = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.layers)]
        new_v = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.layers)]
        for old, new in ((self.k, new_k), (self.v, new_v)):
            for o, n in zip(old, new):
                n[: self.rows, :, : self.capacity] = o
        self.k, self.v, self.rows, self.capacity = new_k, new_v, new_rows, new_cap

    def move(self, src: int, dst: int, length: int) -> None:
        """Copy row src's first `length` positions to row dst (to keep live rows contiguous)."""
        for t in (*self.k, *self.v):
            t[dst, :, :length] = t[src, :, :length]

    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))


class PreftModel:
    """Wraps a loaded HF Llama causal LM (its modules are used read-only)."""

    def __init__(self, hf_model: Any) -> None:
        self.hf = hf_model
        self.config = hf_model.config
        inner = hf_model.model
        self.embed, self.norm, self.rotary = inner.embed_tokens, inner.norm, inner.rotary_emb
        self.layers = list(inner.layers)
        self.lm_head = hf_model.lm_head
        first = next(hf_model.parameters())
        self.device, self.dtype = first.device, first.dtype
        self.heads = int(self.config.num_attention_heads)
        self.kv_heads = int(self.config.num_key_value_heads)
        self.head_dim = int(getattr(self.config, "head_dim", None) or self.config.hidden_size // self.heads)
        self.scaling = self.head_dim ** -0.5

    # -- shared layer code -------------------------------------------------------------------

    def _proj(self, x: torch.Tensor, layer: int, name: str, module: Any, lora: LoraWeights | None,
              lora_idx: torch.Tensor | None, runs: list[tuple[int, int, int]] | None) -> torch.Tensor:
        y = F.linear(x, module.weight, module.bias)
        if lora is None or lora_idx is None:
            return y
        if lora.slot_modules is not None:  # alias slots: inference only, by runs
            if runs is None:
                raise RuntimeError("alias LoRA slots serve inference only (no grad, segmented backend)")
            op = lora_add_gathered_ if lora.gather else lora_add_module_runs_
            return op(y, x, runs, lora.slot_modules, (layer, name))
        if (layer, name) not in lora.A:
            return y
        A, B, scales = lora.A[layer, name], lora.B[layer, name], lora.scales[layer, name]
        if runs is not None and lora.backend == "segmented":  # inference on the CPU: accumulate in place
            return lora_add_runs_(y, x, runs, A, B, scales)
        return y + lora_delta(x, lora_idx, A, B, scales, backend=lora.backend, runs=runs)

    def _run_layers(self, h: torch.Tensor, positions: torch.Tensor, attend: Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
                    lora: LoraWeights | None,
                    lora_idx: torch.Tensor | None, reft: ReftWeights | None, reft_idx: torch.Tensor | None) -> torch.Tensor:
        """h [N, d] flat hidden states; `attend(layer, q, k, v)` with q [N, H, D], k/v [N, KVH, D]
        (rotary applied) returns [N, H*D]."""
        # Checked once per forward, so a batch without adapted tokens runs the bare base model.
        if lora_idx is None or not bool((lora_idx >= 0).any()):
            lora = None
        if reft_idx is None or not bool((reft_idx >= 0).any()):
            reft = None
        runs = None
        if lora is not None and (lora.backend == "triton" or (lora.backend == "segmented" and not torch.is_grad_enabled())):
            runs = adapter_runs(lora_idx)
        cos, sin = self.rotary(h[None], positions[None])  # [1, N, D]
        cos, sin = cos[0][:, None, :], sin[0][:, None, :]  # [N, 1, D] broadcast over heads
        n = h.shape[0]
        for i, block in enumerate(self.layers):
            attn, mlp = block.self_attn, block.mlp
            x = block.input_layernorm(h)
            q = self._proj(x, i, "q_proj", attn.q_proj, lora, lora_idx, runs).view(n, self.heads, self.head_dim)
            k = self._proj(x, i, "k_proj", attn.k_proj, lora, lora_idx, runs).view(n, self.kv_heads, self.head_dim)
            v = self._proj(x, i, "v_proj", attn.v_proj, lora, lora_idx, runs).view(n, self.kv_heads, self.head_dim)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            h = h + self._proj(attend(i, q, k, v), i, "o_proj", attn.o_proj, lora, lora_idx, runs)
            x = block.post_attention_layernorm(h)
            gate = self._proj(x, i, "gate_proj", mlp.gate_proj, lora, lora_idx, runs)
            up = self._proj(x, i, "up_proj", mlp.up_proj, lora, lora_idx, runs)
            h = h + self._proj(F.silu(gate) * up, i, "down_proj", mlp.down_proj, lora, lora_idx, runs)
            if reft is not None and reft_idx is not None:
                h = self._reft(h, i, reft, reft_idx)
        return self.norm(h)

    @staticmethod
    def _reft(h: torch.Tensor, layer: int, reft: ReftWeights, reft_idx: torch.Tensor) -> torch.Tensor:
        here = reft_idx.clamp(min=0)
        on = (reft_idx >= 0) & reft.active[here, layer]
        for kind in set(reft.kinds):
            kind_of = torch.tensor([k == kind for k in reft.kinds], dtype=torch.bool, device=h.device)
            idx = torch.where(on & kind_of[here], reft_idx, torch.full_like(reft_idx, -1))
            h = reft_apply(h, idx, kind, reft.R[layer], reft.W[layer], reft.b[layer])
        return h

    # -- inference over a KV pool ------------------------------------------------------------

    def forward_cached(self, token_ids: torch.Tensor, spans: list[Span], pool: KVPool,
                       lora: LoraWeights | None = None, lora_idx: torch.Tensor | None = None,
                       reft: ReftWeights | None = None, reft_idx: torch.Tensor | None = None) -> torch.Tensor:
        """Run the flat tokens of `spans` and return the last-token logits of each span [len(spans), V]."""
        dev = token_ids.device
        positions = torch.cat([torch.arange(s.past, s.past + s.count) for s in spans]).to(dev)
        pool.ensure(max(s.past + s.count for s in spans), max(s.slot for s in spans) + 1)
        decode = [s for s in spans if s.count == 1 and s.past > 0]
        prefill = [s for s in spans if not (s.count == 1 and s.past > 0)]

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            K, V = pool.k[layer], pool.v[layer]
            out = torch.empty(q.shape[0], self.heads * self.head_dim, dtype=q.dtype, device=dev)
            for s in spans:  # write this step's keys and values first: a token attends to itself
                K[s.slot, :, s.past:s.past + s.count] = k[s.start:s.start + s.count].transpose(0, 1)
                V[s.slot, :, s.past:s.past + s.count] = v[s.start:s.start + s.count].transpose(0, 1)
            if decode:
                out[[s.start for s in decode]] = self._attend_decode(q, K, V, decode)
            for s in prefill:
                qs = q[s.start:s.start + s.count].transpose(0, 1)[None]  # [1, H, c, D]
                total = s.past + s.count
                ks, vs = K[s.slot, :, :total][None], V[s.slot, :, :total][None]
                mask = None if s.past == 0 else (
                    torch.arange(total, device=dev)[None, :] <= (s.past + torch.arange(s.count, device=dev))[:, None])
                o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, is_causal=s.past == 0,
                                                   scale=self.scaling, enable_gqa=True)
                out[s.start:s.start + s.count] = o[0].transpose(0, 1).reshape(s.count, -1)
            return out

        h = self.embed(token_ids)
        h = self._run_layers(h, positions, attend, lora, lora_idx, reft, reft_idx)
        last = torch.tensor([s.start + s.count - 1 for s in spans], device=dev)
        return self.lm_head(h[last]).float()

    def _attend_decode(self, q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, decode: list[Span]) -> torch.Tensor:
        slots = [s.slot for s in decode]
        length = max(s.past + 1 for s in decode)
        lo = min(slots)
        if slots == list(range(lo, lo + len(slots))):  # contiguous rows: a view, no copy
            ks, vs = K[lo:lo + len(slots), :, :length], V[lo:lo + len(slots), :, :length]
        else:
            index = torch.tensor(slots, device=q.device)
            ks, vs = K[index, :, :length], V[index, :, :length]
        qs = q[[s.start for s in decode]][:, :, None, :]  # [B, H, 1, D]
        lengths = torch.tensor([s.past + 1 for s in decode], device=q.device)
        mask = (torch.arange(length, device=q.device)[None, :] < lengths[:, None])[:, None, None, :]
        o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=self.scaling, enable_gqa=True)
        return o[:, :, 0, :].reshape(len(decode), -1)

    # -- dense causal forward (training, checks) ---------------------------------------------

    def forward_dense(self, token_ids: torch.Tensor, lora: LoraWeights | None = None,
                      lora_idx: torch.Tensor | None = None, reft: ReftWeights | None = None,
                      reft_idx: torch.Tensor | None = None) -> torch.Tensor:
        """token_ids [B, T] (right-padded), per-token indices [B, T]; returns logits [B, T, V]."""
        b, t = token_ids.shape
        positions = torch.arange(t, device=token_ids.device).repeat(b)

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            qs = q.view(b, t, self.heads, self.head_dim).transpose(1, 2)
            ks = k.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            vs = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=self.scaling, enable_gqa=True)
            return o.transpose(1, 2).reshape(b * t, -1)

        def flat(x: torch.Tensor | None) -> torch.Tensor | None:
            return None if x is None else x.reshape(-1)

        h = self._run_layers(self.embed(token_ids.reshape(-1)), positions, attend, lora, flat(lora_idx), reft, flat(reft_idx))
        return self.lm_head(h).view(b, t, -1)


    # -- shared-prompt forward (RL groups) ----------------------------------------------------

    def forward_grouped(self, prompts: torch.Tensor, completions: torch.Tensor, lora: LoraWeights | None = None,
                        prompt_idx: torch.Tensor | None = None,
                        completion_idx: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits of G completions per prompt, running each prompt once.

        prompts [P, Tp] (equal lengths, no padding); completions [P*G, Tc] (right-padded), rows
        p*G .. p*G+G-1 continuing prompt p; per-token adapter indices of the same shapes. Returns
        (last-prompt-token logits [P, V], completion logits [P*G, Tc, V]) -- exactly what
        `forward_dense` gives at those positions of the concatenated sequences, at 1/G of the
        prompt's cost: a completion token attends to its prompt's keys and values (shared) and
        causally to its own completion."""
        n_p, tp = prompts.shape
        n_c, tc = completions.shape
        if n_c % n_p:
            raise ValueError(f"{n_c} completions for {n_p} prompts: need the same group size per prompt")
        group, split = n_c // n_p, n_p * tp
        dev = prompts.device
        positions = torch.cat([torch.arange(tp, device=dev).repeat(n_p), torch.arange(tp, tp + tc, device=dev).repeat(n_c)])
        visible = torch.cat([torch.ones(tc, tp, dtype=torch.bool, device=dev),
                             torch.ones(tc, tc, dtype=torch.bool, device=dev).tril()], dim=1)  # [Tc, Tp+Tc]

        if tc == 0:  # one dummy completion token: causal attention keeps it out of the prompt's logits
            last, _ = self.forward_grouped(prompts, completions.new_zeros(n_c, 1), lora, prompt_idx)
            return last, last.new_zeros(n_c, 0, last.shape[-1])

        def heads(x: torch.Tensor, rows: int, t: int, h: int) -> torch.Tensor:
            return x.reshape(rows, t, h, self.head_dim).transpose(1, 2)

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            qp, kp, vp = heads(q[:split], n_p, tp, self.heads), heads(k[:split], n_p, tp, self.kv_heads), heads(v[:split], n_p, tp, self.kv_heads)
            op = F.scaled_dot_product_attention(qp, kp, vp, is_causal=True, scale=self.scaling, enable_gqa=True)
            ks = torch.cat([kp.repeat_interleave(group, 0), heads(k[split:], n_c, tc, self.kv_heads)], dim=2)
            vs = torch.cat([vp.repeat_interleave(group, 0), heads(v[split:], n_c, tc, self.kv_heads)], dim=2)
            oc = F.scaled_dot_product_attention(heads(q[split:], n_c, tc, self.heads), ks, vs, attn_mask=visible,
                                                scale=self.scaling, enable_gqa=True)
            return torch.cat([op.transpose(1, 2).reshape(split, -1), oc.transpose(1, 2).reshape(n_c * tc, -1)])

        tokens = torch.cat([prompts.reshape(-1), completions.reshape(-1)])
        idx = None
        if prompt_idx is not None:  # completion tokens without indices are bare (-1)
            rest = completion_idx if completion_idx is not None else completions.new_full(completions.shape, -1)
            idx = torch.cat([prompt_idx.reshape(-1), rest.reshape(-1)])
        h = self._run_layers(self.embed(tokens), positions, attend, lora, idx, None, None)
        last = self.lm_head(h[:split].view(n_p, tp, -1)[:, -1])
        return last, self.lm_head(h[split:]).view(n_c, tc, -1)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
