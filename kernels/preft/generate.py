"""`harness generate`: one generation, for quick checks and scripting (the command is
`preft.commands.generate_cmd`, registered under `harness.commands`; this is its body).

Local models run through the PreFT engine, so raw-text prompts, token ids and adapters (prefill-only
or all-token) are all available. Other models take chat prompts (`--chat`), and raw text where
the model implements `RawTextModel.complete` (vLLM, OpenAI's completions endpoint); they report no
token ids. `--json-schema FILE | --choice A,B,C | --regex R` constrain the reply on every
provider: the embedded engine enforces them token by token, others through their own `generate`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TypedDict

from pydantic import JsonValue

from harness.errors import HarnessError
from harness.providers.base import ConstraintError, GenerateConfig, check_constraint
from harness.spec import ModelSpec


class ConstraintFields(TypedDict, total=False):
    """The `GenerateConfig` fields of the one constraint flag given (none: empty)."""

    json_schema: dict[str, JsonValue]
    choice: list[str]
    regex: str


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int


class Generation(TypedDict):
    """One generation as `harness generate --json` prints it (key order included)."""

    text: str
    token_ids: list[int] | None  # the embedded engine's; other providers report none
    prompt_token_ids: list[int] | None
    finish_reason: str | None
    model: str
    adapter: str | None
    adapter_mode: str | None
    constrained_by: str
    usage: Usage


def read_constraint(json_schema: Path | None = None, choice: str | None = None,
                    regex: str | None = None) -> tuple[ConstraintFields, str]:
    """The config fields of at most one constraint flag, checked, and the flag's name for errors
    ({} and "" when none was given). Bad input: one `HarnessError` naming the flag."""
    given = [f for f, v in (("--json-schema", json_schema), ("--choice", choice), ("--regex", regex)) if v is not None]
    if len(given) > 1:
        raise HarnessError(f"give one of --json-schema, --choice, --regex (got {' and '.join(given)})")
    if json_schema is not None:
        flag = f"--json-schema {json_schema}"
        try:
            text = Path(json_schema).read_text(encoding="utf-8")
        except OSError as exc:
            raise HarnessError(f"{flag}: cannot read the file ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise HarnessError(f"{flag}: cannot read the file (not UTF-8 text)") from None
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as exc:
            raise HarnessError(f"{flag}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
        if not isinstance(schema, dict):
            raise HarnessError(f"{flag}: a JSON schema is an object, not {type(schema).__name__}")
        fields: ConstraintFields = {"json_schema": schema}
    elif choice is not None:
        flag = f"--choice {choice}"
        options = [c.strip() for c in choice.split(",")]
        if not options or any(not c for c in options):
            raise HarnessError(f"{flag}: write non-empty options separated by commas, e.g. --choice yes,no")
        fields = {"choice": options}
    elif regex is not None:
        flag, fields = f"--regex {regex}", {"regex": regex}
    else:
        return {}, ""
    try:
        check_constraint(GenerateConfig(**fields))
    except ConstraintError as exc:
        raise HarnessError(f"{flag}: {exc}") from None
    return fields, flag


def generate_once(*, model: str, prompt: str, chat: bool = False, adapter: Path | None = None,
                  adapter_mode: str = "preft", max_tokens: int = 64, temperature: float = 0.0, seed: int = 0,
                  base_url: str | None = None, json_schema: Path | None = None, choice: str | None = None,
                  regex: str | None = None) -> Generation:
    spec = ModelSpec.parse(model, base_url=base_url)
    if adapter_mode not in ("preft", "all-token"):
        raise HarnessError(f"--adapter-mode {adapter_mode!r}: use preft or all-token")
    constraint, flag = read_constraint(json_schema, choice, regex)
    config = GenerateConfig(max_tokens=max_tokens, temperature=temperature, seed=seed, **constraint)
    if spec.provider == "local":
        return _generate_local(spec, prompt, chat, adapter, adapter_mode, config, flag)
    if adapter is not None:
        raise HarnessError(f"--adapter works with the embedded model (local/smollm2-135m), not {spec.full}")
    return asyncio.run(_generate_remote(spec, prompt, chat, config, flag))


def _generate_local(spec: ModelSpec, prompt: str, chat: bool, adapter: Path | None, mode: str,
                    config: GenerateConfig, flag: str) -> Generation:
    from preft.engine import Request  # first: it sets OpenMP's waiting before torch loads
    from harness.providers import validate_spec
    from harness.providers.embedded import chat_prompt_ids, load_model, parse_adapter_name, stop_token_ids, visible_ids
    from preft.adapters import AdapterError
    from preft.provider import engine_constraint
    from preft.serving import server

    base, spec_adapter, spec_mode = parse_adapter_name(spec.name)
    if spec_adapter is not None:
        if adapter is not None:
            raise HarnessError("name the adapter once: either --adapter DIR or MODEL@DIR, not both")
        adapter, mode = spec_adapter, spec_mode
        spec = ModelSpec(provider="local", name=base)
    validate_spec(spec)
    hf_model, tokenizer = load_model()
    if chat:
        ids = chat_prompt_ids(tokenizer, [{"role": "user", "content": prompt}], config)
    else:
        ids = list(tokenizer(prompt)["input_ids"])
    if not ids:
        raise HarnessError("--prompt is empty after tokenisation: give at least one token of text")
    try:
        constraint = engine_constraint(config, hf_model, tokenizer)
    except ConstraintError as exc:
        raise HarnessError(f"{flag}: {exc}") from None
    engine = server()
    name = None
    if adapter is not None:
        if not Path(adapter).is_dir():
            raise HarnessError(f"--adapter {adapter}: no such directory (give a peft LoRA folder or a ReFT folder)")
        try:
            name = engine.register_dir(adapter)
        except AdapterError as exc:
            raise HarnessError(f"--adapter {adapter}: {exc}") from exc
    try:
        req = Request(prompt_ids=ids, max_new_tokens=config.max_tokens, adapter=name, mode=mode if name else "base",
                      temperature=config.temperature, seed=config.seed or 0,
                      stop_ids=stop_token_ids(hf_model, tokenizer), constraint=constraint)
        done = engine.generate(req)
    except ValueError as exc:  # e.g. a bad HARNESS_THREADS
        raise HarnessError(str(exc)) from None
    out = done.output_ids
    return {"text": tokenizer.decode(visible_ids(out, req.stop_ids), skip_special_tokens=True), "token_ids": out,
            "prompt_token_ids": ids, "finish_reason": done.finish_reason, "model": spec.full,
            "adapter": str(adapter) if adapter else None, "adapter_mode": mode if adapter else None,
            "constrained_by": "provider" if constraint is not None else "none",
            "usage": {"prompt_tokens": len(ids), "completion_tokens": len(out)}}


async def _generate_remote(spec: ModelSpec, prompt: str, chat: bool, config: GenerateConfig,
                           flag: str) -> Generation:
    from harness.providers import load_model
    from harness.providers.base import RawTextModel

    model = load_model(spec)
    try:
        if not chat and not isinstance(model, RawTextModel):
            raise HarnessError(f"{spec.full} is a chat endpoint: add --chat (raw-text prompts need a model with "
                               "a raw-text interface, e.g. local/ or vllm/)")
        try:
            if isinstance(model, RawTextModel) and not chat:
                out = await model.complete(prompt, config)
            else:
                out = await model.generate([{"role": "user", "content": prompt}], config)
        except ConstraintError as exc:
            raise HarnessError(f"{flag}: {exc}" if flag else str(exc)) from None
    finally:
        await model.aclose()
    return {"text": out.text, "token_ids": None, "prompt_token_ids": None, "finish_reason": out.finish_reason,
            "model": spec.full, "adapter": None, "adapter_mode": None, "constrained_by": out.constrained_by,
            "usage": {"prompt_tokens": out.usage.prompt_tokens, "completion_tokens": out.usage.completion_tokens}}
