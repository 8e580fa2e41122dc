"""Model providers. `load_model(spec)` is the one way the rest of the harness gets a model."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Protocol

from harness.errors import HarnessError
from harness.replicas import split_urls
from harness.providers.base import GenerateConfig, Model, ModelError, ModelOutput, RetryableModelError, Usage
from harness.spec import ModelSpec, provider_names

__all__ = ["GenerateConfig", "Model", "ModelError", "ModelOutput", "RetryableModelError", "Usage", "load_model"]

class Provider(Protocol):
    """One provider: checks a spec without calling anything, and builds its model. Registered under
    the entry-point group `harness.providers` (built-ins included, in pyproject.toml), loaded lazily
    and once: a provider's module is imported only when a spec names it.

    Two optional hooks, looked up with `getattr` (`vllm/` has both): `replica_engines(spec)` -> None
    or (count, engine factory) for a spec that asks for Ray replicas (the Ray executor's driver
    starts them: `ray_replicas.start_replica_sets`), and `serve(spec, port)`, which `harness serve`
    calls instead of the harness's own server (it may replace the process). A provider whose models
    are labelled synthetic test generators, not models (ProGraf's mock), says so with
    `synthetic = True`: leaderboard export refuses their runs (`is_synthetic`)."""

    name: str

    def validate(self, spec: ModelSpec) -> None: ...

    def create(self, spec: ModelSpec) -> Model: ...


_LOADED: dict[str, Provider] = {}


def get_provider(name: str) -> Provider:
    if name not in _LOADED:
        found = [ep for ep in entry_points(group="harness.providers") if ep.name == name]
        if not found:
            raise HarnessError(f"provider {name!r} is not installed: use one of {', '.join(provider_names())} "
                               "(or run `make install`: pip install -e '.[local,kernels]')")
        _LOADED[name] = found[0].load()
    return _LOADED[name]


def is_synthetic(spec_text: str) -> bool:
    """Whether a stored model spec names a labelled synthetic generator (its provider says so); a
    spec of a provider not installed here is not known to be one."""
    provider = spec_text.partition("/")[0]
    if provider not in provider_names():
        return False
    return bool(getattr(get_provider(provider), "synthetic", False))


def validate_spec(spec: ModelSpec) -> None:
    """Everything about a spec that can be checked without calling the model."""
    get_provider(spec.provider).validate(spec)


def load_model(spec: ModelSpec) -> Model:
    """The one way the rest of the harness gets a model: parse (ModelSpec), validate, create."""
    provider = get_provider(spec.provider)
    provider.validate(spec)
    return provider.create(spec)


def check_reachable(endpoints: Mapping[str, tuple[str, str | None]], timeout_s: float = 5.0) -> None:
    """Fail fast, before anything is recorded, when a remote endpoint cannot be reached.
    `endpoints`: role -> (model spec, base URL or None) for the roles a run will call; a base URL
    naming several replicas (URL1,URL2) has each of them checked."""
    for role, (text, base_url) in endpoints.items():
        if text.startswith("local/"):
            continue
        default = "https://api.openai.com/v1" if text.startswith("openai/") else None
        for url in split_urls(base_url) or ([default] if default else []):
            flag = f"the endpoint of {role} ({text})" if base_url else f"the endpoint of {text}"
            _check_one(flag, url, timeout_s)


def _check_one(flag: str, url: str, timeout_s: float) -> None:
    """One endpoint accepts a TCP connection, or one clear error naming it."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if not parsed.hostname:
        raise HarnessError(f"--base-url {url!r} is not a URL: write e.g. http://127.0.0.1:8000/v1")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise HarnessError(
            f"{flag} {url} is unreachable ({exc.strerror or exc}): start the server (e.g. `harness serve`) or fix --base-url"
        ) from exc
