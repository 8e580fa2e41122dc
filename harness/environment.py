"""The agent/environment protocol: what an agent may know about any environment it acts in.

An agent sees an `Observation` (text, the action classes it may use and, where the world can list
them, admissible actions), sends one action string, and gets a `StepResult` whose `delta` is the
ground truth of what that action changed -- recorded for the metrics, never shown to the agent
before it acts. `Environment` is the synchronous contract an environment family implements
(`reset`, `step`, `action_class`, `evaluate`, `close`); `ThreadedEnv` drives one from asyncio on
a dedicated thread, which is how agents see it (`AsyncEnvironment`). A closed environment raises
`EnvironmentClosed`. All three are generic over the family's task and evaluation types
(`Environment[Task, Evaluation]`), which the core never reads.

What a family tells its agents about its action space travels through this protocol, never by an
agent knowing the family: the action help text (`Observation.info[ACTION_HELP]`, or the agent
config's `action_help`), the world model's naming help (`info[WORLD_MODEL_HELP]` or the config)
and the per-action-class `ActionMask` (the config's `mask`). Each family defines its own mask and
help next to its action space.

Deltas are typed over an entity / attribute / relation graph. Facts are compared as normalised
tuples, so a prediction and a ledger entry agree when they name the same entity, attribute and
new value (or relation):

    ("create", entity)                         an entity came into existence (e.g. "order:17")
    ("delete", entity)                         it ceased to exist
    ("attr", entity, attribute, value)         the attribute now has this value
    ("rel+", subject, relation, object)        a relation was added
    ("rel-", subject, relation, object)        a relation was removed

A world model's prediction is a `DeltaPrediction` (confidence and reversibility required, read
strictly); `PREDICTION_SCHEMA` is its JSON schema, generated from the model.

May import: the standard library, pydantic and other `harness` modules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from typing_extensions import TypeVar  # TypeVar defaults (PEP 696) before Python 3.13

STOP = "stop"  # the action class that ends an episode (with an answer), where a world has one
T = TypeVar("T")
ACTION_HELP = "action_help"  # Observation.info key: how to write this world's actions (policy prompt)
WORLD_MODEL_HELP = "world_model_help"  # Observation.info key: how this world names entities and relations


class EnvironmentClosed(RuntimeError):
    """An environment was used after `close()` (or died and was closed under the caller)."""


# ---------------------------------------------------------------- deltas
class AttributeChange(BaseModel):
    entity: str
    attribute: str
    before: Any = None
    after: Any = None


class Relation(BaseModel):
    subject: str
    relation: str
    object: str


class Delta(BaseModel):
    """The change one action made (ground truth) or is predicted to make."""

    created: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    attributes: list[AttributeChange] = Field(default_factory=list)
    relations_added: list[Relation] = Field(default_factory=list)
    relations_removed: list[Relation] = Field(default_factory=list)
    reversible: bool = True
    irreversible_cost: float = 0.0  # in the environment's own unit (e.g. money lost); 0 when reversible
    confidence: float | None = None  # predictions only: P(this delta is right), in [0, 1]

    def facts(self) -> set[tuple[str, ...]]:
        out: set[tuple[str, ...]] = {("create", _norm(e)) for e in self.created} | {("delete", _norm(e)) for e in self.deleted}
        out |= {("attr", _norm(a.entity), _norm(a.attribute), _norm(a.after)) for a in self.attributes}
        out |= {("rel+", _norm(r.subject), _norm(r.relation), _norm(r.object)) for r in self.relations_added}
        out |= {("rel-", _norm(r.subject), _norm(r.relation), _norm(r.object)) for r in self.relations_removed}
        return out

    def is_empty(self) -> bool:
        return not self.facts()


def _norm(value: Any) -> str:
    """Facts compare case- and whitespace-insensitively; numbers by value (2 == 2.0 == "2")."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"{float(value):g}"
    text = " ".join(str(value).split()).lower()
    try:
        return f"{float(text):g}"
    except ValueError:
        return text


class PredictedAttributeChange(BaseModel):
    """An attribute change as a world model must write it: the new value is required."""

    model_config = ConfigDict(strict=True)
    entity: str
    attribute: str
    before: Any = None
    after: Any = Field(description="the attribute's value after the action")


