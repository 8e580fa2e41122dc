"""The natural references PreFT is proven against, built on peft and transformers alone.

- prefill-only: the base model with the peft adapter enabled runs the prompt and builds the KV
  cache; then, with the adapter disabled, every decode step runs the bare base model on that cache.
- all-token: peft's ordinary greedy generation.

Both load their own copy of the base model: peft injects layers into the model it wraps, and the
engine's shared model must stay bare.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from preft.grad import inference_mode


def load_peft(adapter_dir: str | Path, base_dir: str | Path | None = None) -> Any:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from harness.providers.embedded import ensure_converted

    base = AutoModelForCausalLM.from_pretrained(str(base_dir or ensure_converted()), dtype=torch.float32)
    return PeftModel.from_pretrained(base, str(adapter_dir)).eval()


@inference_mode
def prefill_only_greedy(peft_model: Any, prompt_ids: list[int], max_new_tokens: int,
                        stop_ids: frozenset[int] = frozenset()) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy tokens and the logits that chose each one, adapter on for the prompt only."""
    out = peft_model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
    cache, logits = out.past_key_values, [out.logits[0, -1].float()]
    tokens = [int(logits[-1].argmax())]
    with peft_model.disable_adapter():
        while len(tokens) < max_new_tokens and tokens[-1] not in stop_ids:
            out = peft_model(input_ids=torch.tensor([[tokens[-1]]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits.append(out.logits[0, -1].float())
            tokens.append(int(logits[-1].argmax()))
    return tokens, logits


@inference_mode
def all_token_greedy(peft_model: Any, prompt_ids: list[int], max_new_tokens: int,
                     stop_ids: frozenset[int] = frozenset()) -> list[int]:
    """peft's own greedy generation (the adapter on every token)."""
    out = peft_model.generate(input_ids=torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                              max_new_tokens=max_new_tokens, do_sample=False,
                              eos_token_id=sorted(stop_ids) or None, pad_token_id=0)
    return [int(t) for t in out[0, len(prompt_ids):].tolist()]
