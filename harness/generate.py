"""`harness generate`: one generation, for quick checks and scripting.

Local models run through the PreFT engine, so raw-text prompts, token ids and adapters (prefill-only
or all-token) are all available; API models take chat prompts only and report no token ids.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.spec import ModelSpec


def generate_once(*, model: str, prompt: str, chat: bool = False, adapter: Path | None = None,
                  adapter_mode: str = "preft", max_tokens: int = 64, temperature: float = 0.0, seed: int = 0,
                  base_url: str | None = None) -> dict[str, Any]:
    spec = ModelSpec.parse(model, base_url=base_url)
    if adapter_mode not in ("preft", "all-token"):
        raise HarnessError(f"--adapter-mode {adapter_mode!r}: use preft or all-token")
    if spec.provider == "local":
        return _generate_local(spec, prompt, chat, adapter, adapter_mode, max_tokens, temperature, seed)
    if adapter is not None:
        raise HarnessError(f"--adapter works with the embedded model (local/smollm2-135m), not {spec.full}")
    if not chat:
        raise HarnessError(f"{spec.full} is a chat endpoint: add --chat (raw-text prompts need a local model)")
    return asyncio.run(_generate_remote(spec, prompt, max_tokens, temperature, seed))


def _generate_local(spec: ModelSpec, prompt: str, chat: bool, adapter: Path | None, mode: str, max_tokens: int,
                    temperature: float, seed: int) -> dict[str, Any]:
    from harness.providers import validate_spec
    from harness.providers.local import as_id_list, parse_adapter_name, stop_token_ids, visible_ids
    from harness.providers.local_weights import load_model
    from kernels.preft.adapters import AdapterError
    from kernels.preft.engine import Request
    from kernels.preft.serving import server

    base, spec_adapter, spec_mode = parse_adapter_name(spec.name)
    if spec_adapter is not None:
        if adapter is not None:
            raise HarnessError("name the adapter once: either --adapter DIR or MODEL@DIR, not both")
        adapter, mode = spec_adapter, spec_mode
        spec = ModelSpec(provider="local", name=base)
    validate_spec(spec)
    hf_model, tokenizer = load_model()
    if chat:
        ids = as_id_list(tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                        add_generation_prompt=True, tokenize=True))
    else:
        ids = list(tokenizer(prompt)["input_ids"])
    if not ids:
        raise HarnessError("--prompt is empty after tokenisation: give at least one token of text")
    engine = server()
    name = None
    if adapter is not None:
        if not Path(adapter).is_dir():
            raise HarnessError(f"--adapter {adapter}: no such directory (give a peft LoRA folder or a ReFT folder)")
        try:
            name = engine.register_dir(adapter)
        except AdapterError as exc:
            raise HarnessError(f"--adapter {adapter}: {exc}") from exc
    req = Request(prompt_ids=ids, max_new_tokens=max_tokens, adapter=name, mode=mode if name else "base",
                  temperature=temperature, seed=seed, stop_ids=stop_token_ids(hf_model, tokenizer))
    done = engine.generate(req)
    out = done.output_ids
    return {"text": tokenizer.decode(visible_ids(out, req.stop_ids), skip_special_tokens=True), "token_ids": out, "prompt_token_ids": ids,
            "finish_reason": done.finish_reason, "model": spec.full, "adapter": str(adapter) if adapter else None,
            "adapter_mode": mode if adapter else None,
            "usage": {"prompt_tokens": len(ids), "completion_tokens": len(out)}}


async def _generate_remote(spec: ModelSpec, prompt: str, max_tokens: int, temperature: float, seed: int) -> dict[str, Any]:
    from harness.providers import GenerateConfig, load_model

    model = load_model(spec)
    try:
        out = await model.generate([{"role": "user", "content": prompt}],
                                   GenerateConfig(max_tokens=max_tokens, temperature=temperature, seed=seed))
    finally:
        await model.aclose()
    return {"text": out.text, "token_ids": None, "prompt_token_ids": None, "finish_reason": out.finish_reason,
            "model": spec.full, "adapter": None, "adapter_mode": None,
            "usage": {"prompt_tokens": out.usage.prompt_tokens, "completion_tokens": out.usage.completion_tokens}}
