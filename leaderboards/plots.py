"""Charts for the HTML report, drawn by matplotlib and inlined as SVG (no files, no network).

Figures are built with `matplotlib.figure.Figure` directly, never pyplot: no global backend or
figure registry is touched, so the viewer's threads and a caller's own plots stay unaffected.

Every figure is sized from its content: its labels are measured (`text_width`, the same glyph
outlines the SVG draws) and the figure is made wide and tall enough for them, never wider than the
report's column (`PAGE_WIDTH`): a wider SVG is shrunk by the page, and its text with it. More rows
make a chart taller, not narrower; labels that would not fit are wrapped, and nothing is drawn
in a legend that a label on the axis can say.
"""

from __future__ import annotations

import io
import json
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from harness.errors import HarnessError
from harness.presenter import presenter_for
from leaderboards.aggregate import Leaderboard, Row

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The report's column is 72rem less its padding, 1120 CSS px = 11.67 in (96 px/in; the SVG is
# sized in pt, 72/in). A little under it, so a scrollbar or a narrower window does not shrink it.
PAGE_WIDTH = 11.0
TICK_PT = 10.0  # matplotlib's default tick and label size (rcParams 'font.size', 'medium')
TITLE_PT = 12.0  # a figure title ('large')
CELL_PT = 7.0  # the numbers written in a heatmap's cells
LEGEND_PT = 8.33  # matplotlib's 'small'
LINE = 1.35 / 72  # one line of text, in inches per point of font size (matplotlib's line spacing)
ROW_LABEL_MAX = 3.6  # a row label wider than this (inches) is wrapped at its " / " separators


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


