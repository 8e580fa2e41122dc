"""The one claims table across families, from saved verdicts (`RUN_DIR/claims/*.json`): Markdown,
CSV and the HTML report's claims section. Each row: the claim, the paper's sentence, the verdict
with the estimate and interval that decided it, the seeds, the criterion's hash and the date it was
registered, how many departures from the paper stand beside it, and the wall time. The HTML adds
each claim's conditions and its departures table."""

from __future__ import annotations

import csv
import io
from html import escape

from harness.claims.verdict import ClaimVerdict
from harness.claims.decide import ConditionResult

COLUMNS = ("claim", "paper's sentence", "verdict", "deciding condition: estimate [CI]", "n",
           "criterion hash (registered)", "departures", "wall s")
VERDICT_CLASS = {"reproduced": "good", "not reproduced": "bad", "inconclusive": "unsure"}


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


def row_cells(v: ClaimVerdict) -> list[str]:
    wall = v.wall_s if v.wall_s is not None else v.cells_s
    return [v.label, v.sentence, verdict_text(v), v.estimate_text(), f"{v.seeds} {v.unit}",
            f"{v.criterion_hash} ({v.registered or 'not committed'})", str(len(v.departures)), f"{wall:.0f}"]


def to_markdown(verdicts: list[ClaimVerdict]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row_cells(v)) + " |" for v in verdicts]
    return "\n".join(lines) + "\n"


def to_csv(verdicts: list[ClaimVerdict]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*COLUMNS, "verdict_code", "criterion", "cells_s"])
    for v in verdicts:
        writer.writerow([*row_cells(v), v.verdict, v.criterion, v.cells_s])
    return buf.getvalue()


def summary_line(verdicts: list[ClaimVerdict]) -> str:
    counts = {k: sum(v.verdict == k for v in verdicts) for k in VERDICT_CLASS}
    return (f"{len(verdicts)} claims: {counts['reproduced']} reproduced, {counts['not reproduced']} not reproduced, "
            f"{counts['inconclusive']} inconclusive")


def _details(v: ClaimVerdict) -> str:
    conds = "".join(f"<li>{escape(condition_text(c))}</li>" for c in v.conditions)
    looks = "; ".join(f"{lk.seeds} seeds at {lk.level:.2%}: {lk.verdict}" for lk in v.looks)
    rows = "".join(f"<tr><td>{escape(d.paper)}</td><td>{escape(d.ours)}</td><td>{escape(d.why)}</td>"
                   f"<td>{escape(d.effect)}</td></tr>" for d in v.departures)
    deps = ("<table class=\"departures\"><thead><tr><th>the paper does</th><th>we do</th><th>why</th>"
            f"<th>what it can do to the verdict</th></tr></thead><tbody>{rows}</tbody></table>" if rows
            else "<p>No departure listed.</p>")
    return (f"<details><summary>criterion, looks and departures of <code>{escape(v.label)}</code></summary>"
            f"<p>Criterion (hash <code>{escape(v.criterion_hash)}</code>): {escape(v.criterion)}</p><ul>{conds}</ul>"
            f"<p>Looks: {escape(looks)}</p><p>Setting (ours): {escape(v.setting)}</p>{deps}</details>")


def to_html(verdicts: list[ClaimVerdict]) -> str:
    body = []
    for v in verdicts:
        cells = row_cells(v)
        tds = [f"<td><code>{escape(cells[0])}</code></td>", f"<td>{escape(cells[1])}</td>",
               f'<td><span class="{VERDICT_CLASS[v.verdict]}">{escape(cells[2])}</span></td>',
               f"<td>{escape(cells[3])}</td>", *(f'<td class="num">{escape(c)}</td>' for c in cells[4:])]
        body.append(f'<tr data-verdict="{escape(v.verdict)}">' + "".join(tds) + "</tr>")
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    note = ('<p class="note">The paper\'s sentence beside our verdict; the criterion was registered before the run '
            "(its hash and the date it entered git); intervals are Student-t over seeds (Wilson / Newcombe for "
            "rates); every departure from the paper is listed under each claim. From <code>RUN_DIR/claims/</code>; "
            "CSV: <code>harness claims table --format csv</code>.</p>")
    details = "".join(_details(v) for v in verdicts)
    return note + f'<table class="claims"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>' + details
