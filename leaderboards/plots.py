"""Charts for the HTML report, drawn by matplotlib and inlined as SVG (no files, no network).

Figures are built with `matplotlib.figure.Figure` directly, never pyplot: no global backend or
figure registry is touched, so the viewer's threads and a caller's own plots stay unaffected.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.presenter import presenter_for
from leaderboards.aggregate import Leaderboard, Row

if TYPE_CHECKING:
    from matplotlib.figure import Figure



def _figure(width: float, height: float) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - matplotlib is a dependency; this names the fix if it went missing
        raise HarnessError("the HTML report needs matplotlib: pip install 'matplotlib>=3.8'") from None
    return Figure(figsize=(width, height), layout="constrained")


def to_svg(fig: Figure) -> str:
    """The figure as an inline <svg> element: no XML prolog, fixed ids, no timestamp, so two
    reports of the same data are byte-identical."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "harness", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def row_label(row: Row) -> str:
    return f"{row.label} / {row.judge or '-'} / v{row.suite_version}"


def _yerr(metrics: list[Any]) -> list[list[float]]:
    lows, highs = [], []
    for m in metrics:
        ok = m is not None and m.value is not None and m.ci_low is not None and m.ci_high is not None
        lows.append(max(m.value - m.ci_low, 0.0) if ok else 0.0)
        highs.append(max(m.ci_high - m.value, 0.0) if ok else 0.0)
    return [lows, highs]


def metric_bars(board: Leaderboard) -> str:
    """Bars with 95% CI error bars: the ranked metric's family side by side when the suite's
    presenter names one (ProactBench: per trigger type), otherwise the ranked metric per row."""
    found = presenter_for(board.suite).metric_family(board.metric, set(board.metric_names))
    typed = list(found.members) if found else []
    family = [n for _, n in typed] or [board.metric]
    labels = [t for t, _ in typed] or [board.metric]
    rows = board.rows
    fig = _figure(max(6.0, 1.2 + 0.45 * len(family) * len(rows)), 4.2)
    ax = fig.add_subplot()
    width = 0.8 / max(len(rows), 1)
    for i, row in enumerate(rows):
        metrics = [row.metrics.get(n) for n in family]
        values = [m.value if m is not None and m.value is not None else math.nan for m in metrics]
        xs = [j + (i - (len(rows) - 1) / 2) * width for j in range(len(family))]
        ax.bar(xs, values, width=width * 0.95, yerr=_yerr(metrics), capsize=3, label=row_label(row))
    ax.set_xticks(range(len(family)), labels)
    ax.set_ylabel(found.axis if found and typed else board.metric)
    values = [m.value for r in rows for m in r.metrics.values() if m.value is not None]
    if values and min(values) >= 0 and max(values) <= 1:
        ax.set_ylim(0, 1.05)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(f"{board.suite}: {board.metric} with 95% CI" if len(family) == 1
                 else f"{board.suite}: per {found.label if found else 'metric'}, 95% CI")
    if len(rows) > 1 or len(family) > 1:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return to_svg(fig)


def breakdown_heatmap(board: Leaderboard, key: str) -> str | None:
    """The headline score per group of one breakdown (`key`, e.g. ProactBench's conversation
    `style`) as a rows x groups heatmap; None when no row has that breakdown."""
    rows = [r for r in board.rows if r.breakdowns.get(key)]
    if not rows:
        return None
    groups = sorted({s for r in rows for s in r.breakdowns[key]}, key=lambda s: (len(s), s))
    grid = [[(cell.value if (cell := r.breakdowns[key].get(s)) is not None else None)
             for s in groups] for r in rows]
    data = [[math.nan if v is None else v for v in line] for line in grid]
    fig = _figure(max(5.0, 2.5 + 0.7 * len(groups)), 1.6 + 0.45 * len(rows))
    ax = fig.add_subplot()
    image = ax.imshow(data, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(groups)), [f"{key} {s}" for s in groups])
    ax.set_yticks(range(len(rows)), [row_label(r) for r in rows])
    for y, row in enumerate(rows):
        for x, group in enumerate(groups):
            m = row.breakdowns[key].get(group)
            text = "-" if m is None or m.value is None else f"{m.value:.2f}\nn={m.n}"
            dark = m is not None and m.value is not None and m.value > 0.6
            ax.text(x, y, text, ha="center", va="center", fontsize=7, color="black" if dark else "white")
    fig.colorbar(image, ax=ax, label="headline score")
    ax.set_title(f"{board.suite}: headline score per {key}")
    return to_svg(fig)


def breakdown_heatmaps(board: Leaderboard) -> list[tuple[str, str, str]]:
    """(breakdown key, caption, svg) of every heatmap the suite's presenter asks for."""
    out = []
    for key, caption in presenter_for(board.suite).heatmaps:
        svg = breakdown_heatmap(board, key)
        if svg:
            out.append((key, caption, svg))
    return out


def load_bench(path: Path) -> dict[str, Any]:
    """An adapters benchmark result (`harness bench adapters --out DIR` writes adapters_bench.json)."""
    file = path / "adapters_bench.json" if path.is_dir() else path
    fix = "pass the adapters_bench.json that `harness bench adapters --out DIR` wrote"
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessError(f"--bench {path}: no such file; {fix}") from None
    except ValueError as exc:
        raise HarnessError(f"--bench {path}: not valid JSON ({exc}); {fix}") from None
    rows = doc.get("rows") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not rows or not all(isinstance(r, dict) and {"adapters", "mode", "output_tok_s"} <= set(r) for r in rows):
        raise HarnessError(f"--bench {path}: rows with adapters, mode and output_tok_s expected; {fix}")
    doc["_source"] = str(file)
    return doc


def adapter_throughput(docs: list[dict[str, Any]]) -> str:
    """Output tokens/s against the number of adapters, one line per mode (and per file)."""
    fig = _figure(6.4, 4.2)
    ax = fig.add_subplot()
    for doc in docs:
        modes = list(dict.fromkeys(r["mode"] for r in doc["rows"]))
        suffix = f" ({Path(doc['_source']).parent.name})" if len(docs) > 1 else ""
        for mode in modes:
            points = sorted((r["adapters"], r["output_tok_s"]) for r in doc["rows"] if r["mode"] == mode)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{mode}{suffix}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("adapters")
    ax.set_ylabel("output tokens / s")
    ax.set_title("adapter serving: throughput vs adapters")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return to_svg(fig)
