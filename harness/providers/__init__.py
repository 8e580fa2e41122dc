"""Model providers. `load_model(spec)` is the one way the rest of the harness gets a model."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from harness.errors import HarnessError
from harness.providers.base import GenerateConfig, Model, ModelError, ModelOutput, RetryableModelError, Usage
from harness.spec import ModelSpec

__all__ = ["GenerateConfig", "Model", "ModelError", "ModelOutput", "RetryableModelError", "Usage", "load_model"]

LOCAL_MODELS = ("smollm2-135m",)


def validate_spec(spec: ModelSpec) -> None:
    """Everything about a spec that can be checked without calling the model."""
    if spec.provider == "local":
        from harness.providers.local import parse_adapter_name

        if parse_adapter_name(spec.name)[0] not in LOCAL_MODELS:
            raise HarnessError(f"unknown local model {spec.full!r}: the embedded model is local/smollm2-135m "
                               "(with an adapter: local/smollm2-135m@DIR)")
    if spec.provider == "openai":
        from harness.providers.openai_provider import api_key_for

        api_key_for(spec.base_url)
    if spec.provider == "vllm":
        from harness.providers.local import parse_adapter_name
        from harness.providers.vllm_provider import INSTALL_HINT, adapter_kind, lora_rank, resolve_model, vllm_available

        if not vllm_available():
            raise HarnessError(f"{spec.full}: {INSTALL_HINT}")
        base, adapter, _ = parse_adapter_name(spec.name, "vllm")
        resolve_model(base)
        if adapter is not None and adapter_kind(adapter, spec.full) == "lora":
            lora_rank(adapter, spec.full)


def load_model(spec: ModelSpec) -> Model:
    validate_spec(spec)
    if spec.provider == "local":
        return _plugin_provider("local")(spec)
    if spec.provider == "openai":
        from harness.providers.openai_provider import OpenAIModel

        return OpenAIModel(spec.name, spec.base_url)
    if spec.provider == "litellm":
        from harness.providers.litellm_provider import LiteLLMModel

        return LiteLLMModel(spec.name, spec.base_url)
    if spec.provider == "vllm":
        from harness.providers.vllm_provider import VLLMModel

        return VLLMModel(spec.name)
    raise AssertionError(f"unhandled provider {spec.provider}")  # validate_spec rejects the rest


def _plugin_provider(name: str) -> Callable[[ModelSpec], Model]:
    """A provider registered by another package of this project (e.g. `local` by `kernels`), so the
    core depends on no package above it."""
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group="harness.providers") if ep.name == name]
    if not found:
        raise HarnessError(f"provider {name!r} is not installed: run `make install` (pip install -e '.[local,kernels]')")
    factory: Callable[[ModelSpec], Model] = found[0].load()
    return factory


def check_reachable(endpoints: Mapping[str, tuple[str, str | None]], timeout_s: float = 5.0) -> None:
    """Fail fast, before anything is recorded, when a remote endpoint cannot be reached.
    `endpoints`: role -> (model spec, base URL or None) for the roles a run will call."""
    import socket
    from urllib.parse import urlparse

    for role, (text, base_url) in endpoints.items():
        if text.startswith("local/"):
            continue
        url = base_url or ("https://api.openai.com/v1" if text.startswith("openai/") else None)
        if url is None:
            continue
        parsed = urlparse(url)
        if not parsed.hostname:
            raise HarnessError(f"--base-url {url!r} is not a URL: write e.g. http://127.0.0.1:8000/v1")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            socket.create_connection((parsed.hostname, port), timeout=timeout_s).close()
        except OSError as exc:
            flag = f"the endpoint of {role} ({text})" if base_url else f"the endpoint of {text}"
            raise HarnessError(
                f"{flag} {url} is unreachable ({exc.strerror or exc}): start the server (e.g. `harness serve`) or fix --base-url"
            ) from exc
