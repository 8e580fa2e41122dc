"""`vllm/<hf-id-or-path>`: an in-process vLLM engine (AsyncLLM), in vLLM's own environment.

vLLM lives in its own virtual environment (`make vllm-install` -> `.venv-vllm`): its CPU build
pins transformers and pulls packages the default environment must not have. `vllm/smollm2-135m`
names the embedded model's converted safetensors folder, so the same weights run on both engines.

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
from harness.providers.base import GenerateConfig, ModelError, ModelOutput, Usage, request_hash
from harness.providers.local import as_id_list

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


def engine_args(model: str, *, seed: int = 0, max_model_len: int = 8192, **extra: Any) -> Any:
    from vllm.engine.arg_utils import AsyncEngineArgs

    return AsyncEngineArgs(model=model, enforce_eager=True, dtype="float32", seed=seed, max_model_len=max_model_len,
                           disable_log_stats=True, **extra)


class VLLMModel:
    def __init__(self, name: str, **engine_kwargs: Any) -> None:
        if not vllm_available():
            raise HarnessError(f"vllm/{name}: {INSTALL_HINT}")
        self.name = f"vllm/{name}"
        self.model_path = resolve_model(name)
        self.engine_kwargs = engine_kwargs
        self._engine: Any = None
        self._lock = asyncio.Lock()

    async def _get_engine(self) -> Any:
        async with self._lock:
            if self._engine is None:
                from vllm.v1.engine.async_llm import AsyncLLM

                self._engine = AsyncLLM.from_engine_args(engine_args(self.model_path, **self.engine_kwargs))
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
                                seed=config.seed, stop=config.stop or None)
        final = None
        try:
            async for out in engine.generate({"prompt_token_ids": ids}, params, request_id=uuid.uuid4().hex):
                final = out
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - an engine failure is this call's error
            raise ModelError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
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


def exec_openai_server(name: str, port: int) -> None:
    """Replace this process with vLLM's OpenAI-compatible server for `vllm/<name>` on 127.0.0.1.

    Clients call it as `openai/<name>` with `--base-url http://127.0.0.1:PORT/v1`. (`vllm serve`
    does not start under the CPU build's package name; the module entry point does.)"""
    import sys

    if not vllm_available():
        raise HarnessError(f"vllm/{name}: {INSTALL_HINT}")
    env = dict(os.environ)
    for key, value in CPU_ENV.items():
        env.setdefault(key, value)
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", resolve_model(name),
            "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
            "--dtype", "float32", "--max-model-len", "8192", "--disable-log-stats"]
    os.execve(sys.executable, argv, env)
