"""How a leaderboard row's values read as text: the same cells in the Markdown table (`export.py`)
and the HTML report (`report.py`). The report is one of `export.render`'s formats, so the cells
both use live here, below both (no import cycle).
"""

from __future__ import annotations

from leaderboards.aggregate import Leaderboard, Row


def fmt_value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def fmt_metric(row: Row, name: str) -> str:
    m = row.metrics.get(name)
    if m is None or m.value is None:
        return "n/a"
    if m.ci_low is None or m.ci_high is None:
        return fmt_value(m.value)
    return f"{m.value:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}]"


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