def text_width(text: str, points: float = TICK_PT) -> float:
    """The width in inches of `text` (its widest line) in the default font at `points`: measured on
    the glyph outlines the SVG is drawn with (`svg.fonttype: path`), so the browser shows exactly this."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    measure = TextToPath()
    font = FontProperties(size=points)
    return max((measure.get_text_width_height_descent(line, font, ismath=False)[0] for line in text.split("\n")),
               default=0.0) / 72


def wrap_label(text: str, width: float = ROW_LABEL_MAX, points: float = TICK_PT) -> str:
    """`text` in lines no wider than `width` inches: broken at its " / " separators first (a row
    label is model / judge / version), a part still too wide at its characters."""
    if text_width(text, points) <= width:
        return text
    lines: list[str] = []
    for part in text.split(" / "):
        if lines and text_width(f"{lines[-1]} / {part}", points) <= width:
            lines[-1] = f"{lines[-1]} / {part}"
            continue
        chars = max(8, int(len(part) * width / max(text_width(part, points), 1e-6)))
        lines.extend(textwrap.wrap(part, chars, break_on_hyphens=False) or [part])
    return "\n".join(lines)


def row_label(row: Row) -> str:
    return f"{row.label} / {row.judge or '-'} / v{row.suite_version}"


def _lines(text: str) -> int:
    return text.count("\n") + 1


def _yerr(metrics: list[Any]) -> list[list[float]]:
    lows, highs = [], []
    for m in metrics:
        ok = m is not None and m.value is not None and m.ci_low is not None and m.ci_high is not None
        lows.append(max(m.value - m.ci_low, 0.0) if ok else 0.0)
        highs.append(max(m.ci_high - m.value, 0.0) if ok else 0.0)
    return [lows, highs]


def _row_heights(labels: list[str], minimum: float) -> float:
    """The height of a band of rows, each as tall as its (wrapped) label needs, at least `minimum`."""
    return sum(max(minimum, _lines(label) * TICK_PT * LINE + 0.12) for label in labels)


def metric_bars(board: Leaderboard) -> str:
    """Horizontal bars with 95% CI error bars, one bar a leaderboard row, labelled on the axis (no
    legend to match colours against): a panel per member of the ranked metric's family when the
    suite's presenter names one (ProactBench: per trigger type), otherwise the ranked metric alone.
    Rows make it taller; panels that do not fit the page's width wrap onto a next line of panels."""
    found = presenter_for(board.suite).metric_family(board.metric, set(board.metric_names))
    typed = list(found.members) if found else []
    family = [n for _, n in typed] or [board.metric]
    names = [t for t, _ in typed] or [""]
    rows = board.rows
    labels = [wrap_label(row_label(r)) for r in rows] or ["-"]
    label_w = max(text_width(label) for label in labels) + 0.25
    # Panels share the width the labels leave, each 1.5 to 2.4 in wide: narrower, a 0..1 axis and its
    # title crowd; if fewer than the family fit, the rest go on a next line of panels.
    room = PAGE_WIDTH - label_w - 0.3
    panel_w = min(2.4, max(1.5, room / len(family)))
    columns = max(1, min(len(family), int(room // panel_w)))
    lines_of_panels = math.ceil(len(family) / columns)
    title = (f"{board.suite}: {board.metric} with 95% CI" if len(family) == 1
             else f"{board.suite}: per {found.label if found else 'metric'}, 95% CI")
    band = max(_row_heights(labels, 0.3), 0.6)
    panel_titles = 0.3 if typed else 0.0
    width = min(PAGE_WIDTH, max(label_w + 0.3 + columns * panel_w, text_width(title, TITLE_PT) + 0.4))
    fig = _figure(width, 0.95 + lines_of_panels * (band + panel_titles + 0.35))
    axes = fig.subplots(lines_of_panels, columns, sharex=True, sharey=True, squeeze=False).flatten()
    values = [m.value for r in rows for m in r.metrics.values() if m.value is not None]
    unit = bool(values) and min(values) >= 0 and max(values) <= 1
    for ax, metric, name in zip(axes, family, names, strict=False):
        metrics = [row.metrics.get(metric) for row in rows]
        bars = [m.value if m is not None and m.value is not None else math.nan for m in metrics]
        ax.barh(range(len(rows)), bars, height=0.6, xerr=_yerr(metrics), capsize=3, color="C0",
                error_kw={"elinewidth": 1})
        if name:
            ax.set_title(name, fontsize=TICK_PT)
        if unit:
            ax.set_xlim(0, 1.05)
            ax.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])
        else:
            ax.xaxis.get_major_locator().set_params(nbins=4)
        ax.grid(True, axis="x", alpha=0.3)
    for ax in axes[len(family):]:
        ax.remove()  # the last line of panels may be short
    first = axes[0]
    first.set_yticks(range(len(labels)), labels)
    first.invert_yaxis()  # rank order, the first row on top (shared: every panel follows)
    fig.supxlabel(found.axis if found and typed else board.metric, fontsize=TICK_PT)
    fig.suptitle(title, fontsize=TITLE_PT)
    return to_svg(fig)


def breakdown_heatmap(board: Leaderboard, key: str) -> str | None:
    """The headline score per group of one breakdown (`key`, e.g. ProactBench's conversation
    `style`) as a rows x groups heatmap; None when no row has that breakdown. The groups are the
    columns, named once by the axis label; the colour scale lies under the grid, as wide as it."""
    rows = [r for r in board.rows if r.breakdowns.get(key)]
    if not rows:
        return None
    groups = sorted({s for r in rows for s in r.breakdowns[key]}, key=lambda s: (len(s), s))
    data = [[math.nan if (cell := r.breakdowns[key].get(s)) is None or cell.value is None else cell.value
             for s in groups] for r in rows]
    cells = [["-" if (m := r.breakdowns[key].get(s)) is None or m.value is None else f"{m.value:.2f}\nn={m.n}"
              for s in groups] for r in rows]
    labels = [wrap_label(row_label(r)) for r in rows]
    label_w = max(text_width(label) for label in labels) + 0.25
    cell_w = max(text_width(c, CELL_PT) for line in cells for c in line) + 0.2
    tick_w = max(text_width(g) for g in groups) + 0.15
    # Group names side by side when the columns can hold them and the page is wide enough; else upright.
    upright = label_w + 0.4 + len(groups) * max(cell_w, tick_w, 0.6) > PAGE_WIDTH
    column = max(cell_w, 0.45 if upright else max(tick_w, 0.6))
    title = f"{board.suite}: headline score per {key}"
    grid_h = _row_heights(labels, max(0.42, 2 * CELL_PT * LINE + 0.1))
    ticks_h = (max(text_width(g) for g in groups) if upright else TICK_PT * LINE) + 0.1
    width = min(PAGE_WIDTH, max(label_w + 0.4 + len(groups) * column, text_width(title, TITLE_PT) + 0.4, 3.5))
    fig = _figure(width, grid_h + ticks_h + 1.55)
    ax, bar = fig.subplots(2, 1, height_ratios=[grid_h, 0.14])
    image = ax.imshow(data, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(groups)), groups, rotation=90 if upright else 0)
    ax.set_xlabel(key)
    ax.set_yticks(range(len(rows)), labels)
    for y, line in enumerate(cells):
        for x, text in enumerate(line):
            # Black on viridis' light end and on an empty (unpainted, white) cell; white on its dark end.
            light = math.isnan(data[y][x]) or data[y][x] > 0.6
            ax.text(x, y, text, ha="center", va="center", fontsize=CELL_PT, color="black" if light else "white")
    colorbar = fig.colorbar(image, cax=bar, orientation="horizontal", label="headline score")
    colorbar.set_ticks([0, 0.5, 1], labels=["0", "0.5", "1"])
    fig.suptitle(title, fontsize=TITLE_PT)
    return to_svg(fig)


