"""The HTML report: one self-contained file (inline CSS and SVG charts, no scripts, no links to
fetch), so it opens offline and can be mailed or archived as is.

Every text that came from a record (model names, run ids, metric names) is HTML-escaped.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from harness.presenter import ReportSection
from leaderboards.aggregate import Leaderboard
from leaderboards.cells import (REFERENCE_HEAD, REFERENCE_NOTE, fmt_cost, fmt_judge, fmt_metric, fmt_rank, fmt_tokens, group_title,
                               reference_cells)
from leaderboards.plots import adapter_throughput, breakdown_heatmaps, load_bench, metric_bars, row_label

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.tied td.rank { color: #a15c00; font-weight: bold; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; }  /* charts are drawn to fit 72rem (plots.PAGE_WIDTH) */
table.metrics { display: block; max-width: 100%; overflow-x: auto; }  /* a column per row: 20 rows scroll, not widen the page */
figcaption, .note { color: #555; font-size: .9rem; }
code { background: #f3f3f3; padding: 0 .2rem; }
.overview { display: grid; grid-template-columns: repeat(auto-fill, minmax(16rem, 1fr)); gap: .75rem; }
.overview a { display: block; border: 1px solid #ccc; border-radius: 4px; padding: .5rem .75rem; color: inherit;
  text-decoration: none; } .overview a:hover { background: #f7f7f7; } .overview b { display: block; }
section.family { border-top: 2px solid #ddd; margin-top: 2rem; }
.bad { color: #b00020; font-weight: bold; } .good { color: #176f2c; font-weight: bold; } .unsure { color: #a15c00; }
figure.picture { display: inline-block; margin: .25rem .5rem .75rem 0; vertical-align: top; }
figure.picture img { max-width: 100%; border: 1px solid #ccc; display: block; }
.pictures { display: flex; flex-wrap: wrap; gap: 1rem; align-items: flex-start; }
.pictures > .item { max-width: 34rem; } .pictures > .wide { flex-basis: 100%; }
.side { display: flex; flex-wrap: wrap; gap: 1rem; align-items: flex-start; }
table.claims { font-size: .85rem; width: 100%; table-layout: fixed; } table.claims td:nth-child(3) { font-size: .78rem; }
table.claims td, table.claims th { overflow-wrap: anywhere; }  /* ten columns must fit the page: wrap anywhere */
table.claims th:nth-child(1) { width: 8%; } table.claims th:nth-child(2) { width: 10%; }
table.claims th:nth-child(3) { width: 21%; } table.claims th:nth-child(8) { width: 12%; }
table.claims th:nth-child(9) { width: 4%; } table.claims th:nth-child(10) { width: 5%; }
table.compact { font-size: .82rem; margin: .25rem 0; } table.compact td, table.compact th { padding: .1rem .35rem; }
"""
# The classes above are the ones a suite's report hook may use (leaderboards/README.md lists them).


def leaderboard_tables(board: Leaderboard, level: int = 3) -> list[str]:
    parts = []
    head = ["rank", "model", "judge", "suite version", "n", escape(board.metric) + " [95% CI]", "runs",
            "tokens (prompt+completion)", "cost", "date"]
    for key, rows in board.groups():
        parts.append(f"<h{level}>{escape(group_title(board, key))}</h{level}>")
        parts.append('<table class="leaderboard"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
                     + "</tr></thead><tbody>")
        for r in rows:
            n = r.metrics[board.metric].n if board.metric in r.metrics else "-"
            cells = [f'<td class="rank">{escape(fmt_rank(r))}</td>', f"<td>{escape(r.label)}</td>",
                     f"<td>{escape(fmt_judge(r))}</td>", f"<td>{escape(r.suite_version)}</td>",
                     f'<td class="num">{n}</td>', f'<td class="num">{escape(fmt_metric(r, board.metric))}</td>',
                     f"<td>{'<br>'.join(escape(i) for i in r.run_ids)}</td>", f"<td>{escape(fmt_tokens(r))}</td>",
                     f"<td>{escape(fmt_cost(r))}</td>", f"<td>{escape(r.date)}</td>"]
            parts.append(f'<tr class="{"tied" if r.tied else ""}">' + "".join(cells) + "</tr>")
        parts.append("</tbody></table>")
    return parts


def reference_table(board: Leaderboard) -> list[str]:
    """The runs among the published reference rows (`--with-published`); nothing without them."""
    if not board.reference:
        return []
    head = "".join(f"<th>{escape(h)}</th>" for h in (*REFERENCE_HEAD, board.metric))
    body = "".join(f'<tr class="{"published" if c[1] == "published" else "run"}">'
                   + "".join(f"<td>{escape(v)}</td>" for v in c) + "</tr>" for c in reference_cells(board))
    return ["<h2>Beside the published rows</h2>", f'<p class="note">{escape(REFERENCE_NOTE)}</p>',
            f'<table class="reference"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>']


def all_metrics_table(board: Leaderboard) -> str:
    head = "".join(f"<th>{escape(row_label(r))}</th>" for r in board.rows)
    body = "".join(
        f"<tr><td><code>{escape(n)}</code></td>"
        + "".join(f'<td class="num">{escape(fmt_metric(r, n))}</td>' for r in board.rows) + "</tr>"
        for n in board.metric_names)
    return f'<table class="metrics"><thead><tr><th>metric</th>{head}</tr></thead><tbody>{body}</tbody></table>'


def figure(svg: str, caption: str, name: str) -> str:
    return f'<figure class="chart" data-chart="{name}">{svg}<figcaption>{escape(caption)}</figcaption></figure>'


def hook_html(section: ReportSection, level: int = 2) -> str:
    """A suite's own section (its hook's markup, checked in `sections.hook_section`)."""
    return f'<section class="hook"><h{level}>{escape(section.title)}</h{level}>\n{section.html}</section>'


def notes_html(notes: list[str]) -> str:
    return "".join(f'<p class="note bad">{escape(n)}</p>' for n in notes)


def page(title: str, parts: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def html_report(board: Leaderboard, *, bench: list[Path], section: ReportSection | None = None,
                notes: list[str] | None = None) -> str:
    docs = [load_bench(p) for p in bench]  # read first: a bad --bench path fails before any drawing
    parts = [
        f"<h1>Leaderboard: {escape(board.suite)}</h1>",
        f'<p class="note">Ranked by <code>{escape(board.metric)}</code> within groups of '
        f"{escape(' and '.join(board.group_by) or 'all rows')}. Brackets: 95% bootstrap CI over the suite's "
        "independent unit. A rank written <b>2=</b> shares its place: its interval overlaps another row's "
        f"in the group. Generated {escape(board.generated)} from {escape(', '.join(map(str, board.run_dirs)))}.</p>",
        "<h2>Leaderboard</h2>", *leaderboard_tables(board), *reference_table(board),
        "<h2>Charts</h2>",
        figure(metric_bars(board), "Bars: values; error bars: 95% CI.", "metric-bars"),
    ]
    for key, caption, heatmap in breakdown_heatmaps(board):
        parts.append(figure(heatmap, f"{board.suite}: headline score per {caption}.", f"{key}-heatmap"))
    if docs:
        parts.append(figure(adapter_throughput(docs), "Adapter serving: output tokens/s against the number of "
                            "adapters, per mode (base is the ceiling).", "adapter-throughput"))
    parts += ["<h2>All metrics</h2>", all_metrics_table(board)]
    if notes:
        parts.append(notes_html(notes))
    if section is not None:
        parts.append(hook_html(section))
    return page(f"Leaderboard: {board.suite}", parts)
