"""The `harness` command. Thin: parse flags, call the runner/leaderboards, print results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from harness.errors import HarnessError
from harness.spec import DEFAULT_MODEL

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Evaluate LLM agents on benchmark suites.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks of the harness itself.")
app.add_typer(bench_app, name="bench")
# `leaderboard` and `view` come from leaderboards/commands.py through the `harness.commands` entry points.

# Wide enough when piped (rich falls back to 80 columns), so ids and specs are not cut.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)
RUN_DIR = typer.Option(Path("runs"), "--run-dir", help="Folder holding runs, index.sqlite and the call cache.")


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


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
    agent: Optional[str] = typer.Option(None, "--agent", help="Agent of an agentic suite, e.g. react or cdwm (= --suite-option agent=...)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint for openai/ and litellm/ models."),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Corpus JSONL path or Hugging Face dataset id."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Run only the first N samples."),
    epochs: int = typer.Option(1, "--epochs", min=1, help="Repeat every sample K times (own seed each)."),
    seed: int = typer.Option(0, "--seed", help="Run seed; per-sample seeds derive from it."),
    max_connections: int = typer.Option(8, "--max-connections", min=1, help="Concurrent calls per model."),
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
) -> None:
    """Run a suite against a model; leaves a run folder with transcripts, scores and a summary."""
    from harness.records import RunConfig
    from harness.suite import get_suite, parse_suite_options

    try:
        check_run_dir(run_dir)
        if suite is None and resume is None:
            raise HarnessError("--suite is required (see `harness list`), or pass --resume RUN_ID")
        options: dict = parse_suite_options(suite_option)
        if agent is not None:
            if "agent" in options:
                raise HarnessError("--agent and --suite-option agent=...: give only one of them")
            options["agent"] = agent
        # Built once; the stored options are the validated ones (the config hash must not depend on
        # spelling), defaults left out so that naming a default hashes like leaving it out.
        suite_obj = get_suite(suite, options) if suite else None
        if suite_obj is not None:
            options = suite_obj.options.model_dump(mode="json", exclude_defaults=True)
        roles = suite_obj.roles if suite_obj else ("assistant",)
        models = {role: DEFAULT_MODEL for role in roles}
        if "assistant" in models:
            models["assistant"] = model
        for role, spec in (("planner", planner_model), ("user", user_model), ("world_model", world_model or model)):
            if role in models:
                models[role] = spec
        if world_model is not None and "world_model" not in models:
            raise HarnessError(f"--world-model: suite {suite!r} with this agent asks no world model; drop it (or use --agent cdwm)")
        if "judge" in models:
            for i, spec in enumerate(judge_model):
                models["judge" if i == 0 else f"judge_{i + 1}"] = spec
        config = RunConfig(
            suite=suite or "", models=models, base_url=base_url, corpus=corpus, limit=limit, epochs=epochs,
            seed=seed, max_tokens=max_tokens, temperature=temperature, judge_max_tokens=judge_max_tokens,
            suite_options=options, max_connections=max_connections,
            call_timeout_s=call_timeout, sample_timeout_s=sample_timeout, max_retries=max_retries, cache=cache,
        )
    except HarnessError as exc:
        _fail(str(exc))
    summary, path = run_config(config, run_dir, resume=resume, suite=suite_obj, progress=progress)
    print_summary(summary, path)


def check_run_dir(run_dir: Path) -> None:
    if run_dir.exists() and not run_dir.is_dir():
        raise HarnessError(f"--run-dir {run_dir}: is a file, not a folder; give a folder (it is created if missing)")


def run_config(config, run_dir: Path, *, resume: str | None = None, suite=None, progress: bool = True):
    """Plan, check endpoints, run; bad input is one error line, Ctrl-C leaves a resumable run."""
    from harness.providers import check_reachable
    from harness.runner import plan_run, run_eval

    try:
        plan = plan_run(config, run_dir, resume=resume, suite=suite, command=sys.argv)
        check_reachable(plan.config)
    except HarnessError as exc:
        _fail(str(exc))
    run_id = plan.manifest.run_id
    if plan.resumed:
        err.print(f"resuming {run_id}: {len(plan.done)} samples done, {len(plan.todo)} to go")
    try:
        summary = run_eval(plan, show_progress=progress)
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted[/]: {run_id} is saved; resume with "
                  f"`harness eval --resume {run_id} --run-dir {run_dir}`")
        raise typer.Exit(130)
    except HarnessError as exc:
        _fail(str(exc))
    return summary, plan.folder.path


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def print_summary(summary, path: Path) -> None:
    table = Table(title=f"{summary.suite} {summary.suite_version} -- {summary.run_id}")
    for col in ("metric", "value", "95% CI", "n"):
        table.add_column(col)
    for name, m in summary.metrics.items():
        style = "bold" if name == summary.headline_metric else None
        ci = f"[{_fmt(m.ci_low)}, {_fmt(m.ci_high)}]" if m.value is not None else ""
        table.add_row(name, _fmt(m.value), ci, str(m.n), style=style)
    out.print(table)
    for kind, groups in summary.breakdowns.items():
        cells = ", ".join(f"{k}={_fmt(m.value)} (n={m.n})" for k, m in groups.items())
        out.print(f"{summary.headline_metric} by {kind}: {cells}", highlight=False)
    if summary.epochs:
        head = summary.epochs.get(summary.headline_metric, {})
        out.print(f"{summary.headline_metric} per epoch: {[_fmt(v) for v in head.get('values', [])]} "
                  f"mean {_fmt(head.get('mean'))} sd {_fmt(head.get('std'))}", highlight=False)
    out.print("counts: " + ", ".join(f"{k}={v}" for k, v in summary.counts.items()), highlight=False)
    out.print(f"records: {path}", highlight=False)


@app.command("generate")
def generate_cmd(
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Model spec, provider/name."),
    prompt: str = typer.Option(..., "--prompt", help="Raw text (tokenised as is) unless --chat."),
    chat: bool = typer.Option(False, "--chat", help="Wrap the prompt as one user message in the chat template."),
    adapter: Optional[Path] = typer.Option(None, "--adapter", help="peft LoRA folder or ReFT folder (local model)."),
    adapter_mode: str = typer.Option("preft", "--adapter-mode", help="preft (prompt only) or all-token."),
    max_tokens: int = typer.Option(64, "--max-tokens", min=1),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0),
    seed: int = typer.Option(0, "--seed"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint for openai/ and litellm/ models."),
    as_json: bool = typer.Option(False, "--json", help="Print text, token ids and usage as one JSON object."),
) -> None:
    """One generation, for quick checks and scripts (greedy unless --temperature)."""
    import json

    from harness.generate import generate_once

    try:
        result = generate_once(model=model, prompt=prompt, chat=chat, adapter=adapter, adapter_mode=adapter_mode,
                               max_tokens=max_tokens, temperature=temperature, seed=seed, base_url=base_url)
    except HarnessError as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(result["text"])


@app.command("score")
def score_cmd(
    run_id: str = typer.Argument(..., help="The run whose transcripts to score again."),
    scorer: Optional[str] = typer.Option(None, "--scorer", help="Scorer to use (see `harness describe SUITE`); default: the suite's."),
    judge_model: list[str] = typer.Option([], "--judge-model",
                                          help="Judge for the scorer (repeat for a panel); default: the source run's."),
    judge_max_tokens: Optional[int] = typer.Option(None, "--judge-max-tokens", min=1,
                                                   help="Override the judge's max new tokens; default: the source run's."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint for openai/ and litellm/ judges."),
    max_connections: int = typer.Option(8, "--max-connections", min=1, help="Concurrent calls per model."),
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
        _fail(str(exc))
    summary, path = run_config(config, run_dir, suite=suite_obj, progress=progress)
    print_summary(summary, path)


@app.command("describe")
def describe_cmd(suite: str = typer.Argument(..., help="Suite name (see `harness list`).")) -> None:
    """A suite's contract: options (type, bounds, default, description), roles, scorers, metrics."""
    try:
        describe_suite(suite)
    except HarnessError as exc:
        _fail(str(exc))


