"""The one claims table across families, from saved verdicts (`RUN_DIR/claims/*.json`): Markdown,
CSV and the HTML report's claims section. Each row: the claim, the paper's sentence, the verdict
with the estimate and interval that decided it, the seeds, the criterion's hash and the date it was
registered, how many departures from the paper stand beside it, and the wall time. The HTML adds
each claim's conditions and its departures table.

`complete` makes the table whole: a row for every registered claim (`registry.families`), a
"not run" row -- with the size its registered plan needs and the command that runs it -- for a
claim with no saved verdict under its current criterion (a verdict of an older criterion is named
there, not shown as the claim's)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape

from harness.claims.decide import ConditionResult
from harness.claims.model import Claim
from harness.claims.verdict import ClaimVerdict

COLUMNS = (
    "claim",
    "paper's sentence",
    "verdict",
    "deciding condition: estimate [CI]",
    "n",
    "criterion hash (registered)",
    "departures",
    "wall s",
)
VERDICT_CLASS = {"reproduced": "good", "not reproduced": "bad", "inconclusive": "unsure", "not run": "none"}


@dataclass(frozen=True)
class Registered:
    """A registered claim as the complete table needs it: the claim, the date its criterion entered
    git, and the command that runs its check."""

    claim: Claim
    registered: str | None
    command: str


@dataclass(frozen=True)
class NotRun:
    """A registered claim with no saved verdict under its current criterion."""

    claim: Claim
    registered: str | None
    command: str
    why: str

    @property
    def label(self) -> str:
        return self.claim.id

    @property
    def family(self) -> str:
        return self.claim.family

    @property
    def verdict(self) -> str:
        return "not run"

    def needs(self) -> str:
        return f"{self.claim.plan.looks[-1]:,} {self.claim.plan.unit}"


Row = ClaimVerdict | NotRun


def registered_claims(family: str | None = None) -> list[Registered]:
    """Every family's registered claims (entry points `harness.claims`), with the command that runs each."""
    from harness.claims.registry import families

    found = []
    for fam in families().values():
        if family is not None and fam.name != family:
            continue
        for c in fam.claims:
            how = (
                fam.check_command.replace("CN", c.id.split(".", 1)[1])
                if fam.check_command
                else f"harness claims check {c.id} --run-dir DIR"
            )
            found.append(Registered(c, fam.registered(c), how))
    return found


def complete(verdicts: Iterable[ClaimVerdict], registered: Sequence[Registered]) -> list[Row]:
    """One row per saved verdict of a claim's current criterion, and a "not run" row for every
    registered claim that has none (naming a saved verdict of an older criterion where there is
    one); verdicts of claims no family registers are kept as they are. Sorted by claim."""
    saved = list(verdicts)
    rows: list[Row] = [v for v in saved if v.claim not in {r.claim.id for r in registered}]
    for r in registered:
        mine = [v for v in saved if v.claim == r.claim.id]
        current = [v for v in mine if v.criterion_hash == r.claim.criterion_hash()]
        if current:
            rows.extend(current)
            continue
        why = (
            "no saved verdict"
            if not mine
            else "the saved verdict is of another criterion: "
            + "; ".join(f"{v.criterion_hash} ({v.verdict})" for v in mine)
        )
        rows.append(NotRun(r.claim, r.registered, r.command, why))
    return sorted(rows, key=lambda row: row.label)


def num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def condition_text(c: ConditionResult) -> str:
    ci = "" if c.ci_low is None or c.ci_high is None else f" [{c.ci_low:.4g}, {c.ci_high:.4g}]"
    return f"{c.condition}: {num(c.estimate)}{ci} (n={c.n}) -> {c.outcome}"


def verdict_text(v: ClaimVerdict) -> str:
    if v.verdict == "inconclusive":
        more = f"; about {v.seeds_to_decide} {v.unit} would decide it" if v.seeds_to_decide else ""
        return f"inconclusive{more}"
    return v.verdict


