"""ProGraf's commands, added to `harness` through entry points: `harness prograf build-tasks`,
`profile`, `check` and `verdict` (`harness.commands`: prograf = prograf_app) and `harness bench prograf`
(`harness.bench`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from harness.cli.kit import RUN_DIR, err, fail, out

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
    from environments.prograf.generate.build import CORPUS, write_corpus

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

    from environments.prograf.check.bench import format_table, run_bench

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

    from environments.prograf.check.render import Renderer, cache_dir
    from environments.prograf.generate.build import CORPUS
    from environments.prograf.profile import build_profile
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


@prograf_app.command("check")
def check_cmd(
    generator: str = typer.Option(..., "--generator", help="Model spec of the generator (synthetic/prograf-weak-circuits: the positive control)."),
    profile_path: Optional[Path] = typer.Option(None, "--profile", help="Its profile (default: RUN_DIR/prograf-profiles/"
                                                "GENERATOR.kK.json, built now with seeds 0..k-1 unless it is there)."),
    k: int = typer.Option(5, "--k", min=1, help="Single-shot samples per task when building the profile."),
    budget: int = typer.Option(8, "--budget", min=1, max=64, help="Generator calls per task, for every method."),
    checker: str = typer.Option("prompt", "--checker", help="prompt (the claim) or oracle (the hidden points: an upper bound)."),
    seed_base: int = typer.Option(2000, "--seed-base", min=0, help="First generator seed of the methods (fresh: not the profile's)."),
    ablations: bool = typer.Option(False, "--ablations/--no-ablations", help="Also run no-verify, no-rollback, no-replan (and other-profile)."),
    other_profile: Optional[Path] = typer.Option(None, "--other-profile", help="Another generator's profile (ablation other-profile)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N tasks of the hardest subset."),
    max_passes: int = typer.Option(0, "--max-passes", min=0, help="Subset: tasks passed in at most N of the k samples (0 = pass@k = 0)."),
    out_path: Optional[Path] = typer.Option(None, "--out", help="Write the report as JSON here."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Samples (and generator calls) at once."),
    run_dir: Path = typer.Option(Path("runs"), "--run-dir", help="Where each method's run goes (one `prograf-loop` "
                                 "run each: `harness runs`, `harness view`); the verdict is saved as RUN_DIR/claims/"
                                 "prograf.recovery--GENERATOR.json, one per generator (`harness claims table`)."),
    progress: bool = typer.Option(False, "--progress/--no-progress", help="A progress bar per run."),
) -> None:
    """The ProGraf claim (`prograf.recovery`) on the generator's hardest subset with fresh seeds:
    recovery per method with bootstrap CIs, paired differences (loop minus each) with Newcombe's
    paired score intervals over tasks and McNemar tests; reproduced iff the loop beats fixed-step,
    the Reflexion-style agent, best-of-B and its no-profile ablation (every interval strictly above
    0), not reproduced iff one lies wholly below 0, else inconclusive; and where its recovery lands
    against the paper's 43.7-77.8%. Each method is one run of suite `prograf-loop` in RUN_DIR: a
    finished run of the same setup is reused, an interrupted one resumed (run the same command
    again). The verdict is saved under RUN_DIR/claims/, one per generator; `harness prograf verdict
    RUN...` recomputes it from the runs."""
    import asyncio
    import hashlib
    import time

    from environments.prograf.claim import check_claim
    from environments.prograf.generate.build import CORPUS
    from environments.prograf.profile import build_profile, load_profile
    from environments.prograf.task import load_tasks
    from harness.calls import CallPolicy, ManagedModel
    from harness.cli.kit import check_run_dir
    from harness.errors import HarnessError
    from harness.providers import load_model
    from harness.spec import ModelSpec

    if checker not in ("prompt", "oracle"):
        fail(f"--checker {checker}: choose prompt or oracle")
    t0 = time.perf_counter()
    try:
        check_run_dir(run_dir)
        spec = ModelSpec.parse(generator, flag="--generator")
        if profile_path is None:
            # a fixed place, so that the same check names the same profile (and reuses its runs)
            profile_path = run_dir / "prograf-profiles" / f"{generator.replace('/', '_')}.k{k}.json"
            digest = hashlib.sha256(CORPUS.read_bytes()).hexdigest()
            kept = load_profile(profile_path) if profile_path.is_file() else None
            if kept is not None and (kept.generator, kept.k, kept.seed, kept.corpus_sha256) == (generator, k, 0, digest):
                out.print(f"profile: reusing {profile_path}", highlight=False)
            else:
                model = ManagedModel(load_model(spec), max_connections=concurrency, policy=CallPolicy())
                built = asyncio.run(build_profile(model, load_tasks(CORPUS), generator=generator, k=k, seed=0,
                                                  concurrency=concurrency, corpus_sha256=digest))
                profile_path.parent.mkdir(parents=True, exist_ok=True)
                built.save(profile_path)
                out.print(f"profile -> {profile_path}", highlight=False)
        profile = load_profile(profile_path)
        if profile.generator != generator:
            fail(f"--profile {profile_path} is {profile.generator}'s, not {generator}'s (build one with harness prograf profile)")
        report = check_claim(generator, profile, run_dir=run_dir, budget=budget, checker=checker, seed_base=seed_base,
                             profile_path=profile_path, other_profile=other_profile, ablations=ablations, limit=limit,
                             max_passes=max_passes, concurrency=concurrency, progress=progress,
                             log=lambda line: out.print(line, highlight=False, markup=False))
    except HarnessError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]: the finished runs and samples are saved; run the same command again to "
                  "resume (finished runs are reused)")
        raise typer.Exit(130) from None
    _report_and_save(report, run_dir, out_path, wall_s=round(time.perf_counter() - t0, 2))


@prograf_app.command("verdict")
def verdict_cmd(
    run_ids: list[str] = typer.Argument(..., help="The runs of one `harness prograf check`: one per method (the check "
                                        "prints them; `harness runs --suite prograf-loop`)."),
    run_dir: Path = RUN_DIR,
    out_path: Optional[Path] = typer.Option(None, "--out", help="Write the report as JSON here."),
) -> None:
    """Recompute the claim's report and verdict from a check's runs' records alone (no sample is
    run): recoveries, paired differences and the verdict, printed and saved under RUN_DIR/claims/
    (subject = the generator). Names what is wrong: a run of another suite or claim, a missing
    method, runs of two generators or subsets, an unfinished run."""
    from environments.prograf.claim import report_from_runs
    from harness.claims.runs import load_runs
    from harness.errors import HarnessError

    try:
        report = report_from_runs(load_runs(run_dir, run_ids))
    except HarnessError as exc:
        fail(str(exc))
    _report_and_save(report, run_dir, out_path, wall_s=None)


def _report_and_save(report: Any, run_dir: Path, out_path: Optional[Path], wall_s: Optional[float]) -> None:
    from environments.prograf.claim import claim_verdict, format_report
    from harness.claims import save_verdict

    out.print(format_report(report), highlight=False, markup=False)
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(report.model_dump_json(indent=1) + "\n", encoding="utf-8")
    saved = save_verdict(run_dir, claim_verdict(report, wall_s=wall_s))
    out.print(f"verdict saved: {saved}", highlight=False, markup=False)


@prograf_app.command("prompt-checks")
def prompt_checks_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Task file (default: the committed corpus)."),
) -> None:
    """The prompt-derived checker against the hidden points: coverage (share of hidden points it
    recovers, per category and source) and agreement with the hidden-point verifier on every
    reference and structural mutant (precision / recall of "this output is wrong")."""
    import json

    from environments.prograf.check.prompt import agreement, coverage, paraphrase_netlist
    from environments.prograf.generate.build import CORPUS
    from environments.prograf.task import load_tasks
    from harness.errors import HarnessError

    try:
        tasks = load_tasks(corpus or CORPUS)
    except HarnessError as exc:
        fail(str(exc))
    cov, agree = coverage(tasks), agreement(tasks)
    reworded = [p for t in tasks if (p := paraphrase_netlist(t))]  # the netlist prompts in free words
    para_cov, para_agree = coverage(reworded).get("circuit"), agreement(reworded).get("circuit")
    if as_json:
        para = {"tasks": len(reworded)} | ({"coverage": para_cov, "agreement": para_agree} if reworded else {})
        out.print(json.dumps({"coverage": cov, "agreement": agree, "paraphrased_netlists": para}, indent=2),
                  highlight=False)
        return
    out.print(f"{'category':<10} {'coverage':>8} {'recovered/hidden':>17} {'generated':>9} {'handwritten':>11} {'extra':>5}"
              f" | {'precision':>9} {'recall':>6}  tp/fp/fn/tn", highlight=False)
    for cat, row in cov.items():
        a = agree[cat]
        src = {s: f"{v['coverage']:.3f}" for s, v in row["by_source"].items()}
        out.print(f"{cat:<10} {row['coverage']:>8.3f} {str(row['recovered']) + '/' + str(row['hidden']):>17}"
                  f" {src.get('generated', '-'):>9} {src.get('handwritten', '-'):>11} {row['extra']:>5}"
                  f" | {a['precision']:>9.3f} {a['recall']:>6.3f}  {a['tp']}/{a['fp']}/{a['fn']}/{a['tn']}", highlight=False)
    if para_cov is not None and para_agree is not None:
        c, a = para_cov, para_agree
        out.print(f"netlist prompts reworded in free words ({len(reworded)} tasks): coverage {c['coverage']:.3f} "
                  f"({c['recovered']}/{c['hidden']}), extra {c['extra']} | precision {a['precision']:.3f} recall "
                  f"{a['recall']:.3f}  {a['tp']}/{a['fp']}/{a['fn']}/{a['tn']}", highlight=False)


@prograf_app.command("calibrate-image")
def calibrate_image_cmd(
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N tasks, the categories in turn."),
    parity: Optional[str] = typer.Option(None, "--tasks", help="even | odd: only the tasks with an even / odd index "
                                         "in the corpus file (choose a rule on one half, report the other)."),
    check_types: Optional[str] = typer.Option(None, "--check-types", help="Comma-separated check types to calibrate "
                                              "(e.g. ocr_node_label,ocr_edge_label); default: all."),
    out_dir: Path = typer.Option(..., "--out", help="Directory for image_calibration.json."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Task file (default: the committed corpus)."),
    categories: Optional[str] = typer.Option(None, "--categories", help="Comma-separated categories (e.g. "
                                             "flowchart,diagram); default: all."),
    foreign: bool = typer.Option(False, "--foreign", help="Also the foreign-style corpus's outputs of each task "
                                 "(correct and faulty; `harness prograf verifier-audit`)."),
    augment: Optional[int] = typer.Option(None, "--augment", help="Draw every picture varied (font, stroke, colours, "
                                          "dark page, grain, scale, JPEG) from this seed, not clean."),
    exclude: Optional[str] = typer.Option(None, "--exclude-tasks", help="Comma-separated task ids to leave out (those "
                                          "looked at while choosing a rule)."),
) -> None:
    """Calibrate the image-only verifier (OCR labels, OpenCV counts) on our own renders of every
    reference and mutant, against the structural verifier's verdicts: precision / recall per check
    type, and which types pass the enabling rule (precision and pass precision >= 0.9)."""
    import json

    from environments.prograf.check.render import Renderer, cache_dir
    from environments.prograf.generate.build import CORPUS
    from environments.prograf.image.calibrate import calibrate, format_table
    from environments.prograf.task import load_tasks
    from harness.errors import HarnessError

    halves = {"even": 0, "odd": 1}
    if parity is not None and parity not in halves:
        fail(f"--tasks must be 'even' or 'odd', got {parity!r}")
    types = frozenset(t.strip() for t in check_types.split(",") if t.strip()) if check_types else None
    renderer = Renderer(disk_cache=cache_dir())
    try:
        cats = frozenset(c.strip() for c in categories.split(",") if c.strip()) if categories else None
        report = calibrate(load_tasks(corpus or CORPUS), renderer, limit,
                           None if parity is None else halves[parity], types, cats, foreign, augment,
                           frozenset(t.strip() for t in (exclude or "").split(",") if t.strip()))
    except (HarnessError, ValueError) as exc:
        fail(str(exc))
    finally:
        renderer.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "image_calibration.json"
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    out.print(format_table(report), highlight=False, markup=False)
    out.print(f"-> {path}", highlight=False)


@prograf_app.command("calibrate-judge")
def calibrate_judge_cmd(
    judge_model: str = typer.Option(..., "--judge-model", help="The vision judge, an openai/ model that takes image "
                                    "input (the spec `prograf-image` runs will name with --judge-model)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="The judge's endpoint (default: the provider's)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N tasks, the categories in turn."),
    parity: Optional[str] = typer.Option(None, "--tasks", help="even | odd: only the tasks with an even / odd index "
                                         "in the corpus file (choose a rule on one half, report the other)."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Judge calls in flight."),
    out_path: Path = typer.Option(..., "--out", help="The calibration file (JSON) a run names with "
                                  "--suite-option judge_calibration=FILE."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Task file (default: the committed corpus)."),
) -> None:
    """Calibrate a vision judge on our own renders: every point the OCR/OpenCV checks leave undecided,
    on every reference and mutant, asked of the judge and compared with the structural verifier;
    precision / recall per check, and which checks pass the enabling rule (as calibrate-image)."""
    import asyncio

    from environments.prograf.check.render import Renderer, cache_dir
    from environments.prograf.generate.build import CORPUS
    from environments.prograf.image.judge import calibrate_judge, dump, format_judge_table
    from environments.prograf.task import load_tasks
    from harness.calls import CallPolicy, ManagedModel
    from harness.errors import HarnessError
    from harness.providers import load_model
    from harness.spec import ModelSpec

    halves = {"even": 0, "odd": 1}
    if parity is not None and parity not in halves:
        fail(f"--tasks must be 'even' or 'odd', got {parity!r}")
    renderer = Renderer(disk_cache=cache_dir())
    try:
        spec = ModelSpec.parse(judge_model, base_url=base_url, flag="--judge-model")
        model = ManagedModel(load_model(spec), max_connections=concurrency, policy=CallPolicy())
        cal = asyncio.run(calibrate_judge(model.generate, judge_model, load_tasks(corpus or CORPUS), renderer, limit,
                                          None if parity is None else halves[parity]))
    except (HarnessError, ValueError) as exc:
        fail(str(exc))
    finally:
        renderer.close()
    dump(cal, out_path)
    out.print(format_judge_table(cal), highlight=False, markup=False)
    out.print(f"-> {out_path}", highlight=False)


@prograf_app.command("verifier-audit")
def verifier_audit_cmd(
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Task file (default: the committed corpus)."),
    show: int = typer.Option(3, "--show", min=0, help="Failures listed per category and format (what the verifier said)."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the table as Markdown (for docs/prograf.md)."),
) -> None:
    """How far the verifier can be trusted: the foreign-style corpus (correct outputs in other styles
    than the references', each with a one-fault variant) verified, and per category and format the
    false-alarm rate, the miss rate and the failed-for-another-reason rate with Wilson intervals
    (targets: false alarms and misses at most 2%)."""
    import time

    from environments.prograf.check.audit import by_fault, findings, markdown as as_markdown, run_audit, table_rows
    from harness.errors import HarnessError

    start = time.perf_counter()
    try:
        audit = run_audit(corpus)
    except HarnessError as exc:
        fail(str(exc))
    if markdown:
        out.print(as_markdown(audit), highlight=False, markup=False)
    else:
        from rich.table import Table

        rows = table_rows(audit)
        table = Table(*rows[0], title="ProGraf verifier audit (foreign-style corpus; 95% Wilson intervals)")
        for r in rows[1:]:
            table.add_row(*r)
        out.print(table)
    kinds = ", ".join(f"{k} {n} (missed {m}, other {o})" for k, (n, m, o) in by_fault(audit).items())
    out.print(f"faulty outputs by kind: {kinds}", highlight=False, markup=False)
    for line in findings(audit, show) if show else []:
        out.print("  " + line, highlight=False, markup=False)
    out.print(f"{audit.outputs} outputs (corpus sha256 {audit.digest[:16]}), verified in {audit.seconds:.1f} s, "
              f"{time.perf_counter() - start:.1f} s in all", highlight=False, markup=False)
