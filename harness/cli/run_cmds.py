"""`harness eval` and `harness score`: run a suite, or score a run's transcripts again."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from harness.cli.kit import RUN_DIR, check_run_dir, fail, print_summary, run_config
from harness.errors import HarnessError
from harness.spec import DEFAULT_MODEL, judge_panel
from harness.suite import role_family

app = typer.Typer()


@app.command("eval")
def eval_cmd(
    suite: Optional[str] = typer.Option(None, "--suite", help="Suite to run (see `harness list`)."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Model under test, provider/name."),
    judge_model: list[str] = typer.Option([DEFAULT_MODEL], "--judge-model",
                                          help="Judge model, provider/name; repeat for a majority vote of several."),
    planner_model: str = typer.Option(DEFAULT_MODEL, "--planner-model", help="Planner model (suites with a planner)."),
    user_model: str = typer.Option(DEFAULT_MODEL, "--user-model", help="Simulated-user model (suites with one)."),
    world_model: Optional[str] = typer.Option(None, "--world-model",
                                              help="World model of agents that predict effects (CDWM); default: the model under test."),
    role: list[str] = typer.Option([], "--role", help="ROLE=SPEC: the model of any role (repeatable; --model, --judge-model, "
                                   "--planner-model, --user-model, --world-model are shorthands)."),
    role_base_url: list[str] = typer.Option([], "--role-base-url",
                                            help="ROLE=URL: the endpoint of one role's model (repeatable; default --base-url)."),
    agent: Optional[str] = typer.Option(None, "--agent", help="Agent of an agentic suite, e.g. react or cdwm (= --suite-option agent=...)."),
    action_format: Optional[str] = typer.Option(
        None, "--action-format", help="How an agentic suite's agent is asked for its actions: free (parsed from text), "
        "tools (native tool calls) or constrained (decoding held to the admissible actions) (= --suite-option action_format=...)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint for openai/ and litellm/ models; URL1,URL2 names replicas of an openai/ model (least-loaded routing)."),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Corpus JSONL path or Hugging Face dataset id."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Run only the first N samples."),
    epochs: int = typer.Option(1, "--epochs", min=1, help="Repeat every sample K times (own seed each)."),
    seed: int = typer.Option(0, "--seed", help="Run seed; per-sample seeds derive from it."),
    max_connections: int = typer.Option(8, "--max-connections", min=1, help="Calls in flight per provider and key (shared by all workers; halves on 429, recovers)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Override the suite's max new tokens for the model under test."),
    temperature: Optional[float] = typer.Option(None, "--temperature", min=0.0, help="Override the suite's temperature for the model under test."),
    judge_max_tokens: Optional[int] = typer.Option(None, "--judge-max-tokens", min=1, help="Override the suite's max new tokens for the judge."),
    suite_option: list[str] = typer.Option([], "--suite-option",
                                           help="KEY=VALUE option of the suite (repeatable; an unknown key lists the valid ones)."),
    call_timeout: float = typer.Option(600.0, "--call-timeout", min=0.1, help="Seconds per model call attempt."),
    sample_timeout: float = typer.Option(3600.0, "--sample-timeout", min=0.1, help="Seconds per sample."),
    max_retries: int = typer.Option(5, "--max-retries", min=0, help="Retries on 429/5xx/timeouts/connection errors."),
    run_dir: Path = RUN_DIR,
    resume: Optional[str] = typer.Option(None, "--resume", help="Run id to resume."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Read and write the model-call cache."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
    executor: str = typer.Option("asyncio", "--executor",
                                 help="Where samples run: asyncio (this process) or ray (Ray tasks on a cluster; the `ray` extra)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address",
                                              help="With --executor ray: the cluster's HOST:PORT (default: start a local one)."),
) -> None:
    """Run a suite against a model; leaves a run folder with transcripts, scores and a summary."""
    from harness.executors import make_executor
    from harness.records import RunConfig
    from harness.suite import get_suite, parse_suite_options

    try:
        check_run_dir(run_dir)
        runner = make_executor(executor, ray_address=ray_address)
        if suite is None and resume is None:
            raise HarnessError("--suite is required (see `harness list`), or pass --resume RUN_ID")
        options: dict[str, Any] = dict(parse_suite_options(suite_option))
        if agent is not None:
            if "agent" in options:
                raise HarnessError("--agent and --suite-option agent=...: give only one of them")
            options["agent"] = agent
        if action_format is not None:
            if "action_format" in options:
                raise HarnessError("--action-format and --suite-option action_format=...: give only one of them")
            options["action_format"] = action_format
        # Built once; the stored options are the validated ones (the config hash must not depend on
        # spelling), defaults left out so that naming a default hashes like leaving it out.
        suite_obj = get_suite(suite, options) if suite else None
        if suite_obj is not None:
            options = suite_obj.options.model_dump(mode="json", exclude_defaults=True)
        roles = suite_obj.roles if suite_obj else ("assistant",)
        shorthands = {"assistant": model, "planner": planner_model, "user": user_model,
                      "world_model": world_model or model}
        if world_model is not None and "world_model" not in roles:
            raise HarnessError(f"--world-model: suite {suite!r} with this agent asks no world model; drop it (or use --agent cdwm)")
        models = assign_models(roles, shorthands, judge_model, pairs(role, "--role"))
        base_urls = pairs(role_base_url, "--role-base-url")
        unknown = sorted(set(base_urls) - set(models))
        if unknown and suite_obj is not None:
            raise HarnessError(f"--role-base-url {unknown[0]}=...: this run has no role {unknown[0]!r} (roles: {', '.join(models)})")
        config = RunConfig(
            suite=suite or "", models=models, base_url=base_url, base_urls=base_urls, corpus=corpus, limit=limit, epochs=epochs,
            seed=seed, max_tokens=max_tokens, temperature=temperature, judge_max_tokens=judge_max_tokens,
            suite_options=options, max_connections=max_connections,
            call_timeout_s=call_timeout, sample_timeout_s=sample_timeout, max_retries=max_retries, cache=cache,
        )
    except HarnessError as exc:
        fail(str(exc))
    summary, path = run_config(config, run_dir, resume=resume, suite=suite_obj, progress=progress, executor=runner)
    print_summary(summary, path)


def pairs(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise HarnessError(f"{flag} {item!r}: write it as ROLE=VALUE, e.g. judge=openai/gpt-4o")
        out[key.strip()] = value.strip()
    return out


def assign_models(roles: tuple[str, ...], shorthands: dict[str, str], judges: list[str],
                  explicit: dict[str, str]) -> dict[str, str]:
    """role -> spec for every role of the run: `--role ROLE=SPEC` first, then the shorthand flags,
    then the embedded default. Several `--judge-model`s make a panel (judge, judge_2, ...)."""
    models = {r: shorthands.get(r, DEFAULT_MODEL) for r in roles}
    if "judge" in models:
        models |= judge_panel(judges)
    for r, spec in explicit.items():
        if r not in models and role_family(r) not in models:
            raise HarnessError(f"--role {r}={spec}: this run has no role {r!r} (roles: {', '.join(models)})")
        models[r] = spec
    return models


@app.command("score")
def score_cmd(
    run_id: str = typer.Argument(..., help="The run whose transcripts to score again."),
    scorer: Optional[str] = typer.Option(None, "--scorer", help="Scorer to use (see `harness describe SUITE`); default: the suite's."),
    judge_model: list[str] = typer.Option([], "--judge-model",
                                          help="Judge for the scorer (repeat for a panel); default: the source run's."),
    judge_max_tokens: Optional[int] = typer.Option(None, "--judge-max-tokens", min=1,
                                                   help="Override the judge's max new tokens; default: the source run's."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint for openai/ and litellm/ judges."),
    max_connections: int = typer.Option(8, "--max-connections", min=1, help="Calls in flight per provider and key (shared by all workers; halves on 429, recovers)."),
    call_timeout: float = typer.Option(600.0, "--call-timeout", min=0.1, help="Seconds per model call attempt."),
    sample_timeout: float = typer.Option(3600.0, "--sample-timeout", min=0.1, help="Seconds per sample."),
    max_retries: int = typer.Option(5, "--max-retries", min=0, help="Retries on 429/5xx/timeouts/connection errors."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Read and write the model-call cache."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
    run_dir: Path = RUN_DIR,
) -> None:
    """Score a run's transcripts again (another scorer or judge) without calling the model under
    test; writes a new run that names its source and scorer (resumable and cached like any run)."""
    from harness.rescore import rescore_config

    try:
        check_run_dir(run_dir)
        config, suite_obj = rescore_config(run_dir, run_id, scorer=scorer, judge_models=judge_model,
                                           judge_max_tokens=judge_max_tokens, base_url=base_url)
        config = config.model_copy(update={"max_connections": max_connections, "call_timeout_s": call_timeout,
                                           "sample_timeout_s": sample_timeout, "max_retries": max_retries,
                                           "cache": cache})
    except HarnessError as exc:
        fail(str(exc))
    summary, path = run_config(config, run_dir, suite=suite_obj, progress=progress)
    print_summary(summary, path)


