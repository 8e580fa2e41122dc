"""ProactBench's own commands, added to `harness` through the entry-point group
`harness.commands`: `harness corpus validate`, `harness proact metrics`, `harness judge agreement`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from harness.cli import RUN_DIR, _fail, _fmt, err, out, print_summary, run_config
from harness.errors import HarnessError
from harness.spec import DEFAULT_MODEL

corpus_app = typer.Typer(no_args_is_help=True, help="Check and build ProactBench-format corpora.")
proact_app = typer.Typer(no_args_is_help=True, help="ProactBench results tools.")
judge_app = typer.Typer(no_args_is_help=True, help="How far a judge can be trusted.")


def _dialogue_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.glob("*.jsonl") if "blueprint" not in p.name)
        if not files:
            raise HarnessError(f"{path} holds no dialogue .jsonl files: pass a corpus file or folder")
        return files
    if not path.exists():
        raise HarnessError(f"corpus {path} not found: pass a final_dialogues.jsonl file or a folder of them")
    return [path]


@corpus_app.command("validate")
def validate(
    path: Path = typer.Argument(..., help="A corpus .jsonl file, or a folder of them."),
    strict: bool = typer.Option(False, "--strict", help="Treat window, length and evidence deviations as errors."),
) -> None:
    """Schema and protocol rules (windows, trigger spacing, planner consistency, anchor
    discipline, stored counts), reported per row. Exit 1 when any row has an error."""
    from corpora.proactbench import validate_row
    from environments.proact.corpus_rules import check_row

    try:
        files = _dialogue_files(path)
    except HarnessError as exc:
        _fail(str(exc))
    rows = errors = warnings = 0
    for file in files:
        with open(file, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                rows += 1
                where = f"{file}:{lineno}"
                try:
                    row = validate_row(json.loads(line), where)
                except json.JSONDecodeError as exc:
                    errors += 1
                    out.print(f"[red]error[/] {where}: not valid JSON ({exc.msg})", highlight=False)
                    continue
                except HarnessError as exc:
                    errors += 1
                    out.print(f"[red]error[/] {exc}", highlight=False)
                    continue
                for problem in check_row(row, strict=strict):
                    is_error = problem.severity == "error"
                    errors += is_error
                    warnings += not is_error
                    tag = "[red]error[/]" if is_error else "[yellow]warning[/]"
                    out.print(f"{tag} {where} ({row['unique_id_eval']}): field `{problem.field}` {problem.message}",
                              highlight=False, soft_wrap=True)
    verdict = "[red]FAILED[/]" if errors else "[green]OK[/]"
    out.print(f"{verdict}: {rows} rows in {len(files)} file(s), {errors} errors, {warnings} warnings"
              + (" (strict)" if strict else ""), highlight=False)
    if errors:
        raise typer.Exit(1)


@proact_app.command("metrics")
def metrics(
    file: Path = typer.Argument(..., help="Results or corpus file in the official format, with labels."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Recount every dialogue's labels against its stored trigger_stats and print the official
    metrics (pooled over triggers) with bootstrap CIs over dialogues."""
    from corpora.proactbench import load_rows
    from environments.proact.metrics import official_metrics, proact_breakdowns, proact_counts, proact_metrics
    from environments.proact.results import as_records, trigger_stats_mismatches

    try:
        rows, _ = load_rows(file)
    except HarnessError as exc:
        _fail(str(exc))
    records = as_records(rows)
    mismatches = trigger_stats_mismatches(rows)
    with_stats = sum(isinstance(r.get("trigger_stats"), dict) for r in rows)
    ours = proact_metrics(records, seed=seed)
    official = official_metrics(records)
    if as_json:
        print(json.dumps({"official": official, "metrics": {k: m.model_dump() for k, m in ours.items()},
                          "trigger_stats_mismatches": mismatches, "counts": proact_counts(records)}, indent=2))
    else:
        out.print(f"trigger_stats: {with_stats - len(mismatches)} of {with_stats} dialogues match their labels' counts",
                  highlight=False)
        for uid, stored, mine in mismatches:
            out.print(f"[red]mismatch[/] {uid}: stored {stored}, labels count {mine}", highlight=False, soft_wrap=True)
        table = Table(title=f"{file.name}: {len(rows)} dialogues")
        for col in ("metric", "value", "95% CI", "n"):
            table.add_column(col)
        for name, m in ours.items():
            table.add_row(name, _fmt(m.value), f"[{_fmt(m.ci_low)}, {_fmt(m.ci_high)}]" if m.value is not None else "", str(m.n))
        out.print(table)
        for kind, groups in proact_breakdowns(records, seed=seed).items():
            out.print(f"weighted score by {kind}: " + ", ".join(f"{k}={_fmt(m.value)} (n={m.n})" for k, m in groups.items()),
                      highlight=False)
        out.print("official: " + json.dumps(official["metrics"]), highlight=False, soft_wrap=True)
    if mismatches:
        raise typer.Exit(1)


@judge_app.command("agreement")
def agreement(
    corpus: str = typer.Option(..., "--corpus", help="Corpus with stored labels (evaluation_result)."),
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
    from environments.proact.agreement import GRADES, ProactJudgeAgreementSuite
    from harness.records import RunConfig

    models = {("judge" if i == 0 else f"judge_{i + 1}"): spec for i, spec in enumerate(judge_model)}
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
    from harness.records import RunConfig, RunFolder

    models = {"assistant": assistant_model, "planner": planner_model, "user": user_model}
    models |= {("judge" if i == 0 else f"judge_{i + 1}"): spec for i, spec in enumerate(judge_model)}
    live = RunConfig(suite="proact-live", models=models, base_url=base_url, limit=limit, seed=seed,
                     max_tokens=max_tokens, judge_max_tokens=judge_max_tokens, max_connections=max_connections)
    _, live_path = run_config(live, run_dir, suite=ProactLiveSuite(), progress=progress)
    generated = [r.output for r in RunFolder(run_dir, live_path.name).read_samples() if r.status == "ok"]
    rule_ok = [row for row in generated if not [p for p in check_row(row) if p.severity == "error"]]
    if not rule_ok:
        _fail(f"no generated dialogue passed the protocol rules (see {live_path}/samples.jsonl)", code=1)
    candidates = live_path / "candidates.jsonl"
    candidates.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rule_ok), encoding="utf-8")
    audit = RunConfig(suite="proact-audit", models={"judge": audit_model}, base_url=base_url, corpus=str(candidates),
                      seed=seed, max_connections=max_connections)
    _, audit_path = run_config(audit, run_dir, suite=ProactAuditSuite(), progress=progress)
    verdicts = {r.sample_id: r.output for r in RunFolder(run_dir, audit_path.name).read_samples()}
    accepted = [row for row in rule_ok if verdicts.get(row["unique_id_eval"], {}).get("accepted")]
    rejected = [verdicts[row["unique_id_eval"]] for row in rule_ok if row not in accepted and row["unique_id_eval"] in verdicts]
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in accepted), encoding="utf-8")
    rejected_file = out_file.with_suffix(".rejected.jsonl")
    rejected_file.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in rejected), encoding="utf-8")
    out.print(f"generated {len(generated)}, passed the rules {len(rule_ok)}, passed the audit {len(accepted)} "
              f"-> {out_file} (rejections with reasons: {rejected_file})", highlight=False)
