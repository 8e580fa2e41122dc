"""`harness export inspect RUN --out FILE`: a finished run as an Inspect eval log.

Built with inspect_ai's own log classes and written by its own writer (`write_eval_log`), so the
file is whatever the installed inspect_ai reads and `inspect view` shows: `.eval` (Inspect's
default, a zip) or `.json`, chosen by the file's suffix. inspect_ai is the optional extra `inspect`;
without it, one error says how to install it.

What maps where:
- the eval spec: task = suite, task_version = suite version, model = the assistant's model (the
  other roles -- the judge, a panel, the simulated user -- as Inspect's `model_roles`), created = the
  run's start, the corpus as the dataset, limit and epochs as the eval config, the package versions;
  the harness's own config, config hash, scorer and source run under `metadata["harness"]`;
- status: complete -> success, interrupted -> cancelled, failed -> error, running -> started;
- each record one sample (id, epoch + 1: Inspect counts epochs from 1): the transcript as chat
  messages and the scores as one score named after the scorer, both from the suite's adapter
  (`harness.inspect_format`), the record's own scores whole in that score's metadata; tokens per
  model and per role; a record whose solver produced nothing carries its errors as the sample's
  error (any other error is in `metadata["harness"]["errors"]`, the sample itself was scored);
- results: every metric of the run's summary with its CI and n; usage per model and per role.

May import: the `harness` core (records, errors, the suite registry, `harness.inspect_format`) and
inspect_ai (lazily) -- never `environments`: the suite's adapter is found by entry point.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harness.errors import HarnessError
from harness.inspect_format import InspectAdapter, Message, adapter_for, extra_hint
from harness.providers.base import Usage
from harness.providers.embedded import is_embedded
from harness.records import RunManifest, RunSummary, SampleRecord
from harness.run_folder import RunFolder
from harness.spec import panel_roles
from harness.suite import suite_class

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ChatMessage, ModelUsage

INSPECT_STATUS: dict[str, Literal["started", "success", "cancelled", "error"]] = {
    "complete": "success", "interrupted": "cancelled", "failed": "error", "running": "started"}
SUFFIXES = (".eval", ".json")


def require_inspect(what: str) -> str:
    """inspect_ai's version, or one error naming the extra that installs it."""
    try:
        module = importlib.import_module("inspect_ai")
    except ImportError:
        raise HarnessError(f"{what} needs inspect_ai, which is not installed: {extra_hint()}") from None
    return str(getattr(module, "__version__", "unknown"))


@dataclass(frozen=True)
class Exported:
    path: Path
    samples: int
    inspect_version: str


def export_inspect(folder: RunFolder, out: Path) -> Exported:
    """Write run `folder` as an Inspect eval log at `out` (`.eval` or `.json`)."""
    if out.suffix not in SUFFIXES:
        raise HarnessError(f"--out {out}: an Inspect log is a .eval (Inspect's default) or a .json file; "
                           "name it e.g. run.eval")
    if out.is_dir():
        raise HarnessError(f"--out {out}: is a folder; give a file name ending in .eval or .json")
    version = require_inspect("harness export inspect")
    from inspect_ai.log import write_eval_log

    manifest = folder.read_manifest()
    folder.repair()  # a crash's torn last line is not a sample
    log = eval_log(manifest, folder.iter_samples(), folder.read_summary())
    out.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(log, str(out))
    return Exported(out, len(log.samples or []), version)


def eval_log(manifest: RunManifest, records: Any, summary: RunSummary | None) -> EvalLog:
    """The Inspect log of a run: its manifest, its records (any iterable) and its summary."""
    from inspect_ai.log import (EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalResults, EvalScore, EvalSpec,
                                EvalStats, HeadlineMetric)
    from inspect_ai.model import GenerateConfig, ModelConfig

    config = manifest.config
    models = config.models
    model = models.get("assistant") or next(iter(models.values()), "unknown/unknown")
    adapter = adapter_for(manifest.suite)
    scorer = manifest.scorer or config.scorer or "score"
    samples = [eval_sample(rec, manifest, adapter, model, scorer) for rec in records]
    embedded_graders = [r for r in panel_roles(models) if is_embedded(models[r]) and not is_embedded(model)]
    generation = config.roles["assistant"].generation() if "assistant" in config.roles else {}
    corpus = manifest.corpus or {}
    spec = EvalSpec(
        eval_id=manifest.run_id, run_id=manifest.run_id, task_id=manifest.config_hash, created=manifest.started,
        task=manifest.suite, task_version=manifest.suite_version, task_description=_description(manifest.suite),
        task_args={k: v for k, v in {"corpus": config.corpus, **config.suite_options}.items() if v is not None},
        solver=f"harness:{manifest.suite}",
        dataset=EvalDataset(name=Path(str(corpus.get("path") or manifest.suite)).name,
                            location=corpus.get("path"), samples=corpus.get("samples"),
                            sample_ids=sorted({s.id for s in samples}, key=str)),
        model=model, model_base_url=config.endpoint("assistant"),
        model_generate_config=GenerateConfig(**generation),
        model_roles={r: ModelConfig(model=spec, base_url=config.endpoint(r),
                                    config=GenerateConfig(**config.roles[r].generation()))
                     for r, spec in models.items() if r != "assistant"},
        config=EvalConfig(limit=config.limit, epochs=config.epochs),
        # The viewer's header shows this one metric (the run's headline) instead of all of them.
        headline_metric=HeadlineMetric(scorer=scorer, metric=summary.headline_metric) if summary else None,
        packages=dict(manifest.package_versions),
        tags=["harness", *(["embedded-judge: not a measurement"] if embedded_graders else [])],
        metadata={"harness": {
            "run_id": manifest.run_id, "suite_version": manifest.suite_version, "config_hash": manifest.config_hash,
            "config": config.model_dump(mode="json"), "corpus": corpus, "scorer": manifest.scorer,
            "source_run": manifest.source_run, "git_revision": manifest.git_revision, "command": manifest.command,
            "records_format": manifest.format, "embedded_graders": embedded_graders}},
    )
    metrics = {name: EvalMetric(name=name, value=m.value, metadata={"ci_low": m.ci_low, "ci_high": m.ci_high, "n": m.n})
               for name, m in (summary.metrics.items() if summary else ()) if m.value is not None}
    scored = sum(1 for s in samples if s.error is None)
    results = EvalResults(
        total_samples=len(samples), completed_samples=scored,
        scores=[EvalScore(name=scorer, scorer=scorer, scored_samples=scored, unscored_samples=len(samples) - scored,
                          metrics=metrics)],
        metadata={"headline_metric": summary.headline_metric if summary else None,
                  "counts": dict(summary.counts) if summary else {}})
    role_usage = _role_usage(s for s in samples)
    stats = EvalStats(started_at=manifest.started, completed_at=manifest.ended or "",
                      model_usage=_by_model(role_usage, models), role_usage=role_usage)
    return EvalLog(eval=spec, status=INSPECT_STATUS.get(manifest.status, "error"),
                   samples=samples, results=results, stats=stats, tags=list(spec.tags or []),
                   error=_error("the harness run failed: see its manifest and samples") if manifest.status == "failed"
                   else None)


