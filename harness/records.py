"""What a run's records are: the typed, versioned models of its manifest, samples and summary.

Where they live on disk, and how they are written and read back, is `harness.run_folder`. The
models here know nothing of files: a record is the same whether it came from a run folder, an
Inspect log or a test.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import TypedDict  # pydantic validates a typing.TypedDict only from Python 3.12

from harness.providers.base import ConstraintPath, Usage
from harness.spend import Budget, RoleSpend


# Version of the records format. 1: records written before the suite contract (errors as strings,
# no solve/score split); 2: typed errors, scorer named on every record, usage stored once. The
# models below read both: validators migrate a version-1 record forward as it is loaded.
RECORDS_FORMAT = 2

RunStatus = Literal["running", "complete", "interrupted", "failed"]
SampleStatus = Literal["ok", "error"]
ErrorKind = Literal["timeout", "exception", "suite", "record", "legacy"]
Stage = Literal["solve", "score"]


class Versioned(BaseModel):
    """A record that names its format version. Records read from disk go through `load`, which
    takes a record without `format` for version 1; validators migrate older versions forward."""

    format: int = Field(RECORDS_FORMAT, description="records format version (1: written before versioning)")

    @classmethod
    def load(cls, text: str) -> Self:
        data = json.loads(text)
        if isinstance(data, dict):
            data.setdefault("format", 1)
        return cls.model_validate(data)

    @classmethod
    def load_line(cls, line: bytes) -> Self:
        """One JSONL line; a line that starts with its format is validated straight from the JSON
        (pydantic's native parser, several times faster than `load` -- it matters at 10^6 lines)."""
        if line.startswith(b'{"format":'):
            return cls.model_validate_json(line)
        return cls.load(line.decode("utf-8"))


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Generation(TypedDict, total=False):
    """A role's generation overrides, only those set (`RoleConfig.generation`)."""

    max_tokens: int
    temperature: float


class RoleConfig(BaseModel):
    """One role of a run: its model and, where given, its endpoint and its generation overrides
    (None: the suite's own setting for that call)."""

    model_config = ConfigDict(extra="forbid")

    model: str  # provider/name spec
    base_url: str | None = None  # where it is served (execution only: not hashed)
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0)

    GENERATION: ClassVar[tuple[str, ...]] = tuple(Generation.__annotations__)  # ("max_tokens", "temperature")

    def generation(self) -> Generation:
        """The overrides this role's calls get (only those set, in `GENERATION`'s order)."""
        out: Generation = {}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            out["temperature"] = self.temperature
        return out


# Before roles were data (runs written up to 2026-12-06) a config named its models and three
# overrides in fields of their own; these are their names and, for the hash, where they live now.
LEGACY_OVERRIDES: dict[str, tuple[str, str]] = {
    "max_tokens": ("assistant", "max_tokens"),
    "temperature": ("assistant", "temperature"),
    "judge_max_tokens": ("judge", "max_tokens"),
}