def describe_suite(name: str) -> None:
    from harness.suite import describe_field, get_suite

    suite = get_suite(name)
    out.print(f"[bold]{suite.name}[/] {suite.version} -- {suite.description}", highlight=False)
    out.print(f"roles: {', '.join(suite.roles)} (solver: {', '.join(suite.solver_roles) or 'none'})", highlight=False)
    out.print(f"headline metric: {suite.headline_metric}", highlight=False)
    table = Table(title="options (--suite-option KEY=VALUE)")
    for col in ("option", "type and default", "description"):
        table.add_column(col, overflow="fold")
    for key, info in type(suite.options).model_fields.items():
        table.add_row(key, describe_field(info), info.description or "")
    out.print(table)
    scorers = Table(title="scorers (--scorer NAME; the first is the default)")
    for col in ("scorer", "roles", "description"):
        scorers.add_column(col, overflow="fold")
    for key, sc in suite.scorers().items():
        scorers.add_row(key, ", ".join(sc.roles) or "-", sc.description)
    out.print(scorers)


@app.command("list")
def list_cmd(options: Optional[str] = typer.Option(None, "--options", help="Print this suite's options (= harness describe SUITE).")) -> None:
    """Suites installed, with version and sample count of their default corpus."""
    from harness.suite import available_suites, get_suite

    if options is not None:
        try:
            describe_suite(options)
        except HarnessError as exc:
            _fail(str(exc))
        return
    table = Table()
    for col in ("suite", "version", "samples", "description"):
        table.add_column(col)
    for name in sorted(available_suites()):
        try:
            suite = get_suite(name)
            n = str(len(suite.load_samples(None)))
            table.add_row(name, suite.version, n, suite.description)
        except (HarnessError, ImportError) as exc:
            table.add_row(name, "?", "?", f"unavailable: {exc}")
    out.print(table)


