"""Adapters on disk and in memory.

LoRA: peft's saved format (`adapter_config.json` + `adapter_model.safetensors`), as written by
`PeftModel.save_pretrained`; any of the seven Llama projections may be targeted. Scale per module
is lora_alpha / r (rsLoRA: / sqrt(r)), honouring `rank_pattern` / `alpha_pattern` by module suffix.

ReFT: this project's format (`reft_config.json` + `reft_weights.safetensors`, tensors
`layers.{l}.R`, `layers.{l}.W`, `layers.{l}.b`), since pyreft's own save format pickles modules.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from preft.model import PROJECTIONS
from preft.reft_ops import KINDS, orthonormal_rows

LORA_CONFIG, LORA_WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
REFT_CONFIG, REFT_WEIGHTS = "reft_config.json", "reft_weights.safetensors"
_PEFT_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+_proj)\.lora_([AB])(?:\.\w+)?\.weight$")


class AdapterError(ValueError):
    """A bad adapter directory or adapter that does not fit the base model; the message names the fix."""


@dataclass
class LoraAdapter:
    name: str
    rank: int
    # (layer, projection) -> (A [in, r], B [r, out], scale)
    modules: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor, float]] = field(default_factory=dict)


@dataclass
class ReftAdapter:
    name: str
    kind: str  # loreft | direft
    rank: int
    first_n: int  # intervene on the first n prompt positions ...
    last_m: int  # ... and the last m
    # layer -> (R [r, d], W [r, d], b [r]); for DiReFT R holds W1 and W holds W2
    layers: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    def positions(self, prompt_len: int) -> list[int]:
        """Prompt positions this intervention acts on (first n and last m, without repeats)."""
        first = range(min(self.first_n, prompt_len))
        last = range(max(0, prompt_len - self.last_m), prompt_len)
        return sorted(set(first) | set(last))


Adapter = LoraAdapter | ReftAdapter


def load_adapter(path: str | Path, name: str | None = None) -> Adapter:
    """A LoRA (peft format) or ReFT (this project's format) adapter from a directory."""
    directory = Path(path)
    name = name or directory.name
    if (directory / LORA_CONFIG).is_file():
        return load_lora(directory, name)
    if (directory / REFT_CONFIG).is_file():
        return load_reft(directory, name)
    raise AdapterError(f"{directory}: not an adapter directory (expected {LORA_CONFIG} from peft's "
                       f"save_pretrained, or {REFT_CONFIG}); pass the folder that holds one of them")


def load_lora(directory: Path, name: str) -> LoraAdapter:
    from safetensors.torch import load_file

    config = json.loads((directory / LORA_CONFIG).read_text())
    if config.get("use_dora"):
        raise AdapterError(f"{directory}: DoRA adapters are not supported by the PreFT engine (use plain LoRA)")
    if config.get("fan_in_fan_out"):
        raise AdapterError(f"{directory}: fan_in_fan_out LoRA is for Conv1D models, not Llama")
    weights_file = directory / LORA_WEIGHTS
    if not weights_file.is_file():
        raise AdapterError(f"{directory}: {LORA_WEIGHTS} is missing (re-save the adapter with peft's save_pretrained)")
    tensors = load_file(str(weights_file))
    pairs: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        match = _PEFT_KEY.search(key)
        if match is None:
            if "lora_" in key:
                raise AdapterError(f"{directory}: unexpected LoRA tensor {key!r} (only Llama projections are supported)")
            continue
        layer, proj, which = int(match.group(1)), match.group(2), match.group(3)
        if proj not in PROJECTIONS:
            raise AdapterError(f"{directory}: LoRA on {proj!r} is not supported; targets must be among {PROJECTIONS}")
        pairs.setdefault((layer, proj), {})[which] = tensor.float()
    if not pairs:
        raise AdapterError(f"{directory}: {LORA_WEIGHTS} holds no LoRA weights")
    modules, ranks = {}, set()
    for (layer, proj), ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise AdapterError(f"{directory}: layer {layer} {proj} has lora_A or lora_B missing")
        r = ab["A"].shape[0]
        alpha = _pattern_value(config.get("alpha_pattern") or {}, layer, proj, config.get("lora_alpha", 8))
        scale = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
        modules[layer, proj] = (ab["A"].T.contiguous(), ab["B"].T.contiguous(), float(scale))
        ranks.add(r)
    return LoraAdapter(name=name, rank=max(ranks), modules=modules)


def _pattern_value(pattern: dict[str, float], layer: int, proj: str, default: float) -> float:
    """peft's `alpha_pattern` (module name or regex -> alpha) for one module, else `default`."""
    target = f"layers.{layer}.{'self_attn' if proj in PROJECTIONS[:4] else 'mlp'}.{proj}"
    for key, value in pattern.items():
        if target.endswith(key) or key == proj or re.fullmatch(key, target):
            return value
    return default


def load_reft(directory: Path, name: str) -> ReftAdapter:
    from safetensors.torch import load_file

    config = json.loads((directory / REFT_CONFIG).read_text())
    kind = config.get("kind")
    if kind not in KINDS:
        raise AdapterError(f"{directory / REFT_CONFIG}: kind must be one of {KINDS}, got {kind!r}")
    tensors = load_file(str(directory / REFT_WEIGHTS))
    layers = {}
    for layer in config["layers"]:
        try:
            layers[int(layer)] = tuple(tensors[f"layers.{layer}.{p}"].float() for p in ("R", "W", "b"))
        except KeyError as exc:
            raise AdapterError(f"{directory / REFT_WEIGHTS}: tensor {exc} missing for layer {layer}") from None
    return ReftAdapter(name=name, kind=kind, rank=int(config["rank"]), first_n=int(config.get("first_n", 0)),
                       last_m=int(config.get("last_m", 0)), layers=layers)


def save_reft(adapter: ReftAdapter, directory: str | Path) -> Path:
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = {"kind": adapter.kind, "rank": adapter.rank, "layers": sorted(adapter.layers),
              "first_n": adapter.first_n, "last_m": adapter.last_m}
    (directory / REFT_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    tensors = {f"layers.{l}.{p}": t.detach().contiguous() for l, ws in adapter.layers.items()
               for p, t in zip(("R", "W", "b"), ws)}
    save_file(tensors, str(directory / REFT_WEIGHTS))
    return directory


def save_lora_peft_format(adapter: LoraAdapter, directory: str | Path, *, alpha: float | None = None,
                          base_model: str = "") -> Path:
    """Write a LoRA adapter in peft's layout (loadable by peft and by `load_lora`). The scale of
    every module must be alpha / r for one alpha."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    alpha = alpha if alpha is not None else next(iter(adapter.modules.values()))[2] * adapter.rank
    tensors = {}
    for (layer, proj), (A, B, _) in adapter.modules.items():
        group = "self_attn" if proj in PROJECTIONS[:4] else "mlp"
        prefix = f"base_model.model.model.layers.{layer}.{group}.{proj}"
        tensors[f"{prefix}.lora_A.weight"] = A.T.contiguous()
        tensors[f"{prefix}.lora_B.weight"] = B.T.contiguous()
    save_file(tensors, str(directory / LORA_WEIGHTS))
    targets = sorted({proj for _, proj in adapter.modules})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": adapter.rank, "lora_alpha": alpha,
              "target_modules": targets, "lora_dropout": 0.0, "bias": "none", "use_rslora": False,
              "base_model_name_or_path": base_model, "inference_mode": True}
    (directory / LORA_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    return directory


def random_lora(config: Any, rank: int, seed: int, *, name: str | None = None, targets: tuple[str, ...] = PROJECTIONS,
                alpha: float | None = None, std: float = 0.02) -> LoraAdapter:
    """A seeded random LoRA over the base model's shape (for benchmarks and tests). Both A and B
    are random (unlike a freshly initialised LoRA, whose B is zero and changes nothing)."""
    gen = torch.Generator().manual_seed(seed)
    dims = _projection_dims(config)
    alpha = float(alpha if alpha is not None else 2 * rank)
    modules = {}
    for layer in range(int(config.num_hidden_layers)):
        for proj in targets:
            d_in, d_out = dims[proj]
            A = torch.randn(d_in, rank, generator=gen) / math.sqrt(d_in)
            B = torch.randn(rank, d_out, generator=gen) * std
            modules[layer, proj] = (A, B, alpha / rank)
    return LoraAdapter(name=name or f"lora-r{rank}-s{seed}", rank=rank, modules=modules)


def random_reft(config: Any, rank: int, seed: int, *, kind: str = "loreft", layers: tuple[int, ...] | None = None,
                first_n: int = 3, last_m: int = 3, name: str | None = None, std: float = 0.05) -> ReftAdapter:
    gen = torch.Generator().manual_seed(seed)
    d = int(config.hidden_size)
    layers = layers if layers is not None else tuple(range(0, int(config.num_hidden_layers), 6))
    weights = {}
    for layer in layers:
        R = orthonormal_rows(rank, d, gen) if kind == "loreft" else torch.randn(rank, d, generator=gen) * std
        W = torch.randn(rank, d, generator=gen) * std
        b = torch.randn(rank, generator=gen) * std
        weights[layer] = (R, W, b)
    return ReftAdapter(name=name or f"{kind}-r{rank}-s{seed}", kind=kind, rank=rank, first_n=first_n,
                       last_m=last_m, layers=weights)


def _projection_dims(config: Any) -> dict[str, tuple[int, int]]:
    d = int(config.hidden_size)
    heads = int(config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or d // heads)
    q, kv, ff = heads * head_dim, int(config.num_key_value_heads) * head_dim, int(config.intermediate_size)
    return {"q_proj": (d, q), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (q, d),
            "gate_proj": (d, ff), "up_proj": (d, ff), "down_proj": (ff, d)}