class RunConfig(BaseModel):
    """Everything that decides a run's results (hashed) plus how to execute it (not hashed).

    `roles` is the run's roles as data: role -> its model, endpoint and generation overrides. The
    older form (`models`, `base_urls`, `max_tokens`, `temperature`, `judge_max_tokens`) is still
    accepted -- manifests written before, and callers that build a config that way -- and becomes
    `roles` as it is read; the config hash is computed from the same fields as before, so an old
    run resumes, and a config that could have been written the old way hashes as it did."""

    suite: str
    roles: dict[str, RoleConfig] = {}
    base_url: str | None = None  # every role's endpoint unless its RoleConfig names one
    corpus: str | None = None
    limit: int | None = None
    epochs: int = 1
    seed: int = 0
    suite_options: dict[str, Any] = {}  # the suite's Options, validated and dumped (defaults included)
    scorer: str | None = None  # None: the suite's default scorer
    source_run: str | None = None  # set by `harness score`: the run whose transcripts are re-scored
    # set by a claim check: "CLAIM_ID@CRITERION_HASH", the criterion this run was started under
    # (hashed: a run registered under another criterion is another run; harness/claims/)
    claim: str | None = None
    # execution only: these never change an answer, so they stay out of the hash
    max_connections: int = 8
    call_timeout_s: float = 600.0
    sample_timeout_s: float = 3600.0
    max_retries: int = 5
    cache: bool = True
    budgets: list[Budget] = []  # --budget: caps on what roles may spend (harness/spend.py)
    prices_file: str | None = None  # --prices: rates for models without a list price

    # base_url says where a model is served, not which model: a resumed run may move endpoints
    # (and the stored one has its password masked).
    EXECUTION_ONLY: ClassVar[set[str]] = {
        "base_url",
        "max_connections",
        "call_timeout_s",
        "sample_timeout_s",
        "max_retries",
        "cache",
        "budgets",
        "prices_file",
    }

    @model_validator(mode="before")
    @classmethod
    def _roles_from_the_older_form(cls, data: Any) -> Any:
        legacy = ("models", "base_urls", *LEGACY_OVERRIDES)
        if not isinstance(data, dict) or not any(k in data for k in legacy):
            return data
        data = dict(data)
        roles: dict[str, dict[str, Any]] = {
            r: (rc.model_dump(exclude_defaults=True) if isinstance(rc, RoleConfig) else dict(rc))
            for r, rc in (data.pop("roles", None) or {}).items()
        }
        for role, spec in (data.pop("models", None) or {}).items():
            roles.setdefault(role, {})["model"] = spec
        for role, url in (data.pop("base_urls", None) or {}).items():
            if role not in roles:
                raise ValueError(f"base_urls names role {role!r}, which has no model (roles: {', '.join(roles)})")
            roles[role]["base_url"] = url
        for old, (role, key) in LEGACY_OVERRIDES.items():
            value = data.pop(old, None)
            if value is None:
                continue
            if role not in roles:
                raise ValueError(f"{old} = {value} is an override for the {role} role, and the run has no {role} model")
            roles[role][key] = value
        data["roles"] = roles
        return data

    @property
    def models(self) -> dict[str, str]:
        """role -> model spec."""
        return {r: rc.model for r, rc in self.roles.items()}

    @property
    def base_urls(self) -> dict[str, str]:
        """role -> endpoint, for the roles that name their own."""
        return {r: rc.base_url for r, rc in self.roles.items() if rc.base_url}

    def endpoint(self, role: str) -> str | None:
        """Where `role`'s model is served (None: the provider's default; the embedded model has none)."""
        rc = self.roles.get(role)
        if rc is None or rc.model.startswith("local/"):
            return None
        return rc.base_url or self.base_url

    def overrides(self) -> dict[str, Generation]:
        """role -> the generation overrides its calls get (roles with none left out)."""
        return {r: g for r, rc in self.roles.items() if (g := rc.generation())}

    def with_roles(self, roles: dict[str, RoleConfig]) -> RunConfig:
        """A copy with other roles, validated (`model_copy(update=...)` would skip validation)."""
        return self.model_validate(self.model_dump() | {"roles": {r: rc.model_dump() for r, rc in roles.items()}})

    def result_fields(self) -> dict[str, Any]:
        """What the config hash covers. The fields of before roles were data, computed from `roles`,
        so that a config expressible the old way hashes exactly as it did; an override the old form
        could not hold (any but the assistant's max_tokens and temperature and the judge's
        max_tokens) enters as `role_settings`, only when set. Fields added in format 2 enter only
        when set."""
        out: dict[str, Any] = {
            "suite": self.suite,
            "models": self.models,
            "corpus": self.corpus,
            "limit": self.limit,
            "epochs": self.epochs,
            "seed": self.seed,
            "suite_options": self.suite_options,
        }
        covered = set()
        for old, (role, key) in LEGACY_OVERRIDES.items():
            rc = self.roles.get(role)
            out[old] = getattr(rc, key) if rc else None
            covered.add((role, key))
        extra = {r: {k: v for k, v in rc.generation().items() if (r, k) not in covered} for r, rc in self.roles.items()}
        if any(extra.values()):
            out["role_settings"] = {r: v for r, v in extra.items() if v}
        out |= {k: getattr(self, k) for k in ("scorer", "source_run", "claim") if getattr(self, k) is not None}
        return out


class Metric(BaseModel):
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0  # independent units (e.g. dialogues) behind the figure


class MetricSpec(BaseModel):
    """What a metric is, declared by its suite (`Suite.metric_specs`) and recorded in each run's
    summary, so a leaderboard ranks and labels it without knowing the suite (or having it
    installed): which way is better, its unit, what it means, and the breakdowns (keys of
    `Suite.breakdowns`) that split it. An undeclared metric is "higher is better", unitless."""

    model_config = ConfigDict(frozen=True)

    direction: Literal["higher", "lower"] = "higher"
    unit: str = ""  # "" (a number), "fraction", "s", "tokens", "m", ...
    description: str = ""
    breakdowns: tuple[str, ...] = ()

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower"


