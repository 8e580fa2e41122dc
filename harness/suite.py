"""The suite contract and the registry (entry-point group `harness.suites`).

The core knows no specific suite: environments register theirs in pyproject.toml, e.g.
    [project.entry-points."harness.suites"]
    proact = "environments.proact.suite:ProactOfflineSuite"
"""

from __future__ import annotations

import inspect

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from harness.calls import ManagedModel
from harness.errors import HarnessError
from harness.providers.base import GenerateConfig, ModelOutput, Usage
from harness.records import CallRecord, Metric, SampleRecord


@dataclass
class Sample:
    id: str
    data: dict[str, Any]


@dataclass
class SampleOutcome:
    """What a suite returns for one sample; the runner adds ids, usage, calls and timing."""

    output: dict[str, Any]
    scores: dict[str, Any]
    errors: list[str] = field(default_factory=list)


class SampleContext:
    """Per-sample view of the run: the models by role, the sample's seed, and its accounting."""

    def __init__(self, models: dict[str, ManagedModel], seed: int, overrides: dict[str, dict[str, Any]]):
        self.models = models
        self.seed = seed
        self.overrides = overrides  # role -> CLI generation overrides (max_tokens, temperature)
        self.usage: dict[str, Usage] = {}
        self.calls: list[CallRecord] = []

    async def generate(self, role: str, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        overrides = self.overrides.get(role)
        if overrides:
            config = config.merged(**overrides)
        if config.seed is None:
            config = config.model_copy(update={"seed": self.seed})
        model = self.models[role]
        out = await model.generate(messages, config)
        self.usage.setdefault(role, Usage()).add(out.usage if not out.cached else Usage())
        self.calls.append(CallRecord(
            role=role, model=model.name, request_hash=out.request_hash, cached=out.cached,
            attempts=out.attempts, latency_s=out.latency_s, finish_reason=out.finish_reason, usage=out.usage,
        ))
        return out


class Suite(ABC):
    name: str
    version: str
    roles: tuple[str, ...] = ("assistant",)
    headline_metric: str
    description: str = ""

    @abstractmethod
    def load_samples(self, corpus: str | None) -> list[Sample]:
        """All samples of the corpus (default corpus when None); raise HarnessError on bad input."""

    def corpus_identity(self, corpus: str | None) -> dict[str, Any]:
        """Path and content hash of the corpus, for the manifest and the config hash."""
        return {"path": corpus}

    @abstractmethod
    async def run_sample(self, sample: Sample, ctx: SampleContext) -> SampleOutcome:
        """Run one sample. Model errors may be caught and recorded inside the outcome; anything
        raised is recorded on the sample by the runner and the run goes on."""

    @abstractmethod
    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        """Metrics with CIs over the suite's independent unit."""

    def scores_on_failure(self, sample: Sample) -> dict[str, Any]:
        """Scores recorded when a sample fails as a whole (timeout, crash), so that metrics can
        count what it should have produced as errors instead of dropping it."""
        return {}

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        """The headline metric per group (e.g. per style), if the suite has groups."""
        return {}

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return {}

    def official_summary(self, records: list[SampleRecord]) -> dict[str, Any]:
        return {}


def available_suites() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group="harness.suites")}


def get_suite(name: str, options: dict[str, Any] | None = None) -> Suite:
    """The installed suite `name`, built with `options` (keyword arguments of its constructor)."""
    eps = available_suites()
    if name not in eps:
        known = ", ".join(sorted(eps)) or "none installed (run `pip install -e .`)"
        raise HarnessError(f"unknown suite {name!r}: choose one of {known} (see `harness list`)")
    cls = eps[name].load()
    return cls(**coerce_suite_options(name, cls, options or {}))


def suite_option_names(cls: type) -> dict[str, Any]:
    """Keyword options a suite class accepts, with their defaults; a constructor that passes
    `**options` on to its base also accepts the base's (its own defaults win)."""
    out: dict[str, Any] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = inspect.signature(klass.__init__).parameters
        for p in params.values():
            if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty:
                out.setdefault(p.name, p.default)
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            break
    return out


def coerce_suite_options(name: str, cls: type, options: dict[str, Any]) -> dict[str, Any]:
    """Check option names against the suite's constructor and convert text values to the type of
    each option's default, so `--suite-option planner_attempts=1` reaches the suite as an int."""
    known = suite_option_names(cls)
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in known:
            choices = ", ".join(f"{k}={v!r}" for k, v in known.items()) or "none"
            raise HarnessError(f"--suite-option {key}: suite {name!r} has no such option (options and defaults: {choices})")
        default = known[key]
        kind = type(default) if default is not None else str
        if not isinstance(value, str) or kind is str:
            out[key] = value
            continue
        try:
            out[key] = {"true": True, "false": False}[value.lower()] if kind is bool else kind(value)
        except (KeyError, ValueError):
            raise HarnessError(f"--suite-option {key}={value}: expected a {kind.__name__} like {default!r}") from None
    return out


def parse_suite_options(items: list[str]) -> dict[str, str]:
    """`KEY=VALUE` strings from the command line to a dict; a malformed item is one clear error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise HarnessError(f"--suite-option {item!r}: write it as KEY=VALUE, e.g. planner_attempts=1")
        out[key.strip()] = value.strip()
    return out
