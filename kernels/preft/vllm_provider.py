"""`vllm/<hf-id-or-path>`: an in-process vLLM engine (AsyncLLM), in vLLM's own environment.

Registered as the `harness.providers` entry point `vllm` by this package (PreFT): the provider
sets PreFT's plugin flags, so it lives with the plugin and the core knows neither.

vLLM lives in its own virtual environment (`make vllm-install` -> `.venv-vllm`): its CPU build
pins transformers and pulls packages the default environment must not have. `vllm/smollm2-135m`
names the embedded model's converted safetensors folder (`harness.providers.embedded`), so the same
weights run on both engines.

`vllm/<model>@DIR[#all-token]` serves a peft LoRA adapter or a ReFT folder. By default it is
prefill-only (PreFT): the engine starts with the PreFT vLLM plugin's flag (`preft_engine_kwargs`:
`additional_config={"preft": "prefill-only"}`, read by `preft.vllm_plugin`), so the adapter shapes
the prompt and decoding runs on the base weights, exactly as `local/<model>@DIR` does; `#all-token`
is stock vLLM LoRA (the request's `extra_args={"preft_mode": "all-token"}`).

One engine per provider instance, started on the first call on the caller's event loop (the
runner shares one instance per spec across roles) and shut down by `aclose()`. `vllm/<model>?replicas=N`
runs N such engines as Ray actors behind the core's least-loaded router (`harness.providers.ray_replicas`;
the provider's `replica_engines(spec)` gives the count and `EngineFactory`, which builds each actor's
engine). `harness serve --model vllm/...` execs vLLM's own OpenAI-compatible server (the provider's `serve`).

The prompt: a chat template that renders `tools=` itself gets the callable tools so, and the reply
is read with vLLM's `hermes` tool parser; any other template -- SmolLM2's among them -- gets the
embedded model's prompt and tool-calling protocol (`embedded.chat_prompt_ids`, `read_tool_call`:
tools described in the system message, a reply that is exactly one `{"name", "arguments"}` object
becomes a call), so `vllm/smollm2-135m` sees the same prompt token ids as `local/smollm2-135m`.
`complete(prompt)` generates from raw text (no template), tokenised as `harness generate` does for
the embedded model, and reads tool calls with the embedded protocol.

Output constraints use vLLM's structured outputs (`SamplingParams.structured_outputs`; the engine
runs them through xgrammar, JSON compact: see STRUCTURED_OUTPUTS): `json_schema` -> `json`,
`choice`, `regex`; a forced tool call (`tool_choice` required or a tool's name) -> `json` with
`tool_call_schema(...)`. `tool_choice` none sends no tools. A constraint vLLM rejects (a schema it
cannot compile, a regex it cannot turn into a grammar) is a `ConstraintError` naming it, checked
with the engine's own validation before the request is sent.
"""


from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import JsonValue

from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.spec import ModelSpec
from harness.providers.base import (
    ConstraintError,
    ConstraintPath,
    GenerateConfig,
    Model,
    ModelError,
    ModelOutput,
    ToolCall,
    ToolSpec,
    Usage,
    check_constraint,
    raw_prompt_hash,
    request_hash,
    tool_call_schema,
)
from harness.providers.embedded import (NAME as EMBEDDED_NAME, as_id_list, callable_tools, chat_prompt_ids,
                                        ensure_converted, parse_adapter_name, read_tool_call, template_messages)
from harness.providers.ray_replicas import replicated, split_replicas
from preft.vllm_plugin import ALL_TOKEN, CONFIG_KEY, MODE_KEY, PREFILL_ONLY, SCHEDULER, WORKER_EXTENSION

INSTALL_HINT = "vLLM is not installed in this environment: run `make vllm-install` and use .venv-vllm/bin/harness"
# CPU defaults measured on this machine kind, and vLLM's per-step INFO lines kept out of the
# harness's output; a user's own settings win. Set before vLLM is first imported (it reads them then).
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_LOGGING_LEVEL": "WARNING"}
for _key, _value in CPU_ENV.items():
    os.environ.setdefault(_key, _value)


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_model(name: str) -> str:
    """The path or hub id vLLM loads: the embedded model's cached folder for `smollm2-135m`."""
    if name == EMBEDDED_NAME:
        return str(ensure_converted())
    path = Path(name).expanduser()
    if name.startswith((".", "/", "~")) and not path.is_dir():
        raise HarnessError(f"vllm/{name}: model folder {path} does not exist")
    return str(path) if path.is_dir() else name


