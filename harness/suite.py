"""The suite contract and the registry (entry-point group `harness.suites`).

A suite is declared, not introspected: typed `Options` (a pydantic model: types, defaults,
bounds, descriptions), the roles its solver needs, a dataset (`load_samples` + `corpus_identity`),
a solver (`solve`: the agent that writes a transcript), one or more scorers (`scorers()`:
`score(sample, transcript, ctx) -> Score`), and metrics over the scored records. Solving and
scoring are separate steps, so `harness score` can redo the scores of any run without calling
the model under test again.

Typed end to end: a suite declares its sample data, transcript and scores as types
(`Suite[Data, Transcript, Scores]`, with `transcript_type` / `scores_type` set to the pydantic models),
and the runner validates each transcript once -- the fresh one on the solve path and the recorded one
on the `harness score` path alike -- so a scorer gets the object, never a dict to re-validate; metrics
read records' scores through `read_scores`. A suite that declares nothing gets JSON dicts (`Any`).

The core knows no specific suite: families register theirs in pyproject.toml, e.g.
    [project.entry-points."harness.suites"]
    proact = "environments.proact.suite:ProactOfflineSuite"
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, Generic, Literal, Protocol, cast, get_args, get_origin

from pydantic import BaseModel, ConfigDict, JsonValue, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from typing_extensions import TypeVar  # TypeVar defaults (PEP 696) before Python 3.13

from harness.calls import ManagedModel
from harness.errors import HarnessError, invalid
from harness.messages import ChatMessage
from harness.providers.base import ConstraintError, GenerateConfig, ModelOutput, Usage
from harness.records import CallRecord, ErrorRecord, Generation, Metric, MetricSpec, SampleRecord, Stage
from harness.spend import SpendMeter


def role_family(role: str) -> str:
    """`judge_2` -> `judge`: the extra members of a panel belong to their role."""
    base, sep, n = role.rpartition("_")
    return base if sep and n.isdigit() else role


class SuiteOptions(BaseModel):
    """Base of every suite's `Options`: unknown keys are errors, values are immutable once built."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# A suite's own types; `Any` (JSON dicts) for a suite that declares none.
DataT = TypeVar("DataT", default=Any)
TranscriptT = TypeVar("TranscriptT", default=Any)
ScoresT = TypeVar("ScoresT", default=Any)
TranscriptT_contra = TypeVar("TranscriptT_contra", contravariant=True, default=Any)


@dataclass
class Sample(Generic[DataT]):
    id: str
    data: DataT


# A family's payload: its own pydantic model (preferred: typed, versioned with the suite) or a
# plain dict. The runner stores the JSON dump, and scorers always read the dump, whether the
# transcript was just solved or loaded from a run for `harness score`.
Payload = dict[str, Any] | BaseModel


def dump_payload(payload: Payload) -> dict[str, JsonValue]:
    """A payload as it is recorded (JSON types)."""
    return payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload


@dataclass
class Transcript:
    """What a solver returns for one sample: the transcript and the errors met on the way."""

    output: Payload
    # Sequence, not list: a family's own `list[str]` of messages is accepted as it is (read only here).
    errors: Sequence[ErrorRecord | str] = field(default_factory=list)


@dataclass
class Score:
    """What a scorer returns for one transcript."""

    values: Payload
    errors: Sequence[ErrorRecord | str] = field(default_factory=list)


@dataclass
class SampleOutcome:
    """`Suite.run_sample`'s result: the transcript, the scores, and every error's message."""

    output: dict[str, JsonValue]
    scores: dict[str, JsonValue]
    errors: list[str]


def error_records(errors: Sequence[ErrorRecord | str], stage: Stage) -> list[ErrorRecord]:
    """A suite may report errors as plain text; the record keeps them typed (`kind` = suite)."""
    return [e if isinstance(e, ErrorRecord) else ErrorRecord(kind="suite", message=e, stage=stage) for e in errors]