def eval_sample(rec: SampleRecord, manifest: RunManifest, adapter: InspectAdapter, model: str,
                scorer: str) -> EvalSample:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score

    messages = [_chat(m, model) for m in adapter.messages(rec.output, model)] if rec.output else []
    first_generated = next((i for i, m in enumerate(messages) if m.role == "assistant"), len(messages))
    completion = next((m.text for m in reversed(messages) if m.role == "assistant"), "")
    view = adapter.score_view(rec.scores)
    role_usage = {role: _usage(u) for role, u in rec.usage.items()}
    failed = not rec.output and rec.errors  # nothing to look at: the sample as a whole failed
    return EvalSample(
        id=rec.sample_id, epoch=rec.epoch + 1,
        input=messages[:first_generated] or f"sample {rec.sample_id}",
        target="", messages=messages, output=ModelOutput.from_content(model, completion),
        scores={scorer: Score(value=view.value, answer=view.answer, explanation=view.explanation,
                              metadata={"harness_scores": rec.scores})},
        metadata={"harness": {"seed": rec.seed, "status": rec.status, "scorer": rec.scorer, "calls": len(rec.calls),
                              "errors": [e.model_dump(exclude={"traceback"}) for e in rec.errors]}},
        model_usage=_by_model(role_usage, manifest.config.models), role_usage=role_usage,
        started_at=rec.started, total_time=rec.duration_s, working_time=rec.duration_s,
        error=_error("; ".join(e.message for e in rec.errors)) if failed else None,
    )


def _chat(m: Message, model: str) -> ChatMessage:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    meta = m.metadata or None
    if m.role == "assistant":
        return ChatMessageAssistant(content=m.content, source=m.source, metadata=meta,
                                    model=model if m.source == "generate" else None)
    if m.role == "system":
        return ChatMessageSystem(content=m.content, source=m.source, metadata=meta)
    return ChatMessageUser(content=m.content, source=m.source, metadata=meta)


def _usage(u: Usage) -> ModelUsage:
    from inspect_ai.model import ModelUsage

    return ModelUsage(input_tokens=u.prompt_tokens, output_tokens=u.completion_tokens,
                      total_tokens=u.prompt_tokens + u.completion_tokens)


def _add(a: ModelUsage | None, b: ModelUsage) -> ModelUsage:
    if a is None:
        return b.model_copy()
    return a.model_copy(update={"input_tokens": a.input_tokens + b.input_tokens,
                                "output_tokens": a.output_tokens + b.output_tokens,
                                "total_tokens": a.total_tokens + b.total_tokens})


def _role_usage(samples: Any) -> dict[str, ModelUsage]:
    total: dict[str, ModelUsage] = {}
    for s in samples:
        for role, u in s.role_usage.items():
            total[role] = _add(total.get(role), u)
    return total


def _by_model(role_usage: dict[str, ModelUsage], models: dict[str, str]) -> dict[str, ModelUsage]:
    """Usage per model: the roles a model played, summed (a judge that is also the assistant once)."""
    out: dict[str, ModelUsage] = {}
    for role, u in role_usage.items():
        name = models.get(role, role)
        out[name] = _add(out.get(name), u)
    return out


def _error(message: str) -> Any:
    from inspect_ai.log import EvalError

    return EvalError(message=message, traceback="", traceback_ansi="")


def _description(suite: str) -> str | None:
    try:
        return suite_class(suite).description or None
    except HarnessError:  # a run of a suite not installed here still exports
        return None