def row_cells(v: Row) -> list[str]:
    if isinstance(v, NotRun):
        c = v.claim
        return [
            c.id,
            c.sentence,
            f"not run ({v.why}): needs {v.needs()}, command `{v.command}`",
            "",
            "0",
            f"{c.criterion_hash()} ({v.registered or 'not committed'})",
            str(len(c.departures)),
            "",
        ]
    # Recomputed from records there is no check wall time: the cells' summed seconds stand in; a
    # verdict that records neither (a replay of released numbers) has none to show.
    wall = v.wall_s if v.wall_s is not None else v.cells_s or None
    return [
        v.label,
        v.sentence,
        verdict_text(v),
        v.estimate_text(),
        f"{v.seeds} {v.unit}",
        f"{v.criterion_hash} ({v.registered or 'not committed'})",
        str(len(v.departures)),
        "n/a" if wall is None else f"{wall:.0f}",
    ]


def to_markdown(verdicts: Sequence[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row_cells(v)) + " |" for v in verdicts]
    return "\n".join(lines) + "\n"


def to_csv(verdicts: Sequence[Row]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*COLUMNS, "verdict_code", "criterion", "cells_s"])
    for v in verdicts:
        if isinstance(v, NotRun):
            writer.writerow([*row_cells(v), v.verdict, v.claim.criterion_text(), ""])
        else:
            writer.writerow([*row_cells(v), v.verdict, v.criterion, v.cells_s])
    return buf.getvalue()


def summary_line(verdicts: Sequence[Row]) -> str:
    counts = {k: sum(v.verdict == k for v in verdicts) for k in VERDICT_CLASS}
    line = (
        f"{len(verdicts)} claims: {counts['reproduced']} reproduced, {counts['not reproduced']} not reproduced, "
        f"{counts['inconclusive']} inconclusive"
    )
    return line + (f", {counts['not run']} not run" if counts["not run"] else "")


def _details(v: ClaimVerdict) -> str:
    conds = "".join(f"<li>{escape(condition_text(c))}</li>" for c in v.conditions)
    looks = "; ".join(f"{lk.seeds} seeds at {lk.level:.2%}: {lk.verdict}" for lk in v.looks)
    rows = "".join(
        f"<tr><td>{escape(d.paper)}</td><td>{escape(d.ours)}</td><td>{escape(d.why)}</td>"
        f"<td>{escape(d.effect)}</td></tr>"
        for d in v.departures
    )
    deps = (
        '<table class="departures"><thead><tr><th>the paper does</th><th>we do</th><th>why</th>'
        f"<th>what it can do to the verdict</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else "<p>No departure listed.</p>"
    )
    return (
        f"<details><summary>criterion, looks and departures of <code>{escape(v.label)}</code></summary>"
        f"<p>Criterion (hash <code>{escape(v.criterion_hash)}</code>): {escape(v.criterion)}</p><ul>{conds}</ul>"
        f"<p>Looks: {escape(looks)}</p><p>Setting (ours): {escape(v.setting)}</p>{deps}</details>"
    )


def to_html(verdicts: Sequence[Row]) -> str:
    body = []
    for v in verdicts:
        cells = row_cells(v)
        tds = [
            f"<td><code>{escape(cells[0])}</code></td>",
            f"<td>{escape(cells[1])}</td>",
            f'<td><span class="{VERDICT_CLASS[v.verdict]}">{escape(cells[2])}</span></td>',
            f"<td>{escape(cells[3])}</td>",
            *(f'<td class="num">{escape(c)}</td>' for c in cells[4:]),
        ]
        body.append(f'<tr data-verdict="{escape(v.verdict)}">' + "".join(tds) + "</tr>")
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    note = (
        '<p class="note">The paper\'s sentence beside our verdict; the criterion was registered before the run '
        "(its hash and the date it entered git); intervals are Student-t over seeds (Wilson / Newcombe for "
        "rates); every departure from the paper is listed under each claim. From <code>RUN_DIR/claims/</code>; "
        "CSV: <code>harness claims table --format csv</code>.</p>"
    )
    details = "".join(_details(v) for v in verdicts if isinstance(v, ClaimVerdict))
    return (
        note + f'<table class="claims"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>' + details
    )
