"""How a leaderboard row's values read as text: the same cells in the Markdown table (`export.py`)
and the HTML report (`report.py`). The report is one of `export.render`'s formats, so the cells
both use live here, below both (no import cycle).
"""

from __future__ import annotations

from harness.providers.embedded import judge_note
from leaderboards.aggregate import Leaderboard, Row, comparability


def fmt_value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def fmt_metric(row: Row, name: str) -> str:
    m = row.metrics.get(name)
    if m is None or m.value is None:
        return "n/a"
    if m.ci_low is None or m.ci_high is None:
        return fmt_value(m.value)
    return f"{m.value:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}]"


def fmt_judge(row: Row) -> str:
    """The row's judge, marked when it is the embedded model (its numbers are not a measurement)."""
    note = judge_note(row.judge)
    return f"{row.judge} ({note})" if note else row.judge or "-"


def fmt_rank(row: Row) -> str:
    """`2=` marks a rank shared with a row whose interval overlaps (a statistical tie)."""
    if row.rank is None:
        return "-"
    return f"{row.rank}=" if row.tied else str(row.rank)


def fmt_tokens(row: Row) -> str:
    parts = [f"{role} {u.prompt_tokens}+{u.completion_tokens}" for role, u in row.usage.items()]
    return ", ".join(parts) or "-"


def fmt_cost(row: Row) -> str:
    total = row.total_cost
    if total is not None:
        return f"${total:.4f}"
    known = {role: c for role, c in row.cost.items() if c is not None}
    return ", ".join(f"{role} ${c:.4f}" for role, c in known.items()) + " (others unpriced)" if known else "unpriced"


def group_title(board: Leaderboard, key: tuple[str, ...]) -> str:
    return ", ".join(f"{name} {value or '-'}" for name, value in zip(board.group_by, key)) or "all runs"


REFERENCE_HEAD = ("model", "source", "judge", "n", "figures from / comparability")
REFERENCE_NOTE = ("The runs' rows (95% CI in brackets) among the published ones, best first by the ranking metric. "
                  "Published figures carry no CI where the publication gives counts only. A run judged by another "
                  "model than the published rows is not directly comparable with them.")


def reference_cells(board: Leaderboard) -> list[tuple[str, ...]]:
    """Every run's row and every published row in one list, best first by the board's metric:
    (model, source, judge, n, where the figures come from or why not comparable, value)."""
    lower = board.spec().lower_is_better
    entries: list[tuple[float | None, tuple[str, ...]]] = []
    for row in board.rows:
        m = row.metrics.get(board.metric)
        entries.append((m.value if m else None,
                        (row.label, "run " + ", ".join(row.run_ids), row.judge or "-", str(m.n if m else "-"),
                         comparability(board, row), fmt_metric(row, board.metric))))
    for ref in board.reference:
        m = ref.metrics.get(board.metric)
        entries.append((m.value if m else None,
                        (ref.model, "published", ref.judge, str(m.n if m else "-"), ref.source,
                         fmt_value(m.value if m else None))))
    # Best first; a row without the metric last. list.sort is stable: on equal values runs come first.
    entries.sort(key=lambda e: (e[0] is None, 0.0 if e[0] is None else (e[0] if lower else -e[0])))
    return [cells for _, cells in entries]
