"""Reader for ProactBench results files as released (`{model}_proactivity_bench_results.jsonl`),
and for any other file of labelled dialogues (a corpus copy with curation labels, our own rows).

The released files do not all follow their own documented layout: some rows carry the row's
position as an integer `unique_id_eval`, the model name changes between rows of one file, a
trigger whose reply came back empty is missing from the row altogether, and so on (see
docs/proactbench_release.md). None of that stops a file from being re-aggregated, so each such
irregularity is recorded as a `Deviation` (counted and summarised in a few lines) and the row
is kept: no file is refused and no row is dropped for a deviation. Only a line that cannot be a
results row at all (not JSON, not an object, a trigger without a valid type or turn) is one
HarnessError line naming `file:line` and the field.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
from pydantic import JsonValue

from corpora.proact_types import (
    GRADES,
    RELEASE_LABELS,
    RESULT_AGENTS,
    RESULT_FIELDS,
    AgentUsage,
    ResultRow,
    Verdict,
)
from corpora.validation import json_lines, read_text
from harness.errors import HarnessError, invalid

_FIX = "pass a {model}_proactivity_bench_results.jsonl file, or a corpus file whose triggers carry evaluation_result"

# What each kind of deviation means and what the reader does about it (one summary line each).
DEVIATIONS: dict[str, str] = {
    "id_int": "unique_id_eval is an integer (the row's position), not the composite key; "
              "the key is rebuilt from blueprint_id, style_combination_index and uuid",
    "id_missing": "unique_id_eval is missing; the key is rebuilt from blueprint_id, style_combination_index and uuid",
    "id_repeated": "a dialogue key repeats an earlier row's; both rows are kept and counted",
    "model_varies": "evaluated_model differs between rows of one file (counted: rows unlike the most common value)",
    "field_missing": "a field of the results layout is missing",
    "field_extra": "a field outside the results layout is present (kept, not used)",
    "num_trigger_points": "num_trigger_points differs from the number of triggers listed",
    "stats_missing": "no usable trigger_stats; the labels are counted",
    "stats_mismatch": "trigger_stats differs from the counts of the row's own labels; the labels are counted",
    "verdict_missing": "a trigger has no evaluation_result; counted SKIPPED, as the reference pipeline does",
    "verdict_invalid": "a trigger's evaluation_result has no usable status/score; counted SKIPPED",
    "triggers_dropped": "token_usage.assistant.calls exceeds the triggers listed: the reference pipeline leaves out "
                        "a trigger whose reply came back empty (in no denominator)",
    "usage_missing": "token_usage lacks an agent of the results layout; its tokens count as 0",
    "usage_invalid": "token_usage holds a value that is not prompt/completion/calls counts; counted as 0",
    "turn_missing": "a trigger's turn has no turn record (its reply is not in the file)",
}


@dataclass
class Deviation:
    kind: str  # a key of DEVIATIONS
    line: int
    detail: str = ""  # what exactly (a field name, a value); grouped in the summary
    count: int = 1  # how many occurrences this one stands for (e.g. triggers dropped)


@dataclass
class ResultsFile:
    """A results file read as released: typed rows (normalised only where a deviation says so),
    one unique key per row, the line of each row, and every deviation met."""

    path: Path
    rows: list[ResultRow] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    deviations: list[Deviation] = field(default_factory=list)

    def deviation_counts(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for d in self.deviations:
            counts[d.kind] += d.count
        return {k: counts[k] for k in DEVIATIONS if counts[k]}

    def dropped_triggers(self) -> int:
        return sum(d.count for d in self.deviations if d.kind == "triggers_dropped")

    def summary(self) -> list[str]:
        """One line per kind of deviation: how many, where first, and the details grouped."""
        out = []
        for kind, n in self.deviation_counts().items():
            devs = [d for d in self.deviations if d.kind == kind]
            lines = sorted({d.line for d in devs})
            where = f"{len(lines)} row(s), first at line {lines[0]}" if lines[0] else "file-wide"
            details = Counter(d.detail for d in devs if d.detail)
            grouped = ", ".join(f"{k} ({v})" if v > 1 else k for k, v in details.most_common(6))
            more = f", +{len(details) - 6} more" if len(details) > 6 else ""
            out.append(f"{kind} x{n} [{where}]: {DEVIATIONS[kind]}" + (f" -- {grouped}{more}" if grouped else ""))
        return out


def _verdict(raw: Any, line: int, where: str, devs: list[Deviation]) -> Verdict | None:
    """The trigger's verdict if it can be read; otherwise None (SKIPPED) and a deviation."""
    if raw is None:
        devs.append(Deviation("verdict_missing", line, where))
        return None
    try:
        verdict = Verdict.model_validate(raw)
    except pydantic.ValidationError:
        status = raw.get("status") if isinstance(raw, dict) else type(raw).__name__
        devs.append(Deviation("verdict_invalid", line, f"status {status!r}"))
        return None
    if verdict.status == "EVALUATED" and verdict.score not in GRADES:
        devs.append(Deviation("verdict_invalid", line, "EVALUATED without a score"))
        return None
    return verdict


def _usage(raw: Any, line: int, devs: list[Deviation]) -> dict[str, AgentUsage]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        devs.append(Deviation("usage_invalid", line, "token_usage"))
        return {}
    usage = {}
    for agent, value in raw.items():
        try:
            usage[agent] = AgentUsage.model_validate(value)
        except pydantic.ValidationError:
            devs.append(Deviation("usage_invalid", line, f"token_usage.{agent}"))
    for agent in RESULT_AGENTS:
        if agent not in usage:
            devs.append(Deviation("usage_missing", line, agent))
    return usage


