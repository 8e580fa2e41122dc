"""ProactBench's own commands, added to `harness` through the entry-point group
`harness.commands`: `harness corpus validate`, `harness proact metrics`, `harness judge agreement`,
`harness judge human-study DIR` (the release's human study reproduced, `human_study.py`, with any judge
the harness runs beside the published one) and `harness proact recovery-claim DIR` (the registered
claim "Recovery is the hardest trigger type" on the released metrics files, `claims.py`). Heavy
imports (the `krippendorff` package, the runner, the claims core) load only when a command runs."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape
from rich.table import Table

from harness.cli.kit import RUN_DIR, err, out, print_summary, run_config
from harness.cli.kit import fail as _fail
from harness.cli.kit import fmt as _fmt
from harness.errors import HarnessError
from harness.records import Metric
from harness.spec import DEFAULT_MODEL, judge_panel

if TYPE_CHECKING:
    from pydantic import JsonValue

corpus_app = typer.Typer(no_args_is_help=True, help="Check and build ProactBench-format corpora.")
proact_app = typer.Typer(no_args_is_help=True, help="ProactBench results tools.")
judge_app = typer.Typer(no_args_is_help=True, help="How far a judge can be trusted.")


@corpus_app.command("validate")
def validate(
    path: Path = typer.Argument(..., help="A corpus .jsonl file, a folder of them, or a Hugging Face dataset id "
                                          "(bosonai/proactbench, boson-ai/proactbench-data)."),
    strict: bool = typer.Option(False, "--strict", help="Treat window, length and evidence deviations as errors."),
) -> None:
    """Schema and protocol rules (windows, trigger spacing, planner consistency, anchor
    discipline, stored counts), reported per row, and the corpus' layout: labelled, or the
    release's current rubrics-only layout. Exit 1 when any row has an error."""
    from corpora.proactbench import LAYOUT_NAMES, corpus_files, hub_corpus_file, is_hub_id, row_layout, validate_row
    from corpora.validation import read_text
    from environments.proact.corpus_rules import check_row

    fix = "pass a final_dialogues.jsonl file or a folder of them"
    try:
        if is_hub_id(path):
            path = hub_corpus_file(str(path))
        files = corpus_files(path)
        texts = [(file, read_text(file, "corpus file", fix)) for file in files]
    except HarnessError as exc:
        _fail(str(exc))
    rows = errors = warnings = 0
    layouts: dict[str, int] = {}
    for file, text in texts:
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            rows += 1
            where = f"{file}:{lineno}"
            try:
                raw = json.loads(line)
                row = validate_row(raw, where)
            except json.JSONDecodeError as exc:
                errors += 1
                out.print(f"[red]error[/] {where}: not valid JSON ({exc.msg})", highlight=False)
                continue
            except HarnessError as exc:
                errors += 1
                out.print(f"[red]error[/] {exc}", highlight=False, soft_wrap=True)
                continue
            layout = row_layout(row, where)
            layouts[layout] = layouts.get(layout, 0) + 1
            for problem in check_row(raw, strict=strict):
                is_error = problem.severity == "error"
                errors += is_error
                warnings += not is_error
                tag = "[red]error[/]" if is_error else "[yellow]warning[/]"
                out.print(f"{tag} {where} ({row.unique_id_eval}): field `{problem.field}` {problem.message}",
                          highlight=False, soft_wrap=True)
    if not rows:
        what = f"corpus folder {path} holds no rows in its {len(files)} .jsonl file(s)" if path.is_dir() \
            else f"corpus file {path} has no rows"
        _fail(f"{what}: {fix} with at least one dialogue")
    verdict = "[red]FAILED[/]" if errors else "[green]OK[/]"
    out.print(f"{verdict}: {rows} rows in {len(files)} file(s), {errors} errors, {warnings} warnings"
              + (" (strict)" if strict else ""), highlight=False)
    # The layout decides what the corpus is good for: rubrics-only rows run `--suite proact`,
    # only labelled rows give `harness judge agreement` something to agree with.
    for name, n in sorted(layouts.items()):
        out.print(f"layout: {n} row(s) {LAYOUT_NAMES[name]}", highlight=False, soft_wrap=True)
    if errors:
        raise typer.Exit(1)