class SampleContext:
    """Per-sample view of the run: the models by role, the sample's seed, and its accounting."""

    def __init__(self, models: dict[str, ManagedModel], seed: int, overrides: dict[str, Generation],
                 meter: SpendMeter | None = None):
        self.models = models
        self.seed = seed
        self.overrides = overrides  # role -> CLI generation overrides (max_tokens, temperature)
        self.meter = meter  # the run's spend and caps: checked before each call, charged after
        self.usage: dict[str, Usage] = {}
        self.calls: list[CallRecord] = []

    async def generate(self, role: str, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        overrides = self.overrides.get(role)
        if overrides:
            config = config.merged(**overrides)
        if config.seed is None:
            config = config.model_copy(update={"seed": self.seed})
        if role not in self.models:
            raise HarnessError(f"role {role!r} has no model in this run (roles: {', '.join(self.models)})")
        model = self.models[role]
        if self.meter is not None:
            self.meter.check(role)  # BudgetReached once a cap is reached: the sample stops here
        try:
            out = await model.generate(messages, config)
        except ConstraintError as exc:  # the role's form is the suite's input: name the role
            raise ConstraintError(f"{role} ({model.name}): {exc}") from None
        paid = out.usage if not out.cached else Usage()
        self.usage.setdefault(role, Usage()).add(paid)
        if self.meter is not None:
            self.meter.charge(role, paid)
        self.calls.append(CallRecord(
            role=role, model=model.name, request_hash=out.request_hash, cached=out.cached,
            attempts=out.attempts, latency_s=out.latency_s, finish_reason=out.finish_reason, usage=out.usage,
            constrained_by=out.constrained_by, tool_calls=len(out.tool_calls),
        ))
        return out


class Scorer(Protocol[TranscriptT_contra]):
    """Scores one transcript (the suite's `transcript_type` when it declares one, validated by the
    runner). `roles`: the model roles it calls (a judge), () for a pure scorer."""

    @property
    def name(self) -> str: ...

    @property
    def roles(self) -> tuple[str, ...]: ...

    @property
    def description(self) -> str: ...

    async def score(self, sample: Sample[Any], transcript: TranscriptT_contra, ctx: SampleContext) -> Score: ...


@dataclass(frozen=True)
class FunctionScorer(Generic[TranscriptT]):
    """A scorer made of one async function (most suites' scorers are a method of the suite)."""

    name: str
    fn: Callable[[Sample[Any], TranscriptT, SampleContext], Awaitable[Score]]
    roles: tuple[str, ...] = ()
    description: str = ""

    async def score(self, sample: Sample[Any], transcript: TranscriptT, ctx: SampleContext) -> Score:
        return await self.fn(sample, transcript, ctx)


class RecordMismatch(HarnessError):
    """A recorded transcript or score that the suite's declared type does not accept."""


class Suite(ABC, Generic[DataT, TranscriptT, ScoresT]):
    name: ClassVar[str]
    version: ClassVar[str]
    headline_metric: ClassVar[str]
    description: ClassVar[str] = ""
    Options: ClassVar[type[SuiteOptions]] = SuiteOptions
    # What each metric is (direction, unit, meaning, breakdowns), by name; a `name@setting` metric
    # takes the declaration of `name`, an undeclared one is "higher is better" (MetricSpec()). The
    # runner records the declarations in each run's summary, so leaderboards rank without knowing
    # the suite.
    metric_specs: ClassVar[Mapping[str, MetricSpec]] = {}
    # Options a leaderboard row always names, defaults filled in: a run of the default (the
    # papers' method, `solver`) must say so beside the runs that set it.
    label_options: ClassVar[tuple[str, ...]] = ()
    # The suite's transcript and scores as types (pydantic models, or any type pydantic validates):
    # the runner validates each transcript into `transcript_type` once before a scorer sees it, and
    # each scorer's values into `scores_type` before they are recorded. None: JSON dicts as recorded.
    transcript_type: ClassVar[type[Any] | None] = None
    scores_type: ClassVar[type[Any] | None] = None

    @classmethod
    def metric_spec(cls, metric: str) -> MetricSpec:
        return cls.metric_specs.get(metric.split("@", 1)[0], MetricSpec())

    @classmethod
    def leaderboard_refusal(cls, options: dict[str, JsonValue]) -> str | None:
        """Why a run with these suite options must never be a leaderboard row (an upper bound, a
        diagnostic: e.g. ProGraf's `checker=oracle`), with the fix; None when it may. Leaderboard
        export refuses such a run with this reason."""
        return None

    def __init__(self, options: SuiteOptions | None = None) -> None:
        self.options = options if options is not None else self.Options()

    # ------------------------------------------------------------------ roles
    @property
    def solver_roles(self) -> tuple[str, ...]:
        """The model roles the solver calls (may depend on the options, e.g. the agent)."""
        return ("assistant",)

    @property
    def roles(self) -> tuple[str, ...]:
        """Every role of a run with the default scorer: the solver's, then the scorer's."""
        return self.solver_roles + tuple(r for r in self.scorer(None).roles if r not in self.solver_roles)

    # ------------------------------------------------------------------ dataset
    @abstractmethod
    def load_samples(self, corpus: str | None) -> list[Sample]:
        """All samples of the corpus (default corpus when None); raise HarnessError on bad input."""

    def corpus_identity(self, corpus: str | None) -> dict[str, Any]:
        """Path and content hash of the corpus, for the manifest and the config hash."""
        return {"path": corpus}

    def check_ready(self) -> None:
        """Raise HarnessError, naming the fix, when this machine lacks what `solve` needs besides
        the models (a browser, a simulator). `harness eval` calls it once before any model is built
        or called, so a missing program is one error line, not an error on every sample; a re-score
        (`harness score`) does not solve and does not call it."""
        return  # the default: a suite that needs only its models is always ready

    # ------------------------------------------------------------------ solve, score
    @abstractmethod
    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        """Produce one sample's transcript. Model errors may be recorded in it; anything raised is
        recorded on the sample by the runner and the run goes on (the sample is then not scored)."""

    @abstractmethod
    def scorers(self) -> dict[str, Scorer[TranscriptT]]:
        """The suite's scorers by name; the first is the default."""

    def read_transcript(self, output: dict[str, JsonValue]) -> TranscriptT:
        """A recorded transcript (its JSON dump) as the suite's `transcript_type`; the one place it
        is validated, on the solve and the re-score path alike."""
        return cast(TranscriptT, _validated(self, "transcript", self.transcript_type, output))

    def read_scores(self, scores: dict[str, JsonValue]) -> ScoresT:
        """A record's scores as the suite's `scores_type` (for metrics over records)."""
        return cast(ScoresT, _validated(self, "scores", self.scores_type, scores))

    def scorer(self, name: str | None) -> Scorer[TranscriptT]:
        found = self.scorers()
        if name is None:
            return next(iter(found.values()))
        if name not in found:
            raise HarnessError(f"--scorer {name}: suite {self.name!r} has no such scorer (choose one of {', '.join(found)})")
        return found[name]

    async def run_sample(self, sample: Sample, ctx: SampleContext, scorer: str | None = None) -> SampleOutcome:
        """Solve, then score, in one call (for tests and code that embeds a suite); exceptions
        propagate. The runner does not use it: it records each step and its errors on its own."""
        transcript = await self.solve(sample, ctx)
        output = dump_payload(transcript.output)
        score = await self.scorer(scorer).score(sample, self.read_transcript(output), ctx)
        values = dump_payload(score.values)
        self.read_scores(values)
        return SampleOutcome(output, values, [str(e) for e in [*transcript.errors, *score.errors]])

    def scores_on_failure(self, sample: Sample) -> dict[str, JsonValue]:
        """Scores recorded when a sample fails as a whole (timeout, crash), so that metrics can
        count what it should have produced as errors instead of dropping it."""
        return {}

    # ------------------------------------------------------------------ metrics
    @abstractmethod
    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        """Metrics with CIs over the suite's independent unit."""

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        """The headline metric per group (e.g. per style), if the suite has groups."""
        return {}

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return {}

    def official_summary(self, records: list[SampleRecord]) -> dict[str, JsonValue]:
        return {}


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(kind: type[Any]) -> TypeAdapter[Any]:
    """One adapter per type: a validator is compiled when an adapter is made."""
    if kind not in _ADAPTERS:
        _ADAPTERS[kind] = TypeAdapter(kind)
    return _ADAPTERS[kind]


def _validated(suite: Suite[Any, Any, Any], what: str, kind: type[Any] | None, value: dict[str, JsonValue]) -> Any:
    if kind is None:
        return value
    try:
        return _adapter(kind).validate_python(value)
    except ValidationError as exc:
        raise RecordMismatch(invalid(exc, f"suite {suite.name!r} {suite.version}: a {what} that its {kind.__name__} "
                                          f"does not accept", "it was written by another version of the suite: "
                                          "re-solve it, or score it with the version that wrote it")) from None


# ---------------------------------------------------------------------- registry
def available_suites() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group="harness.suites")}