def _labels(row: ResultRow) -> dict[str, dict[str, int]]:
    """Counts per type of the row's own labels, types in the order the row lists them."""
    counts: dict[str, dict[str, int]] = {}
    for tp in row.trigger_points:
        label = tp.evaluation_result.label if tp.evaluation_result is not None else "SKIPPED"
        stats = counts.setdefault(tp.evaluation_rubric.type, dict.fromkeys(RELEASE_LABELS, 0))
        stats[label] = stats.get(label, 0) + 1
    return counts


def _stats_agree(stored: dict[str, dict[str, JsonValue]], counted: dict[str, dict[str, int]]) -> bool:
    for kind in set(stored) | set(counted):
        mine, theirs = counted.get(kind, {}), stored.get(kind, {})
        if any(mine.get(lab, 0) != theirs.get(lab, 0) for lab in set(mine) | set(theirs)):
            return False
    return True


def normalise_row(raw: Any, line: int, where: str) -> tuple[ResultRow, list[Deviation]]:
    """One row as released -> the typed row (a deviation noted for each irregularity). Raises
    HarnessError only for a row that cannot be a results row. `where` is `file:line`."""
    if not isinstance(raw, dict):
        raise HarnessError(f"{where}: a results row is a JSON object, this line holds a {type(raw).__name__}; fix the line")
    devs: list[Deviation] = []
    row = dict(raw)
    devs += [Deviation("field_missing", line, f) for f in RESULT_FIELDS if f not in row]
    devs += [Deviation("field_extra", line, f) for f in row if f not in RESULT_FIELDS]
    triggers = row.get("trigger_points")
    if not isinstance(triggers, list):
        raise HarnessError(f"{where}: field `trigger_points` is {'missing' if triggers is None else 'not a list'}; "
                           f"fix the row ({_FIX})")
    clean_triggers = []
    for i, tp in enumerate(triggers):
        if isinstance(tp, dict):
            tp = dict(tp, evaluation_result=_verdict(tp.get("evaluation_result"), line,
                                                     f"trigger_points[{i}]", devs))
        clean_triggers.append(tp)
    row["trigger_points"] = clean_triggers
    row["token_usage"] = _usage(row.get("token_usage"), line, devs)
    try:
        typed = ResultRow.model_validate(row)
    except pydantic.ValidationError as exc:
        raise HarnessError(invalid(exc, where, "fix the row")) from exc

    counted = _labels(typed)
    stored = raw.get("trigger_stats")
    if not (isinstance(stored, dict) and all(isinstance(v, dict) for v in stored.values())):
        devs.append(Deviation("stats_missing", line))
    elif not _stats_agree(stored, counted):
        devs.append(Deviation("stats_mismatch", line, ", ".join(
            f"{k} stored {stored.get(k, {})} labels {counted.get(k, {})}" for k in sorted(set(stored) | set(counted), key=str)
            if not _stats_agree({k: stored.get(k, {})}, {k: counted.get(k, {})}))))
    n = typed.num_trigger_points
    if n is not None and n != len(typed.trigger_points):
        devs.append(Deviation("num_trigger_points", line, f"{n} vs {len(typed.trigger_points)} listed"))
    calls = typed.token_usage.get("assistant")
    if calls is not None and calls.calls > len(typed.trigger_points):
        devs.append(Deviation("triggers_dropped", line, count=calls.calls - len(typed.trigger_points)))
    turns = {t.turn for t in typed.turn_records}
    devs += [Deviation("turn_missing", line, f"turn {tp.turn}") for tp in typed.trigger_points if tp.turn not in turns]

    uid = typed.unique_id_eval
    if isinstance(uid, int) or uid is None or uid == "":
        devs.append(Deviation("id_int" if isinstance(uid, int) else "id_missing", line,
                              f"unique_id_eval {uid!r}" if uid is not None else ""))
        typed.unique_id_eval = typed.composite_id() or f"line-{line}"
    return typed, devs


def load_results(path: Path) -> ResultsFile:
    """Every row of a results file, in file order, with the deviations met."""
    if not path.exists():
        raise HarnessError(f"results file {path} not found: {_FIX}")
    text = read_text(path, "results file", _FIX)
    out = ResultsFile(path=path)
    seen: dict[str, int] = {}
    for lineno, where, raw in json_lines(text, str(path)):
        row, devs = normalise_row(raw, lineno, where)
        key = str(row.unique_id_eval)
        if key in seen:
            devs.append(Deviation("id_repeated", lineno, f"{key} (first at line {seen[key]})"))
            key = f"{key}#{lineno}"
        seen.setdefault(str(row.unique_id_eval), lineno)
        out.rows.append(row)
        out.keys.append(key)
        out.lines.append(lineno)
        out.deviations += devs
    if not out.rows:
        raise HarnessError(f"results file {path} has no rows: {_FIX}")
    models = Counter(r.evaluated_model for r in out.rows if r.evaluated_model is not None)
    if len(models) > 1:
        common = models.most_common(1)[0][0]
        out.deviations += [Deviation("model_varies", ln, f"{r.evaluated_model!r} (most rows: {common!r})")
                           for r, ln in zip(out.rows, out.lines) if r.evaluated_model not in (None, common)]
    return out
