"""`harness score --from-inspect LOG`: an Inspect eval log's samples as a run whose transcripts the
suite's scorers can score.

The log is read by inspect_ai's own reader; each sample becomes the transcript the suite's scorer
takes through the suite's adapter (`harness.inspect_format`, entry points `harness.inspect`),
against the dataset sample of the same id (the rubric, the history: the corpus's, never the log's).
The transcripts are written as a run folder of their own, `RUN_DIR/<suite>-inspect-<hash>/`
(manifest and samples.jsonl, no scores: what the log's model wrote, as `harness eval` would have
recorded it), and the score is then an ordinary `harness score` of that run: resumable, cached,
its own leaderboard row naming its source. The folder's name is a hash of the log's bytes, the
suite and the corpus, so the same command again finds it and resumes the same score run.

The imported run is not put in `index.sqlite`: it has no scores, so it is no leaderboard row and
no `harness runs` line; the score run that names it as its source is.

May import: the standard library, third-party packages (inspect_ai, lazily) and the `harness` core.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from harness.errors import HarnessError
from harness.inspect_format import GROUP, InspectSample, Message, adapter_for, extra_hint
from harness.providers.base import Usage
from harness.records import ErrorRecord, RoleConfig, RunConfig, RunManifest, SampleRecord, now_iso
from harness.run_folder import RunFolder
from harness.runner import config_hash, sample_seed
from harness.spec import ModelSpec
from harness.suite import Suite, available_suites, get_suite

ROLES = ("system", "user", "assistant")  # a tool message is no turn of a dialogue


@dataclass(frozen=True)
class Imported:
    run_id: str
    samples: int
    reused: bool  # the log was imported before: the folder was found, nothing written


def import_inspect_log(path: Path, run_dir: Path, *, suite: str | None = None, corpus: str | None = None) -> Imported:
    """Import the Inspect log at `path` into `run_dir` as a run of `suite` (default: the log's task)
    over `corpus` (default: the corpus the log names, else the suite's); returns its run id."""
    where = f"--from-inspect {path}"
    if not path.is_file():
        raise HarnessError(f"{where}: no such file: give the path of an Inspect eval log (.eval or .json)")
    version = _inspect_version(where)
    log = _read(path, where, version)
    meta: dict[str, JsonValue] = dict((log.eval.metadata or {}).get("harness") or {})
    name = suite or log.eval.task
    if name not in available_suites():
        raise HarnessError(f"{where}: its task {log.eval.task!r} is not a harness suite: pass --suite SUITE "
                           f"(suites that read Inspect samples: {', '.join(readers()) or 'none'})")
    ours = name == log.eval.task and bool(meta)  # exported by `harness export inspect` from a run of this suite
    stored = _stored_config(meta) if ours else None
    suite_obj = get_suite(name, stored.suite_options if stored else {})
    if ours and meta.get("suite_version") not in (None, suite_obj.version):
        raise HarnessError(f"{where}: written from {name} version {meta['suite_version']}, installed is "
                           f"{suite_obj.version}: its transcripts cannot be scored by this version's scorers")
    adapter = adapter_for(name)
    if not adapter.reads_inspect:
        raise HarnessError(f"{where}: suite {name!r} cannot read Inspect samples; suites that can: "
                           f"{', '.join(readers()) or 'none'} (pass --suite)")
    if not log.samples:
        raise HarnessError(f"{where}: the log holds no samples (written header-only?): export it again with its samples")
    corpus = corpus if corpus is not None else (stored.corpus if stored else None)
    by_id = {s.id: s for s in suite_obj.load_samples(corpus)}
    missing = sorted({str(s.id) for s in log.samples} - set(by_id))
    if missing:
        raise HarnessError(f"{where}: samples {missing[:3]} are not in the {name} corpus "
                           f"{corpus or '(default)'}: pass --corpus with the corpus the log was made from")

    roles = stored.roles if stored else {"assistant": RoleConfig(model=harness_spec(log.eval.model))}
    seed = stored.seed if stored else 0
    records: dict[tuple[str, int], SampleRecord] = {}
    for s in log.samples:
        rec = _record(s, by_id[str(s.id)], adapter.transcript, seed, str(path), log.eval.created)
        records.setdefault(rec.key, rec)  # a key's first sample wins, as for every reader of a run
    config = RunConfig(suite=name, roles=roles, corpus=corpus, seed=seed,
                       epochs=max(e for _, e in records) + 1,
                       suite_options=suite_obj.options.model_dump(mode="json", exclude_defaults=True))
    corpus_id = suite_obj.corpus_identity(corpus) | {"samples": len({k[0] for k in records})}
    digest = hashlib.sha256(path.read_bytes())
    digest.update(f"\0{name}\0{corpus_id.get('sha256')}".encode())
    folder = RunFolder(run_dir, f"{name}-inspect-{digest.hexdigest()[:12]}")
    if folder.exists():
        return Imported(folder.run_id, len(records), reused=True)
    _write(folder, suite_obj, config, corpus_id, list(records.values()), log, path, version)
    return Imported(folder.run_id, len(records), reused=False)


def readers() -> list[str]:
    """The suites (or `prefix*`) whose adapter reads Inspect samples."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=GROUP):
        cls = ep.load()
        if getattr(cls, "reads_inspect", False):
            found.append(ep.name)
    return sorted(found)


def harness_spec(inspect_model: str) -> str:
    """The harness spec of the model an Inspect log names. Never called (a re-score calls only the
    scorer's roles), only recorded: the same spec where the provider is one of ours
    (`openai/gpt-4o`), else through litellm, which names models the way Inspect does
    (`anthropic/claude-...` -> `litellm/anthropic/claude-...`)."""
    try:
        return ModelSpec.parse(inspect_model).full
    except HarnessError:
        return f"litellm/{inspect_model}"


def _inspect_version(where: str) -> str:
    try:
        module = importlib.import_module("inspect_ai")
    except ImportError:
        raise HarnessError(f"{where}: reading Inspect logs needs inspect_ai, which is not installed: {extra_hint()}") from None
    return str(getattr(module, "__version__", "unknown"))


def _read(path: Path, where: str, version: str) -> Any:
    from inspect_ai.log import EvalLog, read_eval_log

    try:
        # Inspect stores long message texts as attachments (`attachment://...`): resolved, they are
        # the replies themselves, which is what the suite's reader compares and the judge grades.
        log = read_eval_log(str(path), resolve_attachments=True)
    except Exception as exc:  # noqa: BLE001 - the reader raises many kinds (zip, JSON, validation); each is bad input
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "version" in text.lower():
            raise HarnessError(f"{where}: {text} -- inspect_ai {version} (installed here) does not know that log "
                               "format: upgrade inspect_ai, or convert the log with the Inspect that wrote it "
                               "(`inspect log convert`)") from None
        raise HarnessError(f"{where}: not an Inspect eval log that inspect_ai {version} can read ({text}): "
                           "give a .eval or .json file written by Inspect or `harness export inspect`") from None
    known = EvalLog.model_fields["version"].default
    if isinstance(log.version, int) and isinstance(known, int) and log.version > known:
        raise HarnessError(f"{where}: log format version {log.version} is newer than the {known} that inspect_ai "
                           f"{version} (installed here) knows: upgrade inspect_ai, or convert the log with the "
                           "Inspect that wrote it (`inspect log convert`)")
    return log


def _stored_config(meta: dict[str, JsonValue]) -> RunConfig | None:
    """The config a `harness export inspect` log carries (None: a log without one, or a malformed one)."""
    try:
        return RunConfig.model_validate(meta["config"])
    except (KeyError, TypeError, ValueError):
        return None


def _record(s: Any, data: Any, transcript: Any, run_seed: int, source: str, created: str) -> SampleRecord:
    """One Inspect sample as an unscored record: its transcript, seed, usage and solve errors."""
    sid, epoch = str(s.id), int(s.epoch) - 1  # Inspect counts epochs from 1
    messages = [Message(m.role, m.text, m.source, dict(m.metadata or {})) for m in s.messages if m.role in ROLES]
    error = s.error.message if s.error is not None else None
    output = transcript(InspectSample(sid, int(s.epoch), messages, dict(s.metadata or {}), error), data, source)
    ours = (s.metadata or {}).get("harness") or {}
    seed = ours.get("seed")
    if not isinstance(seed, int):  # a log from elsewhere: the seed `harness eval` would have given it
        seed = sample_seed(run_seed, sid, epoch)
    errors = [ErrorRecord.model_validate(e) for e in ours.get("errors") or [] if isinstance(e, dict)
              and e.get("stage", "solve") == "solve"]
    if not errors and error:
        errors = [ErrorRecord(kind="suite", stage="solve", message=error)]
    usage = {role: Usage(prompt_tokens=u.input_tokens, completion_tokens=u.output_tokens)
             for role, u in (s.role_usage or {}).items()}
    if not usage and s.model_usage:
        usage = {"assistant": Usage(prompt_tokens=sum(u.input_tokens for u in s.model_usage.values()),
                                    completion_tokens=sum(u.output_tokens for u in s.model_usage.values()))}
    return SampleRecord(sample_id=sid, epoch=epoch, seed=seed, status="error" if errors else "ok", output=output,
                        usage=usage, errors=errors, started=s.started_at or created,
                        duration_s=float(s.total_time or 0.0))


def _write(folder: RunFolder, suite: Suite, config: RunConfig, corpus_id: dict[str, JsonValue],
           records: list[SampleRecord], log: Any, path: Path, version: str) -> None:
    """Samples first, the manifest last: a folder without its manifest (an import cut short) is not
    a run, and the next import writes it again."""
    folder.path.mkdir(parents=True, exist_ok=True)
    folder.samples_path.unlink(missing_ok=True)
    try:
        for rec in sorted(records, key=lambda r: (r.sample_id, r.epoch)):
            folder.append(rec)
    finally:
        folder.close()
    folder.write_manifest(RunManifest(
        run_id=folder.run_id, suite=suite.name, suite_version=suite.version, config=config,
        config_hash=config_hash(suite, config, corpus_id), corpus=corpus_id,
        package_versions={"inspect_ai": version, **dict(log.eval.packages or {})},
        started=log.eval.created, ended=(log.stats.completed_at or None) or now_iso(), status="complete",
        command=["inspect-log", str(path.resolve())]))
