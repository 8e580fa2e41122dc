"""ProGraf's commands, added to `harness` through entry points: `harness prograf build-tasks`
(`harness.commands`: prograf = prograf_app) and `harness bench prograf` (`harness.bench`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.kit import fail, out

prograf_app = typer.Typer(no_args_is_help=True, help="ProGraf: structured-diagram tasks and their verifier.")


@prograf_app.callback()
def _group() -> None:
    """ProGraf: structured-diagram tasks and their verifier (a group, so that later commands join it)."""


@prograf_app.command("build-tasks")
def build_tasks_cmd(
    seed: int = typer.Option(0, "--seed", help="Seed of the generated tasks (0 = the committed corpus)."),
    out_path: Optional[Path] = typer.Option(None, "--out", help="Where to write (default: the committed corpus file)."),
) -> None:
    """Regenerate the 304-task corpus (byte for byte for the same seed) and print its hash."""
    from environments.prograf.build import CORPUS, write_corpus

    path = out_path or CORPUS
    n, digest = write_corpus(path, seed)
    out.print(f"{n} tasks -> {path} (sha256 {digest})", highlight=False)


def bench_prograf_cmd(
    render: bool = typer.Option(True, "--render/--no-render", help="Also render SVG (references and mutants)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N tasks."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Verifier time per task per category over every reference and mutant of the corpus (structural,
    and rendered), the render cache's hit rate, and whether every reference passed and every mutant
    failed its target."""
    import json

    from environments.prograf.bench import format_table, run_bench

    result = run_bench(render=render, limit=limit)
    out.print(json.dumps(result, indent=2) if as_json else format_table(result), highlight=False)


@prograf_app.command("profile")
def profile_cmd(
    generator: str = typer.Option(..., "--generator", help="Model spec of the generator to profile (e.g. openai/gpt-4o-mini)."),
    k: int = typer.Option(5, "--k", min=1, help="Single-shot samples per task (seeds seed..seed+k-1)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N tasks."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the profile (JSON)."),
    seed: int = typer.Option(0, "--seed", help="First sampling seed (the loop's claim check must use fresh ones)."),
    fmt: str = typer.Option("auto", "--format", help="Format asked for (auto = each task's preferred one)."),
    render: bool = typer.Option(False, "--render/--no-render", help="Render SVG and count only what is visible."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Tasks sampled at once."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Task file (default: the committed corpus)."),
) -> None:
    """Build a generator's capability profile (category reliability with CIs, component failure rates,
    recurrent failure patterns, size sensitivity, format error rates, the hardest subset) and save it."""
    import asyncio
    import hashlib

    from environments.prograf.build import CORPUS
    from environments.prograf.profile import build_profile
    from environments.prograf.render import Renderer, cache_dir
    from environments.prograf.task import FORMATS, load_tasks
    from harness.calls import CallPolicy, ManagedModel
    from harness.errors import HarnessError
    from harness.providers import load_model
    from harness.spec import ModelSpec

    if fmt != "auto" and fmt not in FORMATS:
        fail(f"--format {fmt}: choose auto or one of {', '.join(FORMATS)}")
    path = corpus or CORPUS
    renderer = Renderer(disk_cache=cache_dir()) if render else None
    try:
        tasks = load_tasks(path)[:limit]
        model = ManagedModel(load_model(ModelSpec.parse(generator, flag="--generator")), max_connections=concurrency,
                             policy=CallPolicy())
        profile = asyncio.run(build_profile(model, tasks, generator=generator, k=k, seed=seed, fmt=fmt,
                                            renderer=renderer, concurrency=concurrency,
                                            corpus_sha256=hashlib.sha256(path.read_bytes()).hexdigest()))
    except HarnessError as exc:
        fail(str(exc))
    finally:
        if renderer is not None:
            renderer.close()
    profile.save(out_path)
    weakest = sorted(profile.component_failure.items(), key=lambda kv: -(kv[1].value or 0))[:5]
    out.print(f"{len(tasks)} tasks x {k} -> {out_path}; hardest subset {len(profile.hardest)} tasks ({profile.hardest_rule})",
              highlight=False)
    for name, m in profile.category_reliability.items():
        out.print(f"  reliability {name}: {m.value:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}] (n={m.n})", highlight=False)
    out.print("  weakest components: " + ", ".join(f"{c} {m.value:.3f}" for c, m in weakest), highlight=False)