# vLLM accepts these ranks for --max-lora-rank; an adapter's rank is rounded up to the next one.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# PreFT's plugin flags: the engine's additional_config that turns the plugin on, and each spec
# adapter mode (`@DIR#mode`) as the plugin's per-request mode (SamplingParams.extra_args[MODE_KEY]).
PREFT_FLAG = {CONFIG_KEY: PREFILL_ONLY}
PLUGIN_MODES = {"preft": PREFILL_ONLY, "all-token": ALL_TOKEN}


def adapter_kind(adapter: Path, spec: str = "") -> str:
    """"lora" (a peft folder: adapter_config.json) or "reft" (this project's reft_config.json)."""
    if (Path(adapter) / "adapter_config.json").is_file():
        return "lora"
    if (Path(adapter) / "reft_config.json").is_file():
        return "reft"
    raise HarnessError(f"{spec or adapter}: {adapter} holds neither adapter_config.json (peft LoRA) nor "
                       "reft_config.json (ReFT)")


def lora_rank(adapter: Path, spec: str = "") -> int:
    """The rank of the peft LoRA adapter in `adapter` (its adapter_config.json), one clear error otherwise."""
    config_file = Path(adapter) / "adapter_config.json"
    if not config_file.is_file():
        raise HarnessError(f"{spec or adapter}: {adapter} holds no adapter_config.json (a peft LoRA folder)")
    try:
        rank = int(json.loads(config_file.read_text())["r"])
    except (ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{spec or adapter}: {config_file} has no integer rank `r` ({exc})") from exc
    if rank > VLLM_LORA_RANKS[-1]:
        raise HarnessError(f"{spec or adapter}: rank {rank} is above vLLM's largest LoRA rank {VLLM_LORA_RANKS[-1]}")
    return rank


def vllm_rank(rank: int) -> int:
    return next(r for r in VLLM_LORA_RANKS if r >= rank)


def preft_flag(reft: dict[str, str] | None = None) -> dict[str, JsonValue]:
    """The plugin's `additional_config`: prefill-only by default, plus ReFT folders by name."""
    if reft:
        return {CONFIG_KEY: {"mode": PREFILL_ONLY, "reft": dict(reft)}}
    return dict(PREFT_FLAG)


def preft_engine_kwargs(max_rank: int = 0, max_loras: int = 0, reft: dict[str, str] | None = None) -> dict[str, Any]:
    """Engine arguments for the PreFT plugin: its flag, its scheduler and worker extension (named in
    vLLM's own extension points), LoRA when `max_loras` > 0, ReFT folders by name. The plugin patches
    vLLM's V1 model runner, so V1 is asked for (V2 is vLLM's default where Triton runs); set before the
    engine starts."""
    os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
    kwargs: dict[str, Any] = {"additional_config": preft_flag(reft), "scheduler_cls": SCHEDULER,
                              "worker_extension_cls": WORKER_EXTENSION}
    if max_loras:
        kwargs.update(enable_lora=True, max_loras=max_loras, max_lora_rank=vllm_rank(max_rank))
    return kwargs


# Structured outputs through xgrammar (the grammar library the embedded engine uses too) with
# compact JSON: free whitespace lets a small model spend `max_tokens` on newlines inside an object.
# vLLM takes the whitespace switch per engine, and only with a named backend (not `auto`).
STRUCTURED_OUTPUTS = {"backend": "xgrammar", "disable_any_whitespace": True}


def engine_args(model: str, *, seed: int = 0, max_model_len: int = 8192, **extra: Any) -> Any:
    """Defaults for the CPU build (fp32, eager: the embedded model's numbers match the local engine's;
    xgrammar, compact JSON); `extra` overrides any of them (a GPU run passes dtype="auto", enforce_eager=False)."""
    from vllm.config import StructuredOutputsConfig
    from vllm.engine.arg_utils import AsyncEngineArgs

    settings = {"enforce_eager": True, "dtype": "float32", "disable_log_stats": True,
                "structured_outputs_config": StructuredOutputsConfig(**STRUCTURED_OUTPUTS), **extra}
    return AsyncEngineArgs(model=model, seed=seed, max_model_len=max_model_len, **settings)


# vLLM's parser for replies that call tools as `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
# (the Hermes format): used for templates that render `tools=` themselves.
TOOL_PARSER = "hermes"
# A malformed call in a reply is the model's data (the reply stays text), not an error: the
# parser would log each one with a traceback.
logging.getLogger(f"vllm.tool_parsers.{TOOL_PARSER}_tool_parser").setLevel(logging.CRITICAL)


def structured_outputs(config: GenerateConfig) -> Any:
    """vLLM's `StructuredOutputsParams` for the config's constraint (None when it has none)."""
    from vllm.sampling_params import StructuredOutputsParams

    if config.json_schema is not None:
        return StructuredOutputsParams(json=config.json_schema)
    if config.choice is not None:
        return StructuredOutputsParams(choice=list(config.choice))
    if config.regex is not None:
        return StructuredOutputsParams(regex=config.regex)
    if config.forced_tool:
        schema = tool_call_schema(config.tools or [], config.tool_choice)
        return StructuredOutputsParams(json=schema)
    return None


def constraint_label(config: GenerateConfig) -> str:
    """The constraint, named for an error message."""
    if config.json_schema is not None:
        return f"json_schema {json.dumps(config.json_schema)[:300]}"
    if config.choice is not None:
        return f"choice {config.choice!r}"
    if config.regex is not None:
        return f"regex {config.regex!r}"
    return f"tool call schema for tool_choice {config.tool_choice!r} ({', '.join(t.name for t in config.tools or [])})"


def check_with_engine(engine: Any, params: Any, config: GenerateConfig, name: str) -> None:
    """The engine's own request validation, on a copy (it rewrites what it checks), so a constraint
    vLLM cannot serve is named as such and not lost among other request errors."""
    probe = params.clone()
    settings = (engine.model_config, engine.vllm_config.speculative_config,
                engine.vllm_config.structured_outputs_config, engine.get_tokenizer())
    del engine  # the error's traceback holds this frame: it must not keep the engine alive past aclose()
    try:
        probe.verify(*settings)
    except Exception as exc:  # noqa: BLE001 - vLLM raises ValueError subclasses and its backends' own errors
        raise ConstraintError(f"{name}: vLLM rejects the {constraint_label(config)}: {exc}") from None


def constraint_path(config: GenerateConfig, native: bool) -> ConstraintPath:
    """"provider" when vLLM enforced the asked-for form: structured outputs (a schema, choice, regex
    or forced call), or, for a template that renders tools, its tool parser; "none" otherwise (no
    form asked, or `tool_choice` auto under the embedded protocol, which the model may ignore -- as
    on `local/`)."""
    if config.tools and config.tool_choice == "none":
        return "none"  # tools listed but not to be called: no form asked
    if native and config.tools:
        return "provider"
    return "provider" if structured_outputs_kind(config) else "none"


def structured_outputs_kind(config: GenerateConfig) -> str | None:
    """Which of vLLM's structured outputs the config asks for (None: free text)."""
    if config.json_schema is not None or config.forced_tool:
        return "json"
    if config.choice is not None:
        return "choice"
    return "regex" if config.regex is not None else None


def openai_tools(tools: list[ToolSpec]) -> list[dict[str, JsonValue]]:
    """Tools in the OpenAI form chat templates and vLLM's request types take."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                               "parameters": t.parameters}} for t in tools]


def chat_prompt(tokenizer: Any, messages: list[ChatMessage], config: GenerateConfig) -> tuple[list[int], bool]:
    """(prompt ids, whether the template rendered the tools itself). A template that renders `tools=`
    gets the callable tools so; any other (its output is unchanged, as SmolLM2's) gets the embedded
    model's prompt (`embedded.chat_prompt_ids`), the one `local/` sends."""
    tools = callable_tools(config)
    if tools:
        def render(**extra: Any) -> list[int]:
            return as_id_list(tokenizer.apply_chat_template(template_messages(messages), add_generation_prompt=True,
                                                            tokenize=True, **extra))

        native = render(tools=openai_tools(tools))
        if native != render():
            return native, True
    return chat_prompt_ids(tokenizer, messages, config), False


def native_tool_calls(tokenizer: Any, text: str, config: GenerateConfig, name: str) -> tuple[str, list[ToolCall]]:
    """A reply to a template that rendered the tools: its text and tool calls. A forced call is the
    whole reply (JSON, by the grammar); with `tool_choice` auto vLLM's tool parser finds the calls and
    the text before them. A reply cut short (no complete call) stays text, for the caller to see the
    truncation; so does a call that names no listed tool or whose arguments fail its schema (a
    `format` the grammar does not hold): the caller's re-ask path sees it."""
    tools = callable_tools(config)
    if not tools:
        return text, []
    if config.forced_tool:
        return forced_call(text, tools)
    return parsed_calls(tokenizer, text, tools, name)


def usable_call(name: Any, arguments: Any, tools: list[ToolSpec], call_id: str) -> ToolCall | None:
    """The call, if it names one of `tools` with arguments valid against that tool's schema."""
    tool = next((t for t in tools if t.name == name), None)
    if tool is None or not isinstance(arguments, dict):
        return None
    if not jsonschema.Draft202012Validator(tool.parameters).is_valid(arguments):
        return None
    return ToolCall(id=call_id, name=tool.name, arguments=arguments)


def forced_call(text: str, tools: list[ToolSpec]) -> tuple[str, list[ToolCall]]:
    try:
        data = json.loads(text)
    except ValueError:
        return text, []
    if not isinstance(data, dict):
        return text, []
    call = usable_call(data.get("name"), data.get("arguments"), tools, f"call_{uuid.uuid4().hex[:24]}")
    return ("", [call]) if call is not None else (text, [])


def parsed_calls(tokenizer: Any, text: str, tools: list[ToolSpec], name: str) -> tuple[str, list[ToolCall]]:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers import ToolParserManager

    parser = ToolParserManager.get_tool_parser(TOOL_PARSER)(tokenizer)
    request = ChatCompletionRequest(messages=[], model=name, tools=openai_tools(tools), tool_choice="auto")
    found = parser.extract_tool_calls(text, request)
    if not found.tools_called:
        return text, []
    calls = []
    for found_call in found.tool_calls:
        try:
            arguments = json.loads(found_call.function.arguments or "{}")
        except ValueError:
            return text, []
        call = usable_call(found_call.function.name, arguments, tools, found_call.id or "")
        if call is None:
            return text, []  # a call no caller can use: the reply stays text
        calls.append(call)
    return found.content or "", calls


class VLLMModel:
    def __init__(self, name: str, **engine_kwargs: Any) -> None:
        if not vllm_available():
            raise HarnessError(f"vllm/{name}: {INSTALL_HINT}")
        self.name = f"vllm/{name}"
        base, adapter, mode = parse_adapter_name(name, "vllm")
        self.model_path = resolve_model(base)
        self.lora_request: Any = None
        self.extra_args: dict[str, str] | None = None  # SamplingParams.extra_args: the plugin's mode (and ReFT)
        if adapter is not None:
            from vllm.lora.request import LoRARequest

            self.extra_args = {MODE_KEY: PLUGIN_MODES[mode]}
            if adapter_kind(adapter, self.name) == "lora":
                plugin = preft_engine_kwargs(lora_rank(adapter, self.name), max_loras=1)
                self.lora_request = LoRARequest(lora_name=adapter.name or "adapter", lora_int_id=1, lora_path=str(adapter))
            else:
                plugin = preft_engine_kwargs(reft={"adapter": str(adapter)})
                self.extra_args["reft"] = "adapter"
            engine_kwargs = {**plugin, **engine_kwargs}
        self.engine_kwargs = engine_kwargs
        self._engine: Any = None
        self._lock = asyncio.Lock()

    async def _get_engine(self) -> Any:
        async with self._lock:
            if self._engine is None:
                from vllm.v1.engine.async_llm import AsyncLLM

                engine = AsyncLLM.from_engine_args(engine_args(self.model_path, **self.engine_kwargs))
                try:
                    if self.extra_args is not None:
                        await _require_plugin(engine, self.name)
                    self._engine = engine
                finally:
                    # An import made in this frame (vLLM's first) can leave the frame referenced
                    # from a stored traceback: a local must not keep the engine alive past aclose().
                    del engine
            return self._engine

    async def start(self) -> None:
        """Start the engine now rather than on the first call (a replica actor, ray_replicas.py)."""
        await self._get_engine()

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        check_constraint(config)
        started = time.perf_counter()
        engine = await self._get_engine()
        tokenizer = engine.get_tokenizer()
        try:
            ids, native = chat_prompt(tokenizer, messages, config)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{self.name} could not template the messages: {type(exc).__name__}: {exc}") from exc
        finally:
            del engine, tokenizer  # see _run: no frame may keep the engine alive past aclose()
        return await self._run(ids, config, started, request_hash(self.name, messages, config), native)

    async def complete(self, prompt: str, config: GenerateConfig) -> ModelOutput:
        """Raw text, no chat template; tokenised as `harness generate` does for the embedded model.
        Constraints apply as in `generate`; with `tool_choice` auto the prompt is the caller's, so
        it must describe the tools itself (the reply is still read for a call, by the embedded
        model's protocol, as `local/` reads it)."""
        check_constraint(config)
        started = time.perf_counter()
        engine = await self._get_engine()
        tokenizer = engine.get_tokenizer()
        try:
            ids = as_id_list(tokenizer(prompt)["input_ids"])
        finally:
            del engine, tokenizer
        if not ids:
            raise ModelError(f"{self.name}: the prompt is empty after tokenisation: give at least one token of text")
        # Keyed as the embedded engine keys raw prompts: never the same key as a chat call.
        key = raw_prompt_hash(self.name, prompt, config)
        return await self._run(ids, config, started, key, native=False)

    async def _run(self, ids: list[int], config: GenerateConfig, started: float, key: str,
                   native: bool) -> ModelOutput:
        """One request. `native`: the template rendered the tools, so vLLM's tool parser reads the
        reply; otherwise the embedded model's protocol does (`read_tool_call`)."""
        from vllm import SamplingParams

        engine = await self._get_engine()
        params = SamplingParams(temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens,
                                seed=config.seed, stop=config.stop or None, extra_args=self.extra_args,
                                structured_outputs=structured_outputs(config))
        final = None
        try:
            if params.structured_outputs is not None:
                check_with_engine(engine, params, config, self.name)
            async for out in engine.generate({"prompt_token_ids": ids}, params, request_id=uuid.uuid4().hex,
                                             lora_request=self.lora_request):
                final = out
            if final is None or not final.outputs:
                raise ModelError(f"{self.name} returned no output")
            choice = final.outputs[0]
            text, calls = (native_tool_calls(engine.get_tokenizer(), choice.text, config, self.name) if native
                           else (choice.text, []))
        except (asyncio.CancelledError, ModelError):
            raise
        except Exception as exc:  # noqa: BLE001 - an engine failure is this call's error
            raise ModelError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            # This frame can outlive the call (asyncio keeps finished frames referenced for a while);
            # it must not keep the engine (nor its tokenizer) alive past aclose(), or vLLM's
            # finaliser runs at interpreter exit.
            del engine
        out = ModelOutput(
            text=text, finish_reason="tool_calls" if calls else (choice.finish_reason or "length"),
            usage=Usage(prompt_tokens=len(final.prompt_token_ids or ids), completion_tokens=len(choice.token_ids), calls=1),
            latency_s=time.perf_counter() - started, request_hash=key, tool_calls=calls,
            constrained_by=constraint_path(config, native))
        return out if native else read_tool_call(out, config)

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.shutdown()
            del engine  # finalise now, not at interpreter exit when vLLM's globals are gone
            gc.collect()


async def _require_plugin(engine: Any, name: str) -> None:
    """Without the plugin the flag would be ignored and the adapter served on every token."""
    try:
        await engine.collective_rpc("preft_stats")
    except Exception as exc:  # noqa: BLE001 - vLLM wraps the worker's NotImplementedError
        engine.shutdown()
        raise HarnessError(f"{name}: the PreFT vLLM plugin is not loaded in vLLM's workers ({type(exc).__name__}); "
                           "reinstall with `make vllm-install` and leave VLLM_PLUGINS unset or include `preft`") from exc


def exec_openai_server(name: str, port: int) -> None:
    """Replace this process with vLLM's OpenAI-compatible server for `vllm/<name>` on 127.0.0.1.

    Clients call it as `openai/<name>` with `--base-url http://127.0.0.1:PORT/v1`; with an adapter
    (`<name>@DIR`), `openai/<DIR's folder name>` is the adapter (prefill-only unless `#all-token`)
    and `openai/<name>` the base model. (`vllm serve` does not start under the CPU build's package
    name; the module entry point does.)"""
    import sys

    if not vllm_available():
        raise HarnessError(f"vllm/{name}: {INSTALL_HINT}")
    base, adapter, mode = parse_adapter_name(name, "vllm")
    env = dict(os.environ)
    for key, value in CPU_ENV.items():
        env.setdefault(key, value)
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", resolve_model(base),
            "--served-model-name", base, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
            "--dtype", "float32", "--max-model-len", "8192", "--disable-log-stats",
            "--structured-outputs-config", json.dumps(STRUCTURED_OUTPUTS)]
    if adapter is not None:
        if adapter_kind(adapter, f"vllm/{name}") == "reft":
            raise HarnessError(f"vllm/{name}: a served ReFT adapter is not supported (vLLM's server has no "
                               "per-request ReFT field); use the in-process provider vllm/...@DIR")
        argv += ["--enable-lora", "--max-loras", "1", "--max-lora-rank", str(vllm_rank(lora_rank(adapter, f"vllm/{name}"))),
                 "--lora-modules", f"{adapter.name}={adapter}"]
        if mode == "preft":
            argv += ["--additional-config", json.dumps(PREFT_FLAG)]
            env.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
    os.execve(sys.executable, argv, env)


class EngineFactory:
    """Builds the engine of one replica actor (`ray_replicas.py`): this provider's in-process model.
    Pickled by reference to the actor, where vLLM is imported."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, index: int) -> Model:
        return VLLMModel(self.name)


class VLLMProvider:
    """`vllm/NAME[@ADAPTER_DIR][?replicas=N]`: vLLM in-process (its CPU build in `.venv-vllm`), or N
    engines as Ray actors behind the core's least-loaded router (`harness.providers.ray_replicas`).
    Besides `validate` and `create` it has the core's two optional hooks: `replica_engines` (the Ray
    executor's driver starts the replicas) and `serve` (`harness serve`)."""

    name = "vllm"

    def validate(self, spec: ModelSpec) -> None:
        name, count = split_replicas(spec.name)
        # Replicas run vLLM in their actors: here (the driver, each Ray task) it need only be installed.
        if not (vllm_available() if count is None else importlib.util.find_spec("vllm") is not None):
            raise HarnessError(f"{spec.full}: {INSTALL_HINT}")
        base, adapter, _ = parse_adapter_name(name, "vllm")
        resolve_model(base)
        if adapter is not None and adapter_kind(adapter, spec.full) == "lora":
            lora_rank(adapter, spec.full)

    def create(self, spec: ModelSpec) -> Model:
        name, count = split_replicas(spec.name)
        if count is not None:
            return replicated(spec.full, count, EngineFactory(name))
        return VLLMModel(spec.name)

    def replica_engines(self, spec: ModelSpec) -> tuple[int | str, Callable[[int], Model]] | None:
        """For `?replicas=N`: N (or "auto") and the factory of each replica actor's engine; else None."""
        name, count = split_replicas(spec.name)
        return None if count is None else (count, EngineFactory(name))

    def serve(self, spec: ModelSpec, port: int) -> None:
        """`harness serve --model vllm/...`: this process becomes vLLM's OpenAI-compatible server."""
        exec_openai_server(spec.name, port)


PROVIDER = VLLMProvider()
