"""The HTML report: one self-contained file (inline CSS and SVG charts, no scripts, no links to
fetch), so it opens offline and can be mailed or archived as is.

Every text that came from a record (model names, run ids, metric names) is HTML-escaped.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from leaderboards.aggregate import Leaderboard
from leaderboards.cells import fmt_cost, fmt_metric, fmt_rank, fmt_tokens, group_title
from leaderboards.plots import adapter_throughput, load_bench, metric_bars, row_label, style_heatmap

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.tied td.rank { color: #a15c00; font-weight: bold; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; }
figcaption, .note { color: #555; font-size: .9rem; }
code { background: #f3f3f3; padding: 0 .2rem; }
"""


def _leaderboard_tables(board: Leaderboard) -> list[str]:
    parts = []
    head = ["rank", "model", "judge", "suite version", "n", escape(board.metric) + " [95% CI]", "runs",
            "tokens (prompt+completion)", "cost", "date"]
    for key, rows in board.groups():
        parts.append(f"<h3>{escape(group_title(board, key))}</h3>")
        parts.append('<table class="leaderboard"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
                     + "</tr></thead><tbody>")
        for r in rows:
            n = r.metrics[board.metric].n if board.metric in r.metrics else "-"
            cells = [f'<td class="rank">{escape(fmt_rank(r))}</td>', f"<td>{escape(r.label)}</td>",
                     f"<td>{escape(r.judge or '-')}</td>", f"<td>{escape(r.suite_version)}</td>",
                     f'<td class="num">{n}</td>', f'<td class="num">{escape(fmt_metric(r, board.metric))}</td>',
                     f"<td>{'<br>'.join(escape(i) for i in r.run_ids)}</td>", f"<td>{escape(fmt_tokens(r))}</td>",
                     f"<td>{escape(fmt_cost(r))}</td>", f"<td>{escape(r.date)}</td>"]
            parts.append(f'<tr class="{"tied" if r.tied else ""}">' + "".join(cells) + "</tr>")
        parts.append("</tbody></table>")
    return parts


def _all_metrics_table(board: Leaderboard) -> str:
    head = "".join(f"<th>{escape(row_label(r))}</th>" for r in board.rows)
    body = "".join(
        f"<tr><td><code>{escape(n)}</code></td>"
        + "".join(f'<td class="num">{escape(fmt_metric(r, n))}</td>' for r in board.rows) + "</tr>"
        for n in board.metric_names)
    return f'<table class="metrics"><thead><tr><th>metric</th>{head}</tr></thead><tbody>{body}</tbody></table>'


def _figure(svg: str, caption: str, name: str) -> str:
    return f'<figure class="chart" data-chart="{name}">{svg}<figcaption>{escape(caption)}</figcaption></figure>'


def html_report(board: Leaderboard, *, bench: list[Path]) -> str:
    docs = [load_bench(p) for p in bench]  # read first: a bad --bench path fails before any drawing
    parts = [
        f"<h1>Leaderboard: {escape(board.suite)}</h1>",
        f'<p class="note">Ranked by <code>{escape(board.metric)}</code> within groups of '
        f"{escape(' and '.join(board.group_by) or 'all rows')}. Brackets: 95% bootstrap CI over the suite's "
        "independent unit. A rank written <b>2=</b> shares its place: its interval overlaps another row's "
        f"in the group. Generated {escape(board.generated)} from {escape(', '.join(map(str, board.run_dirs)))}.</p>",
        "<h2>Leaderboard</h2>", *_leaderboard_tables(board),
        "<h2>Charts</h2>",
        _figure(metric_bars(board), "Bars: values; error bars: 95% CI.", "metric-bars"),
    ]
    heatmap = style_heatmap(board)
    if heatmap:
        parts.append(_figure(heatmap, "ProactBench headline score per conversation style (n: dialogues).",
                             "style-heatmap"))
    if docs:
        parts.append(_figure(adapter_throughput(docs), "Adapter serving: output tokens/s against the number of "
                             "adapters, per mode (base is the ceiling).", "adapter-throughput"))
    parts += ["<h2>All metrics</h2>", _all_metrics_table(board)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
            f"<title>Leaderboard: {escape(board.suite)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