@proact_app.command("metrics")
def metrics(
    file: Path = typer.Argument(..., help="A results file as released ({model}_proactivity_bench_results.jsonl), "
                                          "or any file of dialogues whose triggers carry evaluation_result."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    expect: Optional[Path] = typer.Option(None, "--expect", help="A *_metrics.json to compare with, field by field "
                                                                 "(floats within 1e-12); exit 1 at the first difference."),
    out_file: Optional[Path] = typer.Option(None, "--out", help="Write the metrics file, in the released layout."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when the file deviates from the results layout."),
) -> None:
    """Re-aggregate a results file as released: the reference pipeline's metrics file (same
    layout and arithmetic) and our metrics with bootstrap CIs over dialogues. Each deviation
    from the results layout is a warning, counted and summarised; no row is dropped."""
    from corpora.proact_results import load_results
    from environments.proact.metrics import proact_breakdowns, proact_counts, proact_metrics
    from environments.proact.results import count_fields, differences, order_notes, release_layout, release_metrics

    try:
        results = load_results(file)
        expected = _read_metrics_file(expect) if expect is not None else None
    except HarnessError as exc:
        _fail(str(exc))
    records, official = release_metrics(results)
    layout = release_layout(official)
    summary = results.summary()
    for line in summary:
        err.print(f"[yellow]warning[/] {line}", highlight=False, soft_wrap=True)
    rows_with = len({d.line for d in results.deviations})
    err.print(f"{file.name}: {len(results.rows)} rows read, none dropped; {sum(results.deviation_counts().values())} "
              f"deviation(s) in {rows_with} row(s)", highlight=False, soft_wrap=True)
    ours = proact_metrics(records, seed=seed)
    if as_json:
        print(json.dumps({"official": {"aggregate_trigger_stats": layout["aggregate_trigger_stats"],
                                       "metrics": layout["metrics"], "token_usage": layout["token_usage"]},
                          "error_trigger_stats": official["error_trigger_stats"],
                          "deviations": results.deviation_counts(), "dropped_triggers": results.dropped_triggers(),
                          "metrics": {k: m.model_dump() for k, m in ours.items()},
                          "counts": proact_counts(records)}, indent=2))
    else:
        table = Table(title=f"{file.name}: {len(results.rows)} dialogues")
        for col in ("metric", "value", "95% CI", "n"):
            table.add_column(col)
        for name, m in ours.items():
            table.add_row(name, _fmt(m.value), f"[{_fmt(m.ci_low)}, {_fmt(m.ci_high)}]" if m.value is not None else "", str(m.n))
        out.print(table)
        for kind, groups in proact_breakdowns(records, seed=seed).items():
            out.print(f"weighted score by {kind}: " + ", ".join(f"{k}={_fmt(m.value)} (n={m.n})" for k, m in groups.items()),
                      highlight=False)
        errors = sum(official["error_trigger_stats"].values())
        out.print(f"ERROR triggers (in no denominator): {errors}; triggers the reference pipeline likely dropped: "
                  f"{results.dropped_triggers()}", highlight=False)
        out.print("official: " + json.dumps(layout["metrics"]), highlight=False, soft_wrap=True)
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(json.dumps(layout, indent=2), encoding="utf-8")
    if expected is not None:
        diffs = differences(layout, expected)
        if diffs:
            err.print(f"[red]mismatch[/] with {expect}: first difference: {diffs[0]} ({len(diffs)} in all)",
                      highlight=False, soft_wrap=True)
            raise typer.Exit(1)
        for note in order_notes(layout, expected):
            err.print(f"note: {note}", highlight=False, soft_wrap=True)
        err.print(f"matches {expect}: {count_fields(expected)} fields compared", highlight=False, soft_wrap=True)
    if strict and results.deviations:
        raise typer.Exit(1)


def _read_metrics_file(path: Path) -> dict[str, JsonValue]:
    from corpora.validation import read_text

    fix = "pass --expect a {model}_proactivity_bench_metrics.json file"
    if not path.exists():
        raise HarnessError(f"metrics file {path} not found: {fix}")
    try:
        data = json.loads(read_text(path, "metrics file", fix))
    except json.JSONDecodeError as exc:
        raise HarnessError(f"metrics file {path}:{exc.lineno}: not valid JSON ({exc.msg}); {fix}") from exc
    if not isinstance(data, dict):
        raise HarnessError(f"metrics file {path} holds a {type(data).__name__}, not an object: {fix}")
    return data


@judge_app.command("agreement")
def agreement(
    corpus: str = typer.Option(..., "--corpus", help="Corpus with stored labels (evaluation_result); the release's "
                                                   "current layout has none, and is refused saying where labels come from."),
    judge_model: list[str] = typer.Option([DEFAULT_MODEL], "--judge-model", help="Judge; repeat for a panel."),
    base_url: Optional[str] = typer.Option(None, "--base-url"),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="First N labelled dialogues."),
    seed: int = typer.Option(0, "--seed"),
    judge_max_tokens: Optional[int] = typer.Option(None, "--judge-max-tokens", min=1),
    max_connections: int = typer.Option(8, "--max-connections", min=1),
    run_dir: Path = RUN_DIR,
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Re-judge the corpus' curated responses; Cohen's kappa and the 3x3 confusion matrix against
    the stored labels, per trigger type, with bootstrap CIs over dialogues."""
    from corpora.proact_types import GRADES
    from environments.proact.agreement import ProactJudgeAgreementSuite
    from harness.records import RunConfig

    models = judge_panel(judge_model)
    config = RunConfig(suite="proact-judge", models=models, base_url=base_url, corpus=corpus, limit=limit, seed=seed,
                       judge_max_tokens=judge_max_tokens, max_connections=max_connections)
    summary, path = run_config(config, run_dir, suite=ProactJudgeAgreementSuite(), progress=progress)
    print_summary(summary, path)
    for name, matrix in summary.official.items():
        if not name.startswith("confusion_"):
            continue
        table = Table(title=f"{name.removeprefix('confusion_')}: stored (rows) x judge (columns)")
        table.add_column("stored \\ judge")
        for g in GRADES:
            table.add_column(g)
        for g, row in zip(GRADES, matrix):
            table.add_row(g, *map(str, row))
        out.print(table)
    err.print("kappa between frontier judges in the ProactBench paper: 0.35-0.46", highlight=False)


@corpus_app.command("build")
def build(
    out_file: Path = typer.Option(..., "--out", help="Where the accepted dialogues go (official format JSONL)."),
    planner_model: str = typer.Option(DEFAULT_MODEL, "--planner-model"),
    user_model: str = typer.Option(DEFAULT_MODEL, "--user-model"),
    assistant_model: str = typer.Option(DEFAULT_MODEL, "--assistant-model"),
    judge_model: list[str] = typer.Option([DEFAULT_MODEL], "--judge-model", help="Labels the generated triggers."),
    audit_model: str = typer.Option(DEFAULT_MODEL, "--audit-model", help="Independent model that audits the rubrics."),
    base_url: Optional[str] = typer.Option(None, "--base-url"),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Generate this many dialogues."),
    seed: int = typer.Option(0, "--seed"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Max new tokens for the assistant."),
    judge_max_tokens: Optional[int] = typer.Option(None, "--judge-max-tokens", min=1),
    max_connections: int = typer.Option(8, "--max-connections", min=1),
    run_dir: Path = RUN_DIR,
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Generate dialogues with the live three-agent loop, audit every rubric with an independent
    model, and keep the dialogues that pass the audit and the protocol rules."""
    from environments.proact.audit import ProactAuditSuite
    from environments.proact.corpus_rules import check_row
    from environments.proact.live import ProactLiveSuite
    from environments.proact.scoring import release_row
    from harness.records import RunConfig
    from harness.run_folder import RunFolder

    models = {"assistant": assistant_model, "planner": planner_model, "user": user_model}
    models |= judge_panel(judge_model)
    live = RunConfig(suite="proact-live", models=models, base_url=base_url, limit=limit, seed=seed,
                     max_tokens=max_tokens, judge_max_tokens=judge_max_tokens, max_connections=max_connections)
    _, live_path = run_config(live, run_dir, suite=ProactLiveSuite(), progress=progress)
    # A scored record's transcript and verdicts, joined into a row of the release format.
    generated = [release_row(r) for r in RunFolder(run_dir, live_path.name).read_samples() if r.status == "ok"]
    rule_ok = [row for row in generated if not [p for p in check_row(row) if p.severity == "error"]]
    if not rule_ok:
        _fail(f"no generated dialogue passed the protocol rules (see {live_path}/samples.jsonl)", code=1)
    candidates = live_path / "candidates.jsonl"
    candidates.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rule_ok), encoding="utf-8")
    audit = RunConfig(suite="proact-audit", models={"judge": audit_model}, base_url=base_url, corpus=str(candidates),
                      seed=seed, max_connections=max_connections)
    _, audit_path = run_config(audit, run_dir, suite=ProactAuditSuite(), progress=progress)
    verdicts = {r.sample_id: r.scores for r in RunFolder(run_dir, audit_path.name).read_samples()}
    accepted = [row for row in rule_ok if verdicts.get(str(row["unique_id_eval"]), {}).get("accepted")]
    rejected = [verdicts[str(row["unique_id_eval"])] for row in rule_ok
                if row not in accepted and str(row["unique_id_eval"]) in verdicts]
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in accepted), encoding="utf-8")
    rejected_file = out_file.with_suffix(".rejected.jsonl")
    rejected_file.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in rejected), encoding="utf-8")
    out.print(f"generated {len(generated)}, passed the rules {len(rule_ok)}, passed the audit {len(accepted)} "
              f"-> {out_file} (rejections with reasons: {rejected_file})", highlight=False)


