"""`harness eval` and `harness score`: run a suite, or score a run's transcripts again."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from pydantic import JsonValue

from harness.cli.kit import check_run_dir, err, fail, print_summary, run_config
from harness.cli.options import EXTRA_ARGS, SHORTHAND_HELP, RunOptions, with_run_options
from harness.roles import assign_roles, parse_role_flags
from harness.errors import HarnessError
from harness.spec import DEFAULT_MODEL

app = typer.Typer()


@app.command("eval", context_settings=EXTRA_ARGS, epilog=SHORTHAND_HELP)
@with_run_options
def eval_cmd(
    ctx: typer.Context,
    suite: Optional[str] = typer.Option(None, "--suite", help="Suite to run (see `harness list`)."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Model under test, provider/name."),
    role: list[str] = typer.Option([], "--role", help="ROLE=SPEC: the model of any role of the suite (repeatable; "
                                   "see `harness describe SUITE` for its roles)."),
    role_config: list[str] = typer.Option([], "--role-config", help="ROLE.KEY=VALUE: a role's base_url, max_tokens or "
                                          "temperature (repeatable), e.g. judge.max_tokens=256."),
    suite_option: list[str] = typer.Option([], "--suite-option",
                                           help="KEY=VALUE option of the suite (repeatable; an unknown key lists the valid ones)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint for openai/ and litellm/ models; URL1,URL2 names replicas of an openai/ model (least-loaded routing)."),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Corpus JSONL path or Hugging Face dataset id."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Run only the first N samples."),
    epochs: int = typer.Option(1, "--epochs", min=1, help="Repeat every sample K times (own seed each)."),
    seed: int = typer.Option(0, "--seed", help="Run seed; per-sample seeds derive from it."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Run id to resume."),
    *,
    run: RunOptions,
) -> None:
    """Run a suite against a model; leaves a run folder with transcripts, scores and a summary."""
    from harness.executors import make_executor
    from harness.records import RunConfig
    from harness.run_folder import RunFolder
    from harness.suite import get_suite, parse_suite_options

    try:
        check_run_dir(run.run_dir)
        runner = make_executor(run.executor, ray_address=run.ray_address)
        if suite is None and resume is None:
            raise HarnessError("--suite is required (see `harness list`), or pass --resume RUN_ID")
        flags = parse_role_flags(role, role_config, ctx.args)
        options: dict[str, JsonValue] = dict(parse_suite_options(suite_option))
        for key, value in flags.options.items():
            if key in options:
                raise HarnessError(f"--{key.replace('_', '-')} and --suite-option {key}=...: give only one of them")
            options[key] = value
        # Built once; the stored options are the validated ones (the config hash must not depend on
        # spelling), defaults left out so that naming a default hashes like leaving it out.
        suite_obj = get_suite(suite, options) if suite else None
        if suite_obj is not None:
            options = suite_obj.options.model_dump(mode="json", exclude_defaults=True)
        if "world" in flags.role_models and (suite_obj is None or "world_model" not in suite_obj.roles):
            raise HarnessError(f"--world-model: suite {suite!r} with this agent asks no world model; drop it (or use --agent cdwm)")
        if suite_obj is None:  # --resume alone: the run's own roles (only their endpoints may move)
            stored = RunFolder(run.run_dir, resume or "").read_manifest().config
            roles = assign_roles(tuple(stored.roles), model, flags, base=stored.roles)
        else:
            roles = assign_roles(suite_obj.roles, model, flags)
        config = RunConfig(
            suite=suite or "", roles=roles, base_url=base_url, corpus=corpus, limit=limit, epochs=epochs, seed=seed,
            suite_options=options, **run.config_fields(),
        )
    except HarnessError as exc:
        fail(str(exc))
    summary, path = run_config(config, run.run_dir, resume=resume, suite=suite_obj, progress=run.progress,
                               executor=runner)
    print_summary(summary, path)


@app.command("score", context_settings=EXTRA_ARGS, epilog="Shorthands: --judge-model SPEC (repeat for a panel), "
             "--judge-max-tokens N, --role-base-url ROLE=URL.")
@with_run_options
def score_cmd(
    ctx: typer.Context,
    run_id: Optional[str] = typer.Argument(None, help="The run whose transcripts to score again (or --from-inspect LOG)."),
    scorer: Optional[str] = typer.Option(None, "--scorer", help="Scorer to use (see `harness describe SUITE`); default: the suite's."),
    role: list[str] = typer.Option([], "--role", help="ROLE=SPEC: the model of a role the scorer calls (e.g. "
                                   "judge=openai/gpt-4o); default: the source run's."),
    role_config: list[str] = typer.Option([], "--role-config", help="ROLE.KEY=VALUE: a role's base_url, max_tokens or "
                                          "temperature; default: the source run's."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint for openai/ and litellm/ judges."),
    from_inspect: Optional[Path] = typer.Option(None, "--from-inspect", help="Score an Inspect eval log's samples "
                                                "instead of a run (harness/inspect_import.py; `inspect` extra)."),
    inspect_suite: Optional[str] = typer.Option(None, "--suite", help="With --from-inspect: the suite that reads "
                                                "the log (default: the log's task)."),
    inspect_corpus: Optional[str] = typer.Option(None, "--corpus", help="With --from-inspect: the corpus its samples "
                                                 "came from (default: the one the log names, else the suite's)."),
    *,
    run: RunOptions,
) -> None:
    """Score a run's transcripts again (another scorer or judge) without calling the model under
    test; writes a new run that names its source and scorer (resumable and cached like any run).
    `--from-inspect LOG`: the same for an Inspect log's samples, imported as a run first."""
    from harness.executors import make_executor
    from harness.rescore import rescore_config

    try:
        check_run_dir(run.run_dir)
        runner = make_executor(run.executor, ray_address=run.ray_address)
        extra = list(ctx.args)
        if run_id is not None and run_id.startswith("-"):  # no RUN_ID given: click put the first shorthand
            extra, run_id = [run_id, *extra], None  # (--judge-model) in its place; a run id never starts with -
        flags = parse_role_flags(role, role_config, extra)
        run_id, note = _source_run(run_id, from_inspect, inspect_suite, inspect_corpus, run.run_dir)
        config, suite_obj = rescore_config(run.run_dir, run_id, scorer=scorer, flags=flags, base_url=base_url)
        if note:  # after the checks: bad input stays one line
            err.print(note, highlight=False, soft_wrap=True)
        config = config.model_copy(update=run.config_fields())
    except HarnessError as exc:
        fail(str(exc))
    summary, path = run_config(config, run.run_dir, suite=suite_obj, progress=run.progress, executor=runner)
    print_summary(summary, path)


def _source_run(run_id: Optional[str], log: Optional[Path], suite: Optional[str], corpus: Optional[str],
                run_dir: Path) -> tuple[str, str]:
    """The run `harness score` scores -- RUN_ID, or an Inspect log imported as a run -- and a note
    saying where an imported log went ("" for RUN_ID)."""
    if log is None:
        if suite or corpus:
            raise HarnessError("--suite and --corpus go with --from-inspect LOG; a run's own are used for RUN_ID")
        if run_id is None:
            raise HarnessError("give the RUN_ID to score (see `harness runs`), or --from-inspect LOG")
        return run_id, ""
    if run_id is not None:
        raise HarnessError(f"give RUN_ID ({run_id}) or --from-inspect LOG, not both")
    from harness.inspect_import import import_inspect_log

    found = import_inspect_log(log, run_dir, suite=suite, corpus=corpus)
    return found.run_id, (f"{log}: {found.samples} samples {'already imported' if found.reused else 'imported'} "
                          f"as {found.run_id}")