class PredictedRelation(BaseModel):
    model_config = ConfigDict(strict=True)
    subject: str
    relation: str
    object: str


class DeltaPrediction(BaseModel):
    """A world model's prediction of one action's delta. Strict (JSON types as written: `"true"` is
    not a boolean), extra keys ignored; invalid output is re-asked a bounded number of times by the
    caller and then counted as a failed prediction."""

    model_config = ConfigDict(strict=True)
    created: list[str] = Field(default_factory=list, description="entities the action creates (type:id)")
    deleted: list[str] = Field(default_factory=list, description="entities it deletes")
    attributes: list[PredictedAttributeChange] = Field(default_factory=list)
    relations_added: list[PredictedRelation] = Field(default_factory=list)
    relations_removed: list[PredictedRelation] = Field(default_factory=list)
    reversible: bool = Field(description="false if the change cannot be undone")
    irreversible_cost: float = Field(0.0, ge=0, description="what is lost; 0 if reversible")
    confidence: float = Field(ge=0, le=1, description="P(this prediction is right)")

    def to_delta(self) -> Delta:
        return Delta.model_validate(self.model_dump())


PREDICTION_SCHEMA: dict[str, JsonValue] = DeltaPrediction.model_json_schema()


# ---------------------------------------------------------------- the action mask
DIMENSIONS = ("created", "deleted", "attributes", "relations_added", "relations_removed", "irreversible")
ALL = frozenset(DIMENSIONS)
NONE: frozenset[str] = frozenset()


class ActionMask:
    """Which delta dimensions each action class can touch (prior knowledge of an action space).

    Applying it removes every predicted fact in a dimension the class cannot produce and forces a
    prediction reversible when the class can do nothing irreversible; a class the mask does not
    know keeps every dimension. A class that can touch nothing is `determined`: its delta is the
    empty one, known without asking a model. `from_transitions` derives a mask from ground-truth
    transitions, so a new environment can check or learn its table from recorded runs."""

    def __init__(self, table: Mapping[str, Iterable[str]], name: str = "custom"):
        bad = {d for dims in table.values() for d in dims} - ALL
        if bad:
            raise ValueError(f"action mask {name!r}: unknown dimensions {sorted(bad)}; use {', '.join(DIMENSIONS)}")
        self.table = {cls.lower(): frozenset(dims) for cls, dims in table.items()}
        self.name = name

    def allowed(self, action_class: str) -> frozenset[str]:
        return self.table.get(action_class.lower(), ALL)

    def determined(self, action_class: str) -> bool:
        """True when the class can change nothing, so its delta is the empty, reversible one."""
        return not self.allowed(action_class)

    def apply(self, action_class: str, delta: Delta) -> Delta:
        """The prediction with every fact the class cannot produce removed (confidence kept)."""
        dims = self.allowed(action_class)
        out = delta.model_copy(deep=True)
        for dim in DIMENSIONS[:5]:
            if dim not in dims:
                setattr(out, dim, [])
        if "irreversible" not in dims:
            out.reversible, out.irreversible_cost = True, 0.0
        return out

    def to_dict(self) -> dict[str, list[str]]:
        return {cls: sorted(dims) for cls, dims in sorted(self.table.items())}

    @classmethod
    def from_transitions(cls, rows: Iterable[tuple[str, Delta]], name: str = "learned") -> "ActionMask":
        """The dimensions each action class was seen to touch in (action_class, ground-truth delta)
        pairs. Classes never seen are absent, hence unmasked."""
        table: dict[str, set[str]] = {}
        for action_class, delta in rows:
            table.setdefault(action_class.lower(), set()).update(touched(delta))
        return cls(table, name=name)


def touched(delta: Delta) -> set[str]:
    """The dimensions a delta changes."""
    dims = {d for d in DIMENSIONS[:5] if getattr(delta, d)}
    if not delta.reversible:
        dims.add("irreversible")
    return dims


