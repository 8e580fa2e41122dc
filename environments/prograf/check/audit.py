"""How far ProGraf's verifier can be trusted (issue 39 item 4): every output of the foreign-style corpus
(`generate/foreign.py`) verified against its task's hidden points, and three rates per category and format.

- false alarm: a correct output that does not pass (any critical point failed, a format error included);
- miss: a faulty output that passes (its fault slipped through every point);
- failed for another reason: a faulty output that fails, but not at its target point (a format error,
  the target gated by a failed parent, or only other points failing).

Each rate has Wilson's 95% interval (`harness.stats.wilson_metric`). The targets: false alarms and
misses at most 2% each; a cell meets a target on its point estimate (with n outputs a cell's interval
cannot fall under 2% unless n is in the hundreds, so the interval is shown, not judged). Structural
verification only (no render): the render can only hide what the structure shows, and the corpus's
faults are structural.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from environments.prograf.check.verify import verify
from environments.prograf.generate.foreign import FAULT_KINDS, Output, corpus, corpus_digest
from environments.prograf.task import Task, load_tasks
from harness.records import Metric
from harness.stats import wilson_metric

TARGET = 0.02
ORDER = [
    ("geometry", "svg"),
    ("circuit", "schemdraw-json"),
    ("circuit", "schemdraw-py"),
    ("flowchart", "dot"),
    ("flowchart", "mermaid"),
    ("flowchart", "svg"),
    ("diagram", "dot"),
    ("diagram", "mermaid"),
    ("diagram", "svg"),
]


@dataclass
class Outcome:
    output: Output
    result: str  # correct outputs: pass | false_alarm; faulty: caught | miss | other
    why: str  # on anything but pass / caught: what the verifier said


@dataclass
class Cell:
    category: str
    format: str
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, result: str) -> int:
        return sum(o.result == result for o in self.outcomes)

    @property
    def correct(self) -> int:
        return sum(o.output.fault is None for o in self.outcomes)

    @property
    def faulty(self) -> int:
        return sum(o.output.fault is not None for o in self.outcomes)

    def rate(self, result: str) -> Metric:
        return wilson_metric(self.count(result), self.correct if result == "false_alarm" else self.faulty)

    def meets(self, result: str) -> bool:
        m = self.rate(result)
        return m.value is not None and m.value <= TARGET


@dataclass
class Audit:
    cells: list[Cell]
    outputs: int
    digest: str
    seconds: float

    def total(self) -> Cell:
        return Cell("all", "all", [o for c in self.cells for o in c.outcomes])


def judge(task: Task, output: Output) -> Outcome:
    v = verify(task, output.format, output.code)
    failed = [p for p in v.points if not p.passed and not p.gated]
    said = v.error or "; ".join(f"{p.id}: {p.reason}" for p in failed)
    if output.fault is None:
        return Outcome(output, "pass" if v.passed else "false_alarm", "" if v.passed else said)
    target = next(p for p in v.points if p.id == output.target)
    if v.error:
        return Outcome(output, "other", f"format error: {v.error}")
    if v.passed:
        return Outcome(output, "miss", f"{output.target} passed: {target.reason}")
    if not target.passed and not target.gated:
        return Outcome(output, "caught", "")
    return Outcome(output, "other", f"{output.target} {'gated' if target.gated else 'passed'}; failed instead: {said}")


def run_audit(corpus_path: Path | None = None) -> Audit:
    from environments.prograf.generate.build import CORPUS

    tasks = load_tasks(corpus_path or CORPUS)
    by_id = {t.id: t for t in tasks}
    outputs = corpus(tasks)
    start = time.perf_counter()
    cells = {key: Cell(*key) for key in ORDER}
    for o in outputs:
        cells.setdefault((o.category, o.format), Cell(o.category, o.format)).outcomes.append(judge(by_id[o.task_id], o))
    return Audit(
        [c for c in cells.values() if c.outcomes], len(outputs), corpus_digest(outputs), time.perf_counter() - start
    )


def _fmt(m: Metric) -> str:
    if m.value is None:
        return "-"
    return f"{100 * m.value:.1f}% [{100 * (m.ci_low or 0):.1f}, {100 * (m.ci_high or 0):.1f}]"


def table_rows(audit: Audit) -> list[list[str]]:
    """Header and one row per category and format, then all: counts, the three rates, targets met."""
    rows = [
        ["category", "format", "correct", "false alarms", "faulty", "misses", "failed for another reason", "targets"]
    ]
    for c in audit.cells + [audit.total()]:
        met = (
            "ok"
            if c.meets("false_alarm") and c.meets("miss")
            else "FAIL: "
            + ", ".join(w for w, r in (("false alarms", "false_alarm"), ("misses", "miss")) if not c.meets(r))
        )
        rows.append(
            [
                c.category,
                c.format,
                str(c.correct),
                f"{c.count('false_alarm')} = {_fmt(c.rate('false_alarm'))}",
                str(c.faulty),
                f"{c.count('miss')} = {_fmt(c.rate('miss'))}",
                f"{c.count('other')} = {_fmt(c.rate('other'))}",
                met,
            ]
        )
    return rows


def markdown(audit: Audit) -> str:
    rows = table_rows(audit)
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def by_fault(audit: Audit) -> dict[str, tuple[int, int, int]]:
    """Fault kind -> (faulty outputs, misses, failed for another reason), over every cell."""
    out = {}
    everything = audit.total().outcomes
    for kind in FAULT_KINDS:
        mine = [o for o in everything if o.output.fault == kind]
        out[kind] = (len(mine), sum(o.result == "miss" for o in mine), sum(o.result == "other" for o in mine))
    return out


def findings(audit: Audit, limit: int = 3) -> list[str]:
    """What went wrong, grouped by cell: each false alarm, miss and other failure with what the verifier said."""
    lines = []
    for c in audit.cells:
        bad = [o for o in c.outcomes if o.result in ("false_alarm", "miss", "other")]
        for o in bad[:limit]:
            lines.append(f"{c.category}/{c.format} {o.result}: {o.output.key} ({o.output.what}): {o.why[:300]}")
        if len(bad) > limit:
            lines.append(f"{c.category}/{c.format}: ... and {len(bad) - limit} more")
    return lines


@functools.lru_cache(maxsize=1)
def cached_audit() -> Audit:
    """The audit of the committed corpus, once per process (a report build asks for it; ~1,400 outputs)."""
    return run_audit()


def audit_html(audit: Audit) -> str:
    """The audit table for the HTML report's ProGraf section (every text is ours or escaped)."""
    rows = table_rows(audit)
    head = "".join(f"<th>{escape(h)}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{escape(x)}</td>" for x in r) + "</tr>" for r in rows[1:])
    return (
        '<h4>How far the verifier can be trusted</h4><p class="note">The verifier audit (<code>harness prograf '
        f"verifier-audit</code>): {audit.outputs} outputs of the foreign-style corpus -- correct outputs written in "
        "other styles than the references', each with a one-fault variant (missing object, wrong relation, broken "
        "connection, extra element) -- verified against their tasks' points. False alarm: a correct output failed; "
        "miss: a faulty output passed; failed for another reason: a faulty output failed, but not at its fault's "
        f"point. Targets: false alarms and misses at most {TARGET:.0%}; 95% Wilson intervals.</p>"
        f"<table><tr>{head}</tr>{body}</table>"
    )
