"""`vllm/<hf-id-or-path>`: an in-process vLLM engine (AsyncLLM), in vLLM's own environment.

vLLM lives in its own virtual environment (`make vllm-install` -> `.venv-vllm`): its CPU build
pins transformers and pulls packages the default environment must not have. `vllm/smollm2-135m`
names the embedded model's converted safetensors folder, so the same weights run on both engines.

`vllm/<model>@DIR[#all-token]` serves a peft LoRA adapter. By default it is prefill-only (PreFT):
the engine starts with the PreFT vLLM plugin's flag (`additional_config={"preft": "prefill-only"}`,
see kernels/preft/vllm_plugin.py), so the adapter shapes the prompt and decoding runs on the base
weights, exactly as `local/<model>@DIR` does; `#all-token` is stock vLLM LoRA.

One engine per provider instance, started on the first call on the caller's event loop (the
runner shares one instance per spec across roles) and shut down by `aclose()`. The chat template
is applied here with the model's tokenizer, as the embedded provider does, so both engines see
the same prompt token ids.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
import uuid
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.spec import ModelSpec
from harness.providers.base import GenerateConfig, ModelError, ModelOutput, Usage, request_hash
from harness.providers.local import as_id_list, parse_adapter_name

EMBEDDED_ALIAS = "smollm2-135m"
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
    if name == EMBEDDED_ALIAS:
        from harness.providers.local_weights import ensure_converted

        return str(ensure_converted())
    path = Path(name).expanduser()
    if name.startswith((".", "/", "~")) and not path.is_dir():
        raise HarnessError(f"vllm/{name}: model folder {path} does not exist")
    return str(path) if path.is_dir() else name


# vLLM accepts these ranks for --max-lora-rank; an adapter's rank is rounded up to the next one.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
PREFT_FLAG = {"preft": "prefill-only"}  # additional_config that turns the PreFT plugin on
PLUGIN_MODES = {"preft": "prefill-only", "all-token": "all-token"}  # harness adapter mode -> plugin mode


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
    import json

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


def preft_flag(reft: dict[str, str] | None = None) -> dict[str, Any]:
    """The plugin's `additional_config`: prefill-only by default, plus ReFT folders by name."""
    return {"preft": {"mode": "prefill-only", "reft": dict(reft)}} if reft else dict(PREFT_FLAG)


def preft_engine_kwargs(max_rank: int = 0, max_loras: int = 0, reft: dict[str, str] | None = None) -> dict[str, Any]:
    """Engine arguments for the PreFT plugin: LoRA when `max_loras` > 0, ReFT folders by name. The
    plugin patches vLLM's V1 model runner, so V1 is asked for (V2 is vLLM's default where Triton
    runs); set before the engine starts."""
    os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
    kwargs: dict[str, Any] = {"additional_config": preft_flag(reft)}
    if max_loras:
        kwargs.update(enable_lora=True, max_loras=max_loras, max_lora_rank=vllm_rank(max_rank))
    return kwargs


def engine_args(model: str, *, seed: int = 0, max_model_len: int = 8192, **extra: Any) -> Any:
    """Defaults for the CPU build (fp32, eager: the embedded model's numbers match the local engine's);
    `extra` overrides any of them (a GPU run passes dtype="auto", enforce_eager=False)."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    settings = {"enforce_eager": True, "dtype": "float32", "disable_log_stats": True, **extra}
    return AsyncEngineArgs(model=model, seed=seed, max_model_len=max_model_len, **settings)


class VLLMModel:
    def __init__(self, name: str, **engine_kwargs: Any) -> None:
        if not vllm_available():
            raise HarnessError(f"vllm/{name}: {INSTALL_HINT}")
        self.name = f"vllm/{name}"
        base, adapter, mode = parse_adapter_name(name, "vllm")
        self.model_path = resolve_model(base)
        self.lora_request: Any = None
        self.extra_args: dict[str, Any] | None = None
        if adapter is not None:
            from vllm.lora.request import LoRARequest

            self.extra_args = {"preft_mode": PLUGIN_MODES[mode]}
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
                if self.extra_args is not None:
                    await _require_plugin(engine, self.name)
                self._engine = engine
            return self._engine

    async def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        from vllm import SamplingParams

        started = time.perf_counter()
        engine = await self._get_engine()
        tokenizer = engine.get_tokenizer()
        try:
            ids = as_id_list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True))
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{self.name} could not template the messages: {type(exc).__name__}: {exc}") from exc
        params = SamplingParams(temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens,
                                seed=config.seed, stop=config.stop or None, extra_args=self.extra_args)
        final = None
        try:
            async for out in engine.generate({"prompt_token_ids": ids}, params, request_id=uuid.uuid4().hex,
                                             lora_request=self.lora_request):
                final = out
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - an engine failure is this call's error
            raise ModelError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            # This frame can outlive the call (asyncio keeps finished frames referenced for a while);
            # it must not keep the engine alive past aclose(), or vLLM's finaliser runs at interpreter exit.
            del engine, tokenizer
        if final is None or not final.outputs:
            raise ModelError(f"{self.name} returned no output")
        choice = final.outputs[0]
        return ModelOutput(
            text=choice.text, finish_reason=choice.finish_reason or "length",
            usage=Usage(prompt_tokens=len(final.prompt_token_ids or ids), completion_tokens=len(choice.token_ids), calls=1),
            latency_s=time.perf_counter() - started, request_hash=request_hash(self.name, messages, config))

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
    import json
    import sys

    if not vllm_available():
        raise HarnessError(f"vllm/{name}: {INSTALL_HINT}")
    base, adapter, mode = parse_adapter_name(name, "vllm")
    env = dict(os.environ)
    for key, value in CPU_ENV.items():
        env.setdefault(key, value)
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", resolve_model(base),
            "--served-model-name", base, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
            "--dtype", "float32", "--max-model-len", "8192", "--disable-log-stats"]
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


class VLLMProvider:
    """`vllm/NAME[@ADAPTER_DIR]`: vLLM in-process (its CPU build in `.venv-vllm`)."""

    name = "vllm"

    def validate(self, spec: ModelSpec) -> None:
        if not vllm_available():
            raise HarnessError(f"{spec.full}: {INSTALL_HINT}")
        base, adapter, _ = parse_adapter_name(spec.name, "vllm")
        resolve_model(base)
        if adapter is not None and adapter_kind(adapter, spec.full) == "lora":
            lora_rank(adapter, spec.full)

    def create(self, spec: ModelSpec) -> "VLLMModel":
        return VLLMModel(spec.name)


PROVIDER = VLLMProvider()