# ---------------------------------------------------------------- the release's human study and claim
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
    from harness.records import RunConfig
    from harness.run_folder import RunFolder
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


@judge_app.command("human-study")
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
    quality_exclusion: bool = typer.Option(False, "--quality-exclusion", help="Leave out the raters the study's "
                                           "README's pre-registered quality criterion excludes (quadratic-weighted "
                                           "kappa < 0.10 against the judge over >= 5 items); its stored figures keep them."),
    exclude_rater: Optional[list[str]] = typer.Option(None, "--exclude-rater", help="Leave out this rater (A01..A18; "
                                                      "repeat for more)."),
) -> None:
    """Agreement in the release's human study, per trigger type and overall: ordinal
    Krippendorff's alpha among raters, and Cohen's kappa of the raters' majority vote against the
    published judge (and against --judge-model), each with a bootstrap CI over items. At the
    study's seed and resamples, with every rater kept, checks the study's stored figures are
    reproduced."""
    from environments.proact.human_study import (
        PUBLISHED,
        STATS_FILE,
        agreement_table,
        load_study,
        published_differences,
        rater_quality,
        without_raters,
    )

    excluded: list[str] = []
    try:
        study = load_study(folder)
        if quality_exclusion:
            for q in rater_quality(study):
                if q.excluded:
                    excluded.append(q.rater)
                    err.print(f"note: rater {q.rater} excluded by the quality criterion: quadratic-weighted kappa "
                              f"{q.kappa_quadratic:.3f} against the published judge over {q.items} items", highlight=False)
        excluded += [r for r in exclude_rater or [] if r not in excluded]
        if excluded:
            study = without_raters(study, excluded)
        judges: dict[str, dict[str, str]] = {}
        if judge_model:
            name = "+".join(judge_model)
            judges[name] = _rejudge(study, judge_model, base_url, judge_max_tokens, max_connections, run_dir, progress)
        rows = agreement_table(study, judges, seed=seed, resamples=bootstrap)
        at_study = (seed == STUDY_SEED and bootstrap == STUDY_RESAMPLES and (folder / STATS_FILE).is_file()
                    and not excluded)
        diffs = published_differences(folder, rows) if at_study else []
    except HarnessError as exc:
        _fail(escape(str(exc)))
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
    kept = f"raters {', '.join(excluded)} left out (the stored figures keep every rater)" if excluded else \
        "every rater is kept, as in the study's stored figures"
    err.print(f"note: kappa is unweighted and {kept}; "
              f"alpha by the `krippendorff` package; ties in the majority vote go Partial, then Pass, then Fail; "
              f"{PUBLISHED} = the scores stored in sample_items.json", highlight=False)
    if at_study:
        if diffs:
            err.print(f"[red]not reproduced[/]: {len(diffs)} of the figures in {STATS_FILE} differ; first: {diffs[0]}",
                      highlight=False)
            raise typer.Exit(1)
        err.print(f"reproduced: every per-type figure in {STATS_FILE} (alpha, kappa, their CIs, the confusion "
                  f"matrices), within 1e-9", highlight=False)


@proact_app.command("recovery-claim")
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
        _fail(escape(str(exc)))
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