class RunManifest(Versioned):
    """Written to disk with secrets masked (see `harness.redact`); the live config keeps them."""

    run_id: str
    suite: str
    suite_version: str
    config: RunConfig
    config_hash: str
    corpus: dict[str, Any] = Field(default_factory=dict)  # path, sha256, samples
    git_revision: str | None = None
    package_versions: dict[str, str] = Field(default_factory=dict)
    started: str
    ended: str | None = None
    status: RunStatus = "running"
    command: list[str] = Field(default_factory=list)
    scorer: str | None = Field(None, description="the scorer whose scores the samples carry")
    source_run: str | None = Field(None, description="`harness score`: the run whose transcripts were re-scored")
    spend: dict[str, Usage] = Field(
        default_factory=dict, description="role -> what its calls paid so far, over every session (harness/spend.py)"
    )
    stop_reason: str | None = Field(None, description="why the run stopped before its end (a budget), if it did")


class CallRecord(BaseModel):
    role: str
    model: str
    request_hash: str
    cached: bool
    attempts: int
    latency_s: float
    finish_reason: str
    usage: Usage
    constrained_by: ConstraintPath = "none"  # how the reply's form was enforced (providers/base.py)
    tool_calls: int = 0  # native tool calls in the reply


class ErrorRecord(BaseModel):
    """One error on a sample. `kind`: `timeout` (the stage ran out of time), `exception` (the
    solver or scorer raised; `traceback` kept), `suite` (the suite recorded a failure in its own
    words, e.g. one trigger's failed model call), `record` (a transcript or scores that the suite's
    declared type does not accept), `legacy` (a version-1 record's error string)."""

    kind: ErrorKind
    message: str
    stage: Stage = "solve"
    traceback: str | None = None

    def __str__(self) -> str:
        return self.message


class SampleRecord(Versioned):
    """One sample of one epoch. `output` is the solver's transcript; `scores` what the run's
    scorer made of it (the solver never writes scores, so `harness score` can redo them)."""

    sample_id: str
    epoch: int
    seed: int = Field(description="the seed every model call of this sample received")
    status: SampleStatus
    output: dict[str, Any] = Field(
        default_factory=dict, description="the transcript (the family's typed payload, dumped)"
    )
    scores: dict[str, Any] = Field(
        default_factory=dict, description="the scorer's values (the family's typed payload, dumped)"
    )
    scorer: str | None = Field(None, description="which scorer wrote `scores`")
    usage: dict[str, Usage] = Field(default_factory=dict, description="tokens per role: the one place usage is stored")
    calls: list[CallRecord] = Field(default_factory=list)
    errors: list[ErrorRecord] = Field(default_factory=list)
    started: str
    duration_s: float

    @model_validator(mode="before")
    @classmethod
    def _errors_as_records(cls, data: Any) -> Any:
        """Version 1 stored errors as strings."""
        if isinstance(data, dict) and any(isinstance(e, str) for e in data.get("errors", ())):
            data = dict(
                data, errors=[{"kind": "legacy", "message": e} if isinstance(e, str) else e for e in data["errors"]]
            )
        return data

    @property
    def key(self) -> tuple[str, int]:
        return (self.sample_id, self.epoch)


class EpochSpread(TypedDict):
    """With --epochs k: one metric's value per epoch, their mean and sample standard deviation
    (`harness.summary.epoch_spread`)."""

    values: list[float | None]
    mean: float | None
    std: float | None


class RunSummary(Versioned):
    run_id: str
    suite: str
    suite_version: str
    headline_metric: str
    metrics: dict[str, Metric]
    # The suite's declaration of each metric recorded (direction, unit); empty in runs written
    # before metrics were declared (readers then ask the installed suite).
    metric_specs: dict[str, MetricSpec] = Field(default_factory=dict)
    breakdowns: dict[str, dict[str, Metric]] = Field(default_factory=dict)  # group kind -> group -> headline
    epochs: dict[str, EpochSpread] = Field(default_factory=dict)  # metric -> per-epoch values, mean, std
    counts: dict[str, int] = Field(default_factory=dict)
    usage: dict[str, Usage] = Field(default_factory=dict)
    calls: dict[str, dict[str, Any]] = Field(default_factory=dict)
    official: dict[str, Any] = Field(default_factory=dict)  # the suite's own release format, if any
    scorer: str | None = None
    source_run: str | None = None
    spend: dict[str, RoleSpend] = Field(default_factory=dict)  # role -> paid tokens, calls and dollars
    stop_reason: str | None = None