@app.command("runs")
def runs_cmd(run_dir: Path = RUN_DIR, suite: Optional[str] = typer.Option(None, "--suite")) -> None:
    """Runs in a run dir, with status and headline metric."""
    from harness.records import RunIndex

    if not (run_dir / "index.sqlite").exists():
        _fail(f"no runs in {run_dir}: run `harness eval` first or pass --run-dir DIR")
    index = RunIndex(run_dir)
    table = Table()
    for col in ("run_id", "suite", "model", "judge", "status", "samples", "errors", "headline"):
        table.add_column(col, overflow="fold")
    for r in index.runs(suite):
        head = f"{r['headline_metric']}={_fmt(r['headline_value'])}" if r["headline_metric"] else ""
        table.add_row(r["run_id"], f"{r['suite']} {r['suite_version']}", r["model"], r["judge"] or "",
                      r["status"], str(r["samples"]), str(r["errors"]), head)
    index.close()
    out.print(table)


@bench_app.command("runner")
def bench_runner(
    samples: int = typer.Option(2000, "--samples", min=1),
    concurrency: int = typer.Option(64, "--concurrency", min=1),
) -> None:
    """The harness's own overhead: full runner vs the raw openai client on an instant server."""
    from harness.bench import bench_runner as run

    run(samples, concurrency, out)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        _fail(f"{flag} {text!r}: write comma-separated integers, e.g. 1,64,512")
    if not values or min(values) < 1:
        _fail(f"{flag} {text!r}: give at least one positive integer")
    return values


@bench_app.command("adapters")
def bench_adapters(
    engine: str = typer.Option("local", "--engine", help="local (the PreFT engine) or vllm (vLLM with the PreFT plugin; run from .venv-vllm)."),
    adapters: str = typer.Option("1,8,64,512", "--adapters", help="Adapter counts, comma-separated."),
    modes: str = typer.Option("base,preft,all-token", "--modes", help="Any of base, preft, all-token."),
    rank: int = typer.Option(16, "--rank", min=1),
    requests: int = typer.Option(64, "--requests", min=1),
    prompt_len: int = typer.Option(128, "--prompt-len", min=1),
    gen_len: int = typer.Option(32, "--gen-len", min=1),
    max_loras: Optional[int] = typer.Option(None, "--max-loras", min=1, help="Resident adapter slots (default min(A, 8))."),
    max_num_seqs: int = typer.Option(64, "--max-num-seqs", min=1),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="torch threads for the run."),
    seed: int = typer.Option(0, "--seed"),
    out_dir: Path = typer.Option(Path("bench/adapters"), "--out", help="Folder for JSON, CSV and plot."),
    vllm_model: Optional[str] = typer.Option(None, "--vllm-model",
                                             help="--engine vllm: base model path or hub id (default: the embedded model)."),
) -> None:
    """Adapter serving: tokens/s, requests/s, TTFT/TPOT per mode and adapter count, base as ceiling."""
    from kernels.preft.bench import format_table, run_adapter_bench

    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    if vllm_model and engine != "vllm":
        _fail("--vllm-model goes with --engine vllm")
    try:
        result = run_adapter_bench(engine=engine, adapters=_int_list(adapters, "--adapters"), modes=mode_list,
                                   rank=rank, requests=requests, prompt_len=prompt_len, gen_len=gen_len,
                                   max_loras=max_loras, max_num_seqs=max_num_seqs, seed=seed, out_dir=out_dir,
                                   threads=threads, progress=lambda msg: err.print(msg, highlight=False),
                                   model=vllm_model if engine == "vllm" else None)
    except ValueError as exc:
        _fail(str(exc))
    out.print(format_table(result), highlight=False)
    out.print(f"written: {out_dir}/adapters_bench.json, .csv, .png", highlight=False)


@app.command("serve")
def serve_cmd(
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Model to serve, provider/name."),
    port: int = typer.Option(8000, "--port"),
    faults: str = typer.Option("", "--faults", help="Fault schedule for tests, e.g. 429,500,timeout,ok."),
) -> None:
    """Serve a model as an OpenAI-compatible endpoint on 127.0.0.1 (vllm/ models: vLLM's own server)."""
    if model.startswith("vllm/"):
        if faults:
            _fail("--faults works with the harness's own server, not with vllm/ models")
        from harness.providers.vllm_provider import exec_openai_server

        try:
            exec_openai_server(model.split("/", 1)[1], port)
        except HarnessError as exc:
            _fail(str(exc))
    from harness.loopback import main

    main(["--model", model, "--port", str(port), "--faults", faults])


def _add_suite_commands() -> None:
    """Suites may bring commands of their own (entry-point group `harness.commands`), so the core
    CLI knows no specific suite."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="harness.commands"):
        app.add_typer(ep.load(), name=ep.name)


def main() -> None:
    _add_suite_commands()
    app()


if __name__ == "__main__":
    main()
