"""A leaderboard written as CSV, Markdown, JSON, a self-contained HTML report, or the EvalEval
"every eval ever" shared results schema (`eee.py`).

CSV follows what pandas and spreadsheets expect: one header row, one value per cell, each metric's
95% CI in `<metric>_ci_low`/`<metric>_ci_high` columns, ISO dates, run ids joined by `;`. With
reference rows (`--with-published`) three columns say which is which: `source` (run or published),
`comparability` (why a run's row is not directly comparable with the published ones) and
`figures_from` (the file a published row was read from).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from harness.errors import HarnessError
from harness.presenter import ReportSection
from leaderboards.aggregate import Leaderboard, to_frame
from leaderboards.cells import (REFERENCE_HEAD, REFERENCE_NOTE, fmt_cost, fmt_judge, fmt_metric, fmt_rank, fmt_tokens,
                               group_title, reference_cells)
from leaderboards.eee import to_eee
from leaderboards.report import html_report

FORMATS = ("csv", "md", "html", "json", "eee")


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(head: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in cells) + " |" for cells in body]
    return lines


def to_markdown(board: Leaderboard) -> str:
    lines = [f"# Leaderboard: {board.suite}", "",
             f"Ranked by `{board.metric}` (95% bootstrap CI in brackets); `=` marks a rank whose interval "
             f"overlaps another row's in its group. Generated {board.generated}.", ""]
    head = ["rank", "model", "judge", "suite version", "n", board.metric, "runs", "tokens (prompt+completion)",
            "cost", "date"]
    for key, rows in board.groups():
        lines += [f"## {group_title(board, key)}", ""]
        lines += _md_table(head, [[fmt_rank(r), r.label, fmt_judge(r), r.suite_version,
                                   str(r.metrics[board.metric].n if board.metric in r.metrics else "-"),
                                   fmt_metric(r, board.metric), ", ".join(r.run_ids), fmt_tokens(r), fmt_cost(r),
                                   r.date] for r in rows])
        lines.append("")
    if board.reference:
        lines += ["## Beside the published rows", "", REFERENCE_NOTE, ""]
        lines += _md_table(list(REFERENCE_HEAD) + [board.metric], [list(c) for c in reference_cells(board)])
        lines.append("")
    lines += ["## All metrics", ""]
    names = board.metric_names
    labels = [f"{r.label} / {r.judge or '-'} / {r.suite_version}" for r in board.rows]
    lines += _md_table(["metric", *labels], [[n, *(fmt_metric(r, n) for r in board.rows)] for n in names])
    return "\n".join(lines) + "\n"


def to_json(board: Leaderboard) -> str:
    rows = json.loads(to_frame(board).to_json(orient="records"))
    doc = {"suite": board.suite, "metric": board.metric, "group_by": list(board.group_by),
           "generated": board.generated, "run_dirs": [str(d) for d in board.run_dirs], "rows": rows}
    return json.dumps(doc, indent=2) + "\n"


def render(board: Leaderboard, fmt: str, *, bench: list[Path] | None = None, section: ReportSection | None = None,
           notes: list[str] | None = None) -> str:
    """`section`, `notes`: the suite's own report section (HTML only; `sections.suite_section`)."""
    if fmt not in FORMATS:
        raise HarnessError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    if bench and fmt != "html":
        raise HarnessError("--bench adds a plot to the HTML report: use it with --format html")
    if board.reference and fmt == "eee":
        # The schema holds one model's own evaluation per document: a publication's figures are not this run's.
        raise HarnessError("--with-published adds reference rows to csv, md, json and html, not to eee")
    if fmt == "csv":
        # pandas has no type information here (Any); to_csv without a path returns the text.
        return cast(str, to_frame(board).to_csv(index=False, float_format="%.6g"))
    if fmt == "md":
        return to_markdown(board)
    if fmt == "json":
        return to_json(board)
    if fmt == "eee":
        return to_eee(board)
    return html_report(board, bench=bench or [], section=section, notes=notes)


def write_output(text: str, out: Path | None) -> str | None:
    """Write to `out` (folders made as needed) and return None, or return the text for stdout."""
    if out is None:
        return text
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return None
