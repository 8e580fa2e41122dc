"""The whole report in one offline HTML file: every suite the run dirs hold (its leaderboard and its
own hook's section: failure filmstrips, renders, the papers' claims table), the serving benchmarks
(`--bench`), and an overview of them all at the top.

`harness leaderboard export --format html` without `--suite` writes it. A suite that cannot be
ranked or loaded is a note in its section, never a failed report: the rest still reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from pathlib import Path

from harness.errors import HarnessError
from leaderboards.aggregate import DEFAULT_GROUP_BY, Leaderboard, build_leaderboard
from leaderboards.cells import fmt_metric
from leaderboards.plots import adapter_throughput, breakdown_heatmaps, load_bench, metric_bars
from harness.prices import Price
from leaderboards.report import all_metrics_table, figure, hook_html, leaderboard_tables, notes_html, page
from harness.claims.table import summary_line as claims_summary
from harness.claims.table import to_html as claims_html
from harness.claims.verdict import load_verdicts
from leaderboards.sections import Family, Found, families, find_suites, hook_section

BENCH_COLUMNS = ("adapters", "mode", "output_tok_s", "requests_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms")


def _anchor(name: str) -> str:
    return "s-" + "".join(c if c.isalnum() else "-" for c in name)


def _board_block(board: Leaderboard) -> str:
    parts = [f'<section class="suite" data-suite="{escape(board.suite)}"><h3>Suite <code>{escape(board.suite)}</code></h3>',
             f'<p class="note">Ranked by <code>{escape(board.metric)}</code>; brackets: 95% bootstrap CI; '
             "<b>2=</b>: a rank shared with an overlapping interval.</p>",
             *leaderboard_tables(board, level=4),
             figure(metric_bars(board), f"{board.suite}: bars are values, error bars 95% CI.", f"metric-bars-{board.suite}")]
    for key, caption, heatmap in breakdown_heatmaps(board):
        parts.append(figure(heatmap, f"Headline score per {caption}.", f"{key}-heatmap-{board.suite}"))
    parts.append(f"<details><summary>all metrics of {escape(board.suite)}</summary>{all_metrics_table(board)}</details>")
    return "\n".join(parts) + "</section>"


def _board_summary(board: Leaderboard) -> str:
    top = next((r for r in board.rows if r.rank is not None), None)
    if top is None:
        return f"{board.suite}: {len(board.rows)} rows, none scored"
    return f"{board.suite}: {len(board.rows)} rows; top {top.label}, {board.metric} {fmt_metric(top, board.metric)}"


@dataclass(frozen=True)
class BoardOptions:
    """How every suite's leaderboard in the report is built (`build_leaderboard`'s options)."""

    group_by: tuple[str, ...]
    include_incomplete: bool
    prices: dict[str, Price] | None


def _family_section(family: Family, found: dict[str, Found], run_dirs: list[Path],
                    options: BoardOptions) -> tuple[str, list[str]]:
    """The family's HTML and its overview lines."""
    blocks, summary, ranked = [], [], {}
    for suite in family.suites:
        if not found[suite].runs:
            continue
        try:
            board = build_leaderboard(run_dirs, suite, group_by=options.group_by,
                                      include_incomplete=options.include_incomplete, prices=options.prices)
        except HarnessError as exc:
            family.notes.append(f"{suite}: not ranked ({exc})")
            continue
        ranked[suite] = [run for row in board.rows for run in row.runs]
        blocks.append(_board_block(board))
        summary.append(_board_summary(board))
    section, notes = hook_section(family, ranked, {s: found[s].saved for s in family.suites}, run_dirs)
    family.notes.extend(notes)
    if section is not None:
        # Alone in its family (no leaderboard: the claims table), the section's title is the family's heading.
        blocks.append(hook_html(section, level=3) if ranked else section.html)
        if section.summary:
            summary.append(section.summary)
    if family.notes:
        summary.append(f"{len(family.notes)} note(s)")
    title = section.title if section is not None and not ranked else family.name
    html = (f'<section class="family" id="{_anchor(family.name)}" data-family="{escape(family.name)}">'
            f"<h2>{escape(title)}</h2>{notes_html(family.notes)}" + "\n".join(blocks) + "</section>")
    return html, [title, *summary]