def suite_class(name: str) -> type[Suite]:
    eps = available_suites()
    if name not in eps:
        known = ", ".join(sorted(eps)) or "none installed (run `pip install -e .`)"
        raise HarnessError(f"unknown suite {name!r}: choose one of {known} (see `harness list`)")
    cls = eps[name].load()
    if not (isinstance(cls, type) and issubclass(cls, Suite)):
        raise HarnessError(f"suite {name!r}: its entry point {eps[name].value} is not a harness.suite.Suite subclass")
    return cls


def get_suite(name: str, options: dict[str, Any] | None = None) -> Suite:
    """The installed suite `name`, built once with its options validated by its `Options` model
    (text values from the command line are coerced by pydantic: `planner_attempts=1` is an int).
    `options` is unchecked input (callers merge literals of mixed types), validated here."""
    cls = suite_class(name)
    return cls(parse_options(name, cls.Options, options or {}))


def parse_options(suite: str, model: type[SuiteOptions], raw: dict[str, JsonValue]) -> SuiteOptions:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "?"
        if first["type"] == "extra_forbidden":
            choices = ", ".join(f"{n}={f.default!r}" for n, f in model.model_fields.items()) or "none"
            raise HarnessError(f"--suite-option {key}: suite {suite!r} has no such option (options and defaults: {choices})") from None
        value = raw.get(key)
        info = model.model_fields.get(key)
        allowed = describe_field(info) if info else ""
        # The option is already named, so not `invalid()`'s "field X is invalid": the validator's own words.
        message = first["msg"].removeprefix("Value error, ")
        raise HarnessError(f"--suite-option {key}={value}: {message[0].lower() + message[1:]} (allowed: {allowed})") from None


def describe_field(info: FieldInfo) -> str:
    """`int >= 1 (default 10)`: type, bounds and default of one option."""
    ann = info.annotation
    if get_origin(ann) is Literal:
        kind = "one of " + ", ".join(str(a) for a in get_args(ann))
    else:
        kind = getattr(ann, "__name__", None) or str(ann).replace("typing.", "")
    bounds = []
    for meta in info.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(meta, attr, None) is not None:
                bounds.append(f"{sign} {getattr(meta, attr)}")
    return kind + (" " + ", ".join(bounds) if bounds else "") + f" (default {info.default!r})"


def parse_suite_options(items: list[str]) -> dict[str, str]:
    """`KEY=VALUE` strings from the command line to a dict; a malformed item is one clear error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise HarnessError(f"--suite-option {item!r}: write it as KEY=VALUE, e.g. planner_attempts=1")
        out[key.strip()] = value.strip()
    return out