# ---------------------------------------------------------------- observations and the protocol
@dataclass
class Observation:
    text: str  # what the agent reads (web: URL + accessibility tree with element ids)
    action_classes: tuple[str, ...] = ()  # the classes of action this environment accepts
    admissible: list[str] | None = None  # concrete admissible actions, where the world can list them
    screenshot_png: bytes | None = None
    info: dict[str, Any] = field(default_factory=dict)  # ACTION_HELP, WORLD_MODEL_HELP, the world's own keys


@dataclass
class StepResult:
    observation: Observation
    delta: Delta  # ground truth: what the action changed (empty for reads and invalid actions)
    done: bool  # the episode ended (stop action, task end, step limit)
    valid: bool = True  # False when the action could not be parsed or executed (the error is in info)
    info: dict[str, Any] = field(default_factory=dict)


# A family's task and its episode's evaluation are its own types: the core passes a task to
# `reset` and hands `evaluate()`'s result back without reading either. A family may name them
# (`Environment[WebTask, WebEvaluation]`); unnamed, a task is anything and an evaluation a JSON dict.
TaskT = TypeVar("TaskT", default=Any)
EvaluationT = TypeVar("EvaluationT", default=dict[str, Any])
TaskT_contra = TypeVar("TaskT_contra", contravariant=True, default=Any)
EvaluationT_co = TypeVar("EvaluationT_co", covariant=True, default=dict[str, Any])


@runtime_checkable
class Environment(Protocol[TaskT_contra, EvaluationT_co]):
    """An environment behind the protocol. Action strings follow its own action space (the web
    world: `click [12]`, `stop [answer]`); `action_class(action)` names an action's class (the
    mask's key). Always closed (`close()`), also on errors and Ctrl-C."""

    def reset(self, task: TaskT_contra) -> Observation: ...

    def step(self, action: str) -> StepResult: ...

    def action_class(self, action: str) -> str: ...

    def evaluate(self) -> EvaluationT_co:
        """After the episode: {"success": float in [0,1], "required_irreversible": [...], ...}."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncEnvironment(Protocol[TaskT_contra, EvaluationT_co]):
    """The environment as agents see it (`ThreadedEnv`): the same calls, awaited."""

    async def reset(self, task: TaskT_contra) -> Observation: ...

    async def step(self, action: str) -> StepResult: ...

    async def action_class(self, action: str) -> str: ...

    async def evaluate(self) -> EvaluationT_co: ...

    async def close(self) -> None: ...


class ThreadedEnv(Generic[TaskT, EvaluationT]):
    """An `Environment` driven from asyncio. Every call runs on one dedicated thread: the web
    world's browser (Playwright's sync API) is bound to the thread that started it and refuses to
    run inside an event loop, and a slow step must not block the other samples' model calls."""

    def __init__(self, env: Environment[TaskT, EvaluationT] | None = None):
        self.env = env
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cdwm-env")

    @classmethod
    async def create(cls, factory: Callable[[], Environment[TaskT, EvaluationT]]) -> ThreadedEnv[TaskT, EvaluationT]:
        """Build the environment on its own thread (a browser must start on the thread that drives it)."""
        self = cls()
        try:
            self.env = await self.call(factory)
        except BaseException:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            self._pool = None
            raise
        return self

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the environment's thread."""
        pool = self._pool
        if pool is None:
            raise EnvironmentClosed("this environment was closed")
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    def _env(self) -> Environment[TaskT, EvaluationT]:
        if self._pool is None:
            raise EnvironmentClosed("this environment was closed")
        if self.env is None:
            raise RuntimeError("ThreadedEnv has no environment: build it with ThreadedEnv.create(factory)")
        return self.env

    async def reset(self, task: TaskT) -> Observation:
        return await self.call(self._env().reset, task)

    async def step(self, action: str) -> StepResult:
        return await self.call(self._env().step, action)

    async def action_class(self, action: str) -> str:
        return await self.call(self._env().action_class, action)

    async def evaluate(self) -> EvaluationT:
        return await self.call(self._env().evaluate)

    async def close(self) -> None:
        """Close the environment on its own thread, then the thread; safe to call twice."""
        if self._pool is None:
            return
        try:
            if self.env is not None:
                await self.call(self.env.close)
        finally:
            self._pool.shutdown(wait=False)
            self._pool = None