def _bench_section(bench: list[Path]) -> tuple[str, list[str]]:
    docs = [load_bench(p) for p in bench]
    if not docs:
        return ('<section class="family" id="s-serving" data-family="serving"><h2>Serving benchmarks</h2><p class="note">None given: run '
                "<code>harness bench adapters --out DIR</code> and pass <code>--bench DIR</code>.</p></section>",
                ["Serving benchmarks", "none given (--bench)"])
    rows = []
    for doc in docs:
        for p in doc.points:
            rows.append("<tr>" + "".join(f'<td class="num">{escape(str(p.row.get(k, "-")))}</td>' for k in BENCH_COLUMNS)
                        + f"<td>{escape(doc.source)}</td></tr>")
    table = ('<table class="bench"><thead><tr>' + "".join(f"<th>{k}</th>" for k in BENCH_COLUMNS)
             + "<th>file</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    chart = figure(adapter_throughput(docs), "Adapter serving: output tokens/s against the number of adapters, per "
                   "mode (base is the ceiling).", "adapter-throughput")
    best = max((p for d in docs for p in d.points), key=lambda p: p.output_tok_s)
    return (f'<section class="family" id="s-serving" data-family="serving"><h2>Serving benchmarks</h2>{chart}{table}</section>',
            ["Serving benchmarks", f"{len(rows)} rows; fastest {best.mode} at {best.adapters} adapters: "
             f"{best.output_tok_s} tok/s"])


def _claims_section(run_dirs: list[Path]) -> tuple[str, list[str]] | None:
    """Every family's saved claim verdicts (`RUN_DIR/claims/`) in one table: the core's, so this
    package names no family."""
    verdicts = sorted(load_verdicts(run_dirs), key=lambda v: v.label)
    if not verdicts:
        return None
    title = "Claims: the papers' sentences beside our verdicts"
    html = (f'<section class="family" id="{_anchor("claims")}" data-family="claims"><h2>{escape(title)}</h2>'
            f"{claims_html(verdicts)}</section>")
    return html, [title, claims_summary(verdicts)]


def _overview(cards: list[tuple[str, list[str]]]) -> str:
    links = "".join(f'<a href="#{_anchor(anchor)}"><b>{escape(lines[0])}</b>'
                    + "".join(f"<span>{escape(line)}</span><br>" for line in lines[1:]) + "</a>"
                    for anchor, lines in cards)
    return f'<nav class="overview">{links}</nav>'


def combined_report(run_dirs: list[Path], *, bench: list[Path], group_by: tuple[str, ...] = DEFAULT_GROUP_BY,
                    include_incomplete: bool = False, prices: dict[str, Price] | None = None) -> str:
    bench_html, bench_card = _bench_section(bench)  # first: a bad --bench path fails before any reading
    found = find_suites(run_dirs)
    claims = _claims_section(run_dirs)
    if not found and claims is None:
        where = ", ".join(str(d) for d in run_dirs)
        raise HarnessError(f"nothing to report in {where}: no runs (`harness eval`) and no saved reports "
                           "(e.g. `harness papers check --all --run-dir RUN_DIR`); check --run-dir")
    options = BoardOptions(group_by, include_incomplete, prices)
    cards, bodies = [], []
    for family in families(list(found)):
        html, card = _family_section(family, found, run_dirs, options)
        bodies.append(html)
        cards.append((family.name, card))
    if claims is not None:
        bodies.append(claims[0])
        cards.append(("claims", claims[1]))
    bodies.append(bench_html)
    cards.append(("serving", bench_card))
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    head = ["<h1>Report: agent suites, serving benchmarks, claims</h1>",
            f'<p class="note">One offline file: every suite found in {escape(", ".join(map(str, run_dirs)))} '
            "(its leaderboard and its own section), the serving benchmarks, and the papers' claims table. "
            f"Brackets are 95% CIs. Generated {escape(generated)}.</p>", _overview(cards)]
    return page("Report", head + bodies)

