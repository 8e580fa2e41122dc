"""A leaderboard in EvalEval's "every eval ever" shared results schema (`--format eee`), so a
group that pools results in that schema can take ours without a converter.

The schema holds one model's evaluation per document, so the export is JSON Lines: one document
per leaderboard row (a model under one judge, suite version and setup, pooled over its runs).
Each metric is one `evaluation_results` entry with its value, its 95% CI (lower, upper, level and
how it was computed), n (the suite's independent units) and, where the run had judges, the judge
models from the run's config (`RunConfig.roles`, the panel's `judge`, `judge_2`, ...).

Every document is checked with the every-eval-ever package itself before anything is written: its
bundled JSON schema, its pydantic model of the schema and its two per-document checks (score
metadata, model deployment). Without the package the export refuses rather than writing a file it
cannot vouch for. The package declares Python >= 3.12, but the parts used here need only
pydantic and jsonschema; the Makefile installs them on 3.11 (see there).

Fields the run records do not know (the organization behind the results, the evaluator's relation
to the model, deployment and weight availability) are written as the schema's `unknown` / `other`
and said so, to be filled in by whoever submits the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import NotRequired, TypedDict

from harness.errors import HarnessError
from harness.records import Metric, RoleConfig
from harness.spec import panel_roles
from leaderboards.aggregate import Leaderboard, Row

CI_LEVEL = 0.95
CI_METHOD = "bootstrap over the suite's independent units (dialogues, episodes, tasks), from its own metrics code"
UNKNOWN = "unknown"
FILL_IN = "not recorded by the harness: set it before submitting"
INSTALL = ("--format eee checks every document with the every-eval-ever package, which is not installed "
           "here: run `make install` (it installs every-eval-ever==0.3.0)")


# The document's shape: the parts of the every-eval-ever schema this export writes. Plain dicts
# (TypedDicts) because the document is the file: it is validated and dumped as built, key order included.

class ModelDetails(TypedDict):
    deployment_type: str
    model_availability: str


class ModelInfo(TypedDict):
    name: str
    id: str
    inference_platform: str
    additional_details: ModelDetails


class Judge(TypedDict):
    model_info: ModelInfo
    additional_details: dict[str, str]  # the run's role name
    temperature: NotRequired[float]


class Judging(TypedDict):
    judges: list[Judge]
    input_prompt: str


class ConfidenceInterval(TypedDict):
    lower: float
    upper: float
    confidence_level: float
    method: str


class Uncertainty(TypedDict, total=False):
    confidence_interval: ConfidenceInterval
    num_samples: int


class ScoreDetails(TypedDict):
    score: float | None
    details: dict[str, str]
    uncertainty: NotRequired[Uncertainty]


class MetricConfig(TypedDict):
    metric_id: str
    metric_name: str
    lower_is_better: bool
    evaluation_description: str
    metric_unit: NotRequired[str]
    llm_scoring: NotRequired[Judging]


class SourceData(TypedDict):
    dataset_name: str
    source_type: str
    additional_details: dict[str, str]


class EvaluationResult(TypedDict):
    evaluation_result_id: str
    evaluation_name: str
    source_data: SourceData
    metric_config: MetricConfig
    score_details: ScoreDetails


class SourceMetadata(TypedDict):
    source_name: str
    source_type: str
    source_organization_name: str
    evaluator_relationship: str
    additional_details: dict[str, str]


class EvalLibrary(TypedDict):
    name: str
    version: str
    additional_details: dict[str, str]


class Document(TypedDict):
    """One leaderboard row as an every-eval-ever evaluation log."""

    schema_version: str
    evaluation_id: str
    retrieved_timestamp: str
    source_metadata: SourceMetadata
    eval_library: EvalLibrary
    model_info: ModelInfo
    evaluation_results: list[EvaluationResult]
    evaluation_timestamp: NotRequired[str]


def _validator() -> tuple[str, Callable[[Document], list[str]]]:
    """The installed schema's version and a function listing a document's problems (empty: valid)."""
    try:
        import jsonschema
        from every_eval_ever.eval_types import EvaluationLog
        from every_eval_ever.schema import schema_json
        from every_eval_ever.validator.validation_core import check_model_deployment, check_score_metadata
        from pydantic import ValidationError
    except ImportError as exc:
        raise HarnessError(f"{INSTALL} ({exc})") from None
    schema = schema_json("eval.schema.json")
    checker = jsonschema.Draft7Validator(schema)

    def problems(doc: Document) -> list[str]:
        found = [f"{'/'.join(map(str, e.absolute_path)) or '(document)'}: {e.message}"
                 for e in checker.iter_errors(doc)]
        try:
            EvaluationLog.model_validate(doc)
        except ValidationError as exc:
            found += [f"{'/'.join(map(str, err['loc']))}: {err['msg']}" for err in exc.errors()]
        # The package reports these two as warnings; ours must not produce any, so they fail here.
        return found + list(check_score_metadata(doc)) + list(check_model_deployment(doc))

    return str(schema["version"]), problems


def _harness_version() -> str:
    try:
        return version("harness")
    except PackageNotFoundError:
        return UNKNOWN


def model_info(spec: str) -> ModelInfo:
    """A `provider/name` spec as the schema's model_info; the spec itself is the id (the schema's
    own example ids are provider-prefixed)."""
    provider, _, name = spec.partition("/")
    return {"name": name or spec, "id": spec, "inference_platform": provider if name else UNKNOWN,
            "additional_details": {"deployment_type": UNKNOWN, "model_availability": UNKNOWN}}


def _roles(row: Row) -> dict[str, RoleConfig]:
    """The roles of the row's runs, as their configs recorded them (a row never mixes judges or
    setups, so its runs agree on every role's model; the first run's settings stand for the row)."""
    roles: dict[str, RoleConfig] = {}
    for run in row.runs:
        try:
            recorded = run.folder.read_manifest().config.roles
        except (HarnessError, ValueError):
            recorded = {}
        for role, rc in recorded.items():
            roles.setdefault(role, rc)
        for role, spec in run.models.items():  # a run that lost its manifest: the index's models
            roles.setdefault(role, RoleConfig(model=spec))
    return roles


def _judging(board: Leaderboard, row: Row, roles: dict[str, RoleConfig]) -> Judging | None:
    panel = panel_roles(roles)
    if not panel:
        return None
    judges = []
    for role in panel:
        judge: Judge = {"model_info": model_info(roles[role].model), "additional_details": {"role": role}}
        temperature = roles[role].temperature
        if temperature is not None:
            judge["temperature"] = temperature
        judges.append(judge)
    return {"judges": judges,
            # The run records hold the judge's model, not its prompt text: the prompt is the suite's code.
            "input_prompt": f"the judge prompt of suite {board.suite} {row.suite_version} in harness "
                            f"{_harness_version()} (its text is in the suite's code, not in the run record)"}


def _score(m: Metric) -> ScoreDetails:
    details: ScoreDetails = {"score": m.value, "details": {"n": str(m.n)}}
    uncertainty: Uncertainty = {}
    if m.ci_low is not None and m.ci_high is not None:
        uncertainty["confidence_interval"] = {"lower": m.ci_low, "upper": m.ci_high, "confidence_level": CI_LEVEL,
                                              "method": CI_METHOD}
    if m.n > 0:
        uncertainty["num_samples"] = m.n
    if uncertainty:
        details["uncertainty"] = uncertainty
    return details


def _corpus(row: Row) -> dict[str, str]:
    """What the runs' manifests say of the corpus (path, hash, size), as the schema's string details."""
    for run in row.runs:
        try:
            corpus = run.folder.read_manifest().corpus
        except (HarnessError, ValueError):
            continue
        return {f"corpus_{k}": str(v) for k, v in corpus.items() if isinstance(v, (str, int, float))}
    return {}


def document(board: Leaderboard, row: Row, schema_version: str, retrieved: str) -> Document:
    roles = _roles(row)
    judging = _judging(board, row, roles)
    ended = max((r.ended or r.started or "" for r in row.runs), default="")
    others = {f"role_{role}": rc.model for role, rc in sorted(roles.items())
              if role != "assistant" and role not in panel_roles(roles)}
    results: list[EvaluationResult] = []
    for name in [board.metric] + [n for n in row.metrics if n != board.metric]:
        m = row.metrics.get(name)
        if m is None or m.value is None:
            continue  # the schema's score is a number: a metric with no value (nothing scored) is left out
        spec = board.spec(name)
        config: MetricConfig = {"metric_id": name, "metric_name": name, "lower_is_better": spec.lower_is_better,
                                "evaluation_description": f"{board.suite} {row.suite_version}: {name}"
                                + (f" ({spec.description})" if spec.description else "")}
        if spec.unit:
            config["metric_unit"] = spec.unit
        if judging is not None:
            config["llm_scoring"] = judging
        results.append({"evaluation_result_id": f"{board.suite}/{name}", "evaluation_name": board.suite,
                        "source_data": {"dataset_name": board.suite, "source_type": "other",
                                        "additional_details": _corpus(row)},
                        "metric_config": config, "score_details": _score(m)})
    doc: Document = {
        "schema_version": schema_version,
        "evaluation_id": f"{board.suite}/{row.model or row.label}/{retrieved}",
        "retrieved_timestamp": retrieved,
        "source_metadata": {"source_name": "harness leaderboard export", "source_type": "evaluation_run",
                            "source_organization_name": UNKNOWN, "evaluator_relationship": "other",
                            "additional_details": {"source_organization_name": FILL_IN,
                                                   "evaluator_relationship": FILL_IN}},
        "eval_library": {"name": "harness", "version": _harness_version(),
                         "additional_details": {"suite": board.suite, "suite_version": row.suite_version,
                                                "setup": row.setup, "judge": row.judge,
                                                "run_ids": ";".join(row.run_ids), "configs": str(row.configs),
                                                "samples": str(row.samples), "errors": str(row.errors), **others}},
        "model_info": model_info(row.model or row.label),
        "evaluation_results": results,
    }
    if ended:
        doc["evaluation_timestamp"] = ended
    return doc


def to_eee(board: Leaderboard) -> str:
    """One validated document per row, one per line; a document that fails the package's checks
    is an error (a bug here), and nothing is written."""
    schema_version, problems = _validator()
    # The schema asks for Unix epoch time as a string.
    retrieved = str(int(datetime.fromisoformat(board.generated).timestamp()))
    lines = []
    for row in board.rows:
        doc = document(board, row, schema_version, retrieved)
        found = problems(doc)
        if found:
            raise HarnessError(f"--format eee: the document for {row.label} / {row.judge or '-'} fails the "
                               f"every-eval-ever {schema_version} checks: {found[0]} ({len(found)} problem(s) in all)")
        lines.append(json.dumps(doc, sort_keys=False))
    return "\n".join(lines) + "\n"
