"""The release checks' commands: `harness judge human-study DIR` (the release's human study
reproduced, `human_study.py`, with any judge the harness runs put beside the published one) and
`harness proact recovery-claim DIR` (the registered claim "Recovery is the hardest trigger type"
judged on the released metrics files, `claims.py`).

Registered by `commands.py` (`register_commands`); kept apart so that their imports (the
`krippendorff` package, the runner, the claims core) load only when a command runs.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.errors import HarnessError
from harness.records import Metric

# The import contract lets only `*.commands` modules use harness.cli.kit, so this module keeps its
# own consoles and error line, in the kit's style (`error: ...` on stderr, exit 2).
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)
RUN_DIR = typer.Option(Path("runs"), "--run-dir", help="Folder holding runs, index.sqlite and the call cache.")


def _fail(message: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}".replace("-0.000", "0.000")

STUDY_SEED = 2026  # the study's own bootstrap seed (human_study.STUDY_SEED), repeated so --help needs no import
STUDY_RESAMPLES = 10_000


def _cell(m: Metric) -> str:
    if m.value is None:
        return "n/a"
    ci = "" if m.ci_low is None or m.ci_high is None else f" [{_fmt(m.ci_low)}, {_fmt(m.ci_high)}]"
    return f"{_fmt(m.value)}{ci}"


def _rejudge(study: object, judge_model: list[str], base_url: str | None, judge_max_tokens: int | None,
             max_connections: int, run_dir: Path, progress: bool) -> dict[str, str]:
    """Grade the study's items with the harness's judge (suite `proact-judge`, an ordinary run:
    cached, resumable, in `harness runs`); item id -> label."""
    from environments.proact.agreement import ProactJudgeAgreementSuite
    from environments.proact.human_study import Study, check_corpus_turns, judge_items_corpus, labels_from_pairs
    from harness.records import RunConfig, RunFolder
    from harness.spec import judge_panel

    assert isinstance(study, Study)
    check_corpus_turns(study)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in judge_items_corpus(study))
    # Named by content, so the same items are the same corpus (and the same run's cache) every time.
    corpus = run_dir / "human-study" / f"items-{hashlib.sha256(text.encode()).hexdigest()[:12]}.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    if not corpus.is_file():
        corpus.write_text(text, encoding="utf-8")
    config = RunConfig(suite="proact-judge", models=judge_panel(judge_model), base_url=base_url, corpus=str(corpus),
                       judge_max_tokens=judge_max_tokens, max_connections=max_connections)
    from harness.providers import check_reachable
    from harness.runner import plan_run, run_eval

    plan = plan_run(config, run_dir, suite=ProactJudgeAgreementSuite(), command=sys.argv)
    check_reachable(plan.endpoints())
    run_eval(plan, show_progress=progress)  # an ordinary run: a second call finds it done and reuses it
    path = plan.folder.path
    err.print(f"re-judged run: {path}", highlight=False)
    return labels_from_pairs(RunFolder(run_dir, path.name).read_samples())


def human_study(
    folder: Path = typer.Argument(..., help="The release's human-study folder (dataset/human_eval): "
                                            "sample_items.json, results/*.jsonl, analysis_stats.json."),
    judge_model: Optional[list[str]] = typer.Option(None, "--judge-model", help="Also re-judge the items with "
                                                    "this judge (repeat for a panel) and put it beside the published one."),
    seed: int = typer.Option(STUDY_SEED, "--seed", help="Bootstrap seed (kappa uses seed + 1); the study's is 2026."),
    bootstrap: int = typer.Option(STUDY_RESAMPLES, "--bootstrap", min=100, help="Bootstrap resamples (the study's: 10000)."),
    base_url: Optional[str] = typer.Option(None, "--base-url"),
    judge_max_tokens: Optional[int] = typer.Option(None, "--judge-max-tokens", min=1),
    max_connections: int = typer.Option(8, "--max-connections", min=1),
    run_dir: Path = RUN_DIR,
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
) -> None:
    """Agreement in the release's human study, per trigger type and overall: ordinal
    Krippendorff's alpha among raters, and Cohen's kappa of the raters' majority vote against the
    published judge (and against --judge-model), each with a bootstrap CI over items. At the
    study's seed and resamples, checks the study's stored figures are reproduced."""
    from environments.proact.human_study import PUBLISHED, STATS_FILE, agreement_table, load_study, published_differences

    try:
        study = load_study(folder)
        judges: dict[str, dict[str, str]] = {}
        if judge_model:
            name = "+".join(judge_model)
            judges[name] = _rejudge(study, judge_model, base_url, judge_max_tokens, max_connections, run_dir, progress)
        rows = agreement_table(study, judges, seed=seed, resamples=bootstrap)
        at_study = seed == STUDY_SEED and bootstrap == STUDY_RESAMPLES and (folder / STATS_FILE).is_file()
        diffs = published_differences(folder, rows) if at_study else []
    except HarnessError as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps([r.model_dump() for r in rows], indent=2))
    else:
        table = Table(title=f"{folder}: {len(study.items)} items, {len(study.ratings)} ratings, "
                            f"{len({r.annotator_id for r in study.ratings})} raters (95% bootstrap CIs over items)")
        for col in ("trigger type", "items rated", "ratings", "alpha (ordinal) among raters",
                    *(f"kappa: majority vote vs {name}" for name in rows[0].kappa)):
            table.add_column(escape(col), overflow="fold")
        for r in rows:
            table.add_row(r.group, str(r.items), str(r.ratings), _cell(r.alpha), *(_cell(m) for m in r.kappa.values()))
        out.print(table)
        for name, labels in judges.items():
            off_scale = sorted({v for v in labels.values() if v not in ("Fail", "Partial", "Pass")})
            missing = sum(v not in ("Fail", "Partial", "Pass") for v in labels.values())
            if missing:
                out.print(f"{escape(name)}: {missing} item(s) without a grade ({', '.join(off_scale)}): "
                          f"counted as items, never as a grade", highlight=False)
    for item in study.unrated:
        err.print(f"note: item {item} was rated by nobody (as the study records); it is in no statistic",
                  highlight=False)
    err.print(f"note: kappa is unweighted and every rater is kept, as in the study's stored figures; "
              f"alpha by the `krippendorff` package; ties in the majority vote go Partial, then Pass, then Fail; "
              f"{PUBLISHED} = the scores stored in sample_items.json", highlight=False)
    if at_study:
        if diffs:
            err.print(f"[red]not reproduced[/]: {len(diffs)} of the figures in {STATS_FILE} differ; first: {diffs[0]}",
                      highlight=False)
            raise typer.Exit(1)
        err.print(f"reproduced: every per-type figure in {STATS_FILE} (alpha, kappa, their CIs, the confusion "
                  f"matrices), within 1e-9", highlight=False)


def recovery_claim(
    eval_dir: Path = typer.Argument(..., help="The release's dataset/eval folder: the sixteen "
                                              "*_proactivity_bench_metrics.json files."),
    run_dir: Path = RUN_DIR,
    save: bool = typer.Option(True, "--save/--no-save", help="Save the verdict as RUN_DIR/claims/CLAIM.json "
                                                             "(`harness claims table` reads it)."),
) -> None:
    """The registered claim `proact.recovery_hardest` judged on the released metrics files:
    Recovery's weighted score against Emergent's and Critical's, paired within each model."""
    from environments.proact.claims import claim_family, recovery_verdict
    from harness.claims.table import condition_text, verdict_text
    from harness.claims.verdict import save_verdict

    family = claim_family()
    try:
        verdict = recovery_verdict(eval_dir, registered=family.registered(family.claims[0]))
    except HarnessError as exc:
        _fail(str(exc))
    lines = [f"{verdict.claim} -- {verdict.seeds} {verdict.unit}",
             f"claim (the paper's): {verdict.sentence}", f"setting (ours): {verdict.setting}",
             f"criterion {verdict.criterion_hash}, registered {verdict.registered or 'NOT COMMITTED'}: {verdict.criterion}",
             *(f"condition: {condition_text(c)}" for c in verdict.conditions),
             *(f"{s.arm}: mean {s.metric} {_fmt(s.value.value)} [{_fmt(s.value.ci_low)}, {_fmt(s.value.ci_high)}]"
               for s in verdict.summaries),
             f"note: {verdict.note}",
             *(f"departure {i}: the paper {d.paper}; we {d.ours} -- why: {d.why} -- effect: {d.effect}"
               for i, d in enumerate(verdict.departures, 1)),
             f"verdict: {verdict_text(verdict)}"]
    for line in lines:
        out.print(escape(line), highlight=False, soft_wrap=True)
    if save:
        out.print(f"saved: {save_verdict(run_dir, verdict)}", highlight=False)


def register_commands(judge_app: typer.Typer, proact_app: typer.Typer) -> None:
    judge_app.command("human-study")(human_study)
    proact_app.command("recovery-claim")(recovery_claim)
