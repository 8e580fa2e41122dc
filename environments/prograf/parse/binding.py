"""Labels bound to what they label as one assignment, with near-ties reported.

Every reader that must decide which drawn thing a free-standing text labels (a point's letter and
a figure's vertices, an arrow's label and the edges, a value written beside a part and the parts)
builds a cost matrix -- one row per text, one column per candidate, the cost a distance, None where
the candidate is out of reach -- and calls `bind`. The texts are bound together, one to one, at the
least total cost (scipy's linear_sum_assignment), not each to its own nearest: a text between two
candidates goes where the other texts leave room.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

TIE = 0.25  # a second-best assignment within this share of a text's own distance is a near-tie


@dataclass
class Binding:
    pairs: dict[int, int] = field(default_factory=dict)  # text (row) -> candidate (column)
    # text -> the candidate that the best assignment without its own pair gives it, when that
    # assignment costs at most TIE x its distance more: the text could as well label that one
    runner_up: dict[int, int] = field(default_factory=dict)


def bind(cost: Sequence[Sequence[float | None]], tie: float = TIE) -> Binding:
    """The least-cost one-to-one assignment of texts (rows) to candidates (columns); a text with no
    candidate in reach, or left without one, is unbound. For each bound text whose second-best
    assignment -- the best with its own pair forbidden -- costs less than `tie` times its distance
    more, `runner_up` names the candidate that assignment gives it (ambiguous)."""
    finite = [c for row in cost for c in row if c is not None]
    if not finite:
        return Binding()
    far = 1e6 * (max(finite) + 1)  # out of reach: only ever chosen when nothing else is left
    matrix = [[far if c is None else float(c) for c in row] for row in cost]
    pairs = _assign(matrix)
    used = {j for _, j in pairs}
    total = sum(matrix[a][b] for a, b in pairs)
    out = Binding()
    for i, j in pairs:
        if matrix[i][j] >= far:
            continue
        out.pairs[i] = j
        # the best assignment with this pair forbidden: close in total cost = ambiguous. When the
        # text's cheapest other candidate is free, moving it alone there stands for that
        # assignment (exact unless a swap among other texts is cheaper still, only closer then)
        row = matrix[i]
        k = min((c for c in range(len(row)) if c != j), key=row.__getitem__, default=None)
        if k is None or row[k] >= far:
            continue
        if k in used:
            alt = [r[:] for r in matrix]
            alt[i][j] = far
            alt_pairs = _assign(alt)
            delta = sum(alt[a][b] for a, b in alt_pairs) - total
            k = dict(alt_pairs).get(i, k)
        else:
            delta = row[k] - row[j]
        if row[k] < far and delta < tie * row[j]:
            out.runner_up[i] = k
    return out


def _assign(cost: list[list[float]]) -> list[tuple[int, int]]:
    """The least-cost one-to-one assignment of rows to columns. When every row's cheapest column is
    its own that is the optimum already (the usual case: labels sit by what they label), and scipy
    is neither imported nor called."""
    firsts = [min(range(len(row)), key=row.__getitem__) for row in cost]
    if len(set(firsts)) == len(firsts):
        return list(enumerate(firsts))
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost)
    return [(int(i), int(j)) for i, j in zip(rows, cols)]