def breakdown_heatmaps(board: Leaderboard) -> list[tuple[str, str, str]]:
    """(breakdown key, caption, svg) of every heatmap the suite's presenter asks for."""
    out = []
    for key, caption in presenter_for(board.suite).heatmaps:
        svg = breakdown_heatmap(board, key)
        if svg:
            out.append((key, caption, svg))
    return out


@dataclass(frozen=True)
class BenchPoint:
    """One row of an adapters benchmark: the fields plotted, and the row as written (the report's
    table shows its cells as they are)."""

    adapters: int
    mode: str
    output_tok_s: float
    row: dict[str, JsonValue]


@dataclass(frozen=True)
class BenchFile:
    """An adapters benchmark result (`harness bench adapters --out DIR` writes adapters_bench.json)."""

    source: str  # the file read
    points: list[BenchPoint]


def _point(row: JsonValue) -> BenchPoint | None:
    if not isinstance(row, dict):
        return None
    adapters, mode, rate = row.get("adapters"), row.get("mode"), row.get("output_tok_s")
    if isinstance(adapters, bool) or not isinstance(adapters, int) or not isinstance(mode, str):
        return None
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        return None
    return BenchPoint(adapters, mode, rate, row)


def load_bench(path: Path) -> BenchFile:
    """The adapters benchmark result at `path` (the file, or the folder that holds it)."""
    file = path / "adapters_bench.json" if path.is_dir() else path
    fix = "pass the adapters_bench.json that `harness bench adapters --out DIR` wrote"
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessError(f"--bench {path}: no such file; {fix}") from None
    except ValueError as exc:
        raise HarnessError(f"--bench {path}: not valid JSON ({exc}); {fix}") from None
    rows = doc.get("rows") if isinstance(doc, dict) else None
    points = [_point(r) for r in rows] if isinstance(rows, list) else []
    found = [p for p in points if p is not None]
    if not found or len(found) < len(points):
        raise HarnessError(f"--bench {path}: rows with adapters, mode and output_tok_s expected; {fix}")
    return BenchFile(str(file), found)


def adapter_throughput(docs: list[BenchFile]) -> str:
    """Output tokens/s against the number of adapters, one line per mode (and per file)."""
    series = [(doc, mode, f"{mode} ({Path(doc.source).parent.name})" if len(docs) > 1 else mode)
              for doc in docs for mode in dict.fromkeys(p.mode for p in doc.points)]
    # The legend goes beside the plot, never on its lines: the figure widens by the legend's width.
    legend_w = max(text_width(label, LEGEND_PT) for _, _, label in series) + 0.8
    fig = _figure(min(PAGE_WIDTH, 5.6 + legend_w), 4.2)
    ax = fig.add_subplot()
    for doc, mode, label in series:
        points = sorted((p.adapters, p.output_tok_s) for p in doc.points if p.mode == mode)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("adapters")
    ax.set_ylabel("output tokens / s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=LEGEND_PT, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.suptitle("adapter serving: throughput vs adapters", fontsize=TITLE_PT)
    return to_svg(fig)
