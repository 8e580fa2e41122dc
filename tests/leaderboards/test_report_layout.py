"""The report's charts as Chromium draws them, from 1 run and from 20: no two texts of a chart
overlap, no text leaves its figure, no legend lies on a plotting area, and no chart is shrunk by the
page's CSS (its text would shrink with it).

The charts are inline SVG with text drawn as glyph outlines (`svg.fonttype: path`), one
`<g id="text_N">` per text, so what is measured here is each text's box as the browser laid it out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.run_folder import RunFolder
from tests.leaderboards.runs import launch_chromium, write_run

pytestmark = pytest.mark.browser
# Playwright is in the dev extra that `make install` installs: missing, this module fails to import.
from playwright import sync_api as playwright_api  # noqa: E402

# A model name as long as real ones get (provider prefix, dated release): the row labels must fit it.
LONG_MODEL = "litellm/anthropic/claude-3-5-haiku-20241022"
SLACK_PX = 0.5  # anti-aliasing: boxes that touch are not overlapping

# Per chart: its rendered box, the size its SVG asks for, every text's box (with the text, from
# matplotlib's comments in the group), the legends' and the plotting areas' boxes.
MEASURE = """figs => figs.map(f => {
  const svg = f.querySelector('svg');
  const rect = e => { const r = e.getBoundingClientRect(); return {l: r.left, t: r.top, r: r.right, b: r.bottom}; };
  const said = g => [...g.childNodes].filter(n => n.nodeType === Node.COMMENT_NODE)  // one comment a line
                        .map(c => c.data.trim()).join("\\n") || g.id;
  const areas = [...svg.querySelectorAll('g[id^="axes_"]')].map(a => a.querySelector('g[id^="patch_"]'))
                  .filter(p => p).map(rect);
  return {name: f.dataset.chart, box: rect(svg), asked: svg.width.baseVal.value,
          texts: [...svg.querySelectorAll('g[id^="text_"]')].map(g => ({text: said(g), ...rect(g)}))
                   .filter(t => t.r - t.l > 0 && t.b - t.t > 0),
          legends: [...svg.querySelectorAll('g[id^="legend_"]')].map(rect), areas};
})"""


def _overlap(a: dict, b: dict) -> bool:
    return min(a["r"], b["r"]) - max(a["l"], b["l"]) > SLACK_PX and min(a["b"], b["b"]) - max(a["t"], b["t"]) > SLACK_PX


def _inside(inner: dict, outer: dict) -> bool:
    return (inner["l"] >= outer["l"] - SLACK_PX and inner["t"] >= outer["t"] - SLACK_PX
            and inner["r"] <= outer["r"] + SLACK_PX and inner["b"] <= outer["b"] + SLACK_PX)


def layout_problems(chart: dict) -> list[str]:
    """What is wrong with one measured chart, in words (empty: nothing)."""
    name, texts = chart["name"], chart["texts"]
    problems = [f"{name}: {t['text']!r} leaves the figure" for t in texts if not _inside(t, chart["box"])]
    problems += [f"{name}: {a['text']!r} overlaps {b['text']!r}"
                 for i, a in enumerate(texts) for b in texts[i + 1:] if _overlap(a, b)]
    problems += [f"{name}: a legend lies on a plotting area" for leg in chart["legends"] for area in chart["areas"]
                 if _overlap(leg, area)]
    width = chart["box"]["r"] - chart["box"]["l"]
    if width < 0.98 * chart["asked"]:
        problems.append(f"{name}: drawn {width:.0f}px wide of its {chart['asked']:.0f}px: the page shrank it and its text")
    return problems


def _runs(loopback_runs, run_dir: Path, count: int) -> Path:
    """`count` runs, one model each: alternately all PASS and all FAIL verdicts (so the heatmap has
    light and dark cells), the last under a long model name."""
    passing = RunFolder(loopback_runs.main, loopback_runs.ids["a0"]).read_samples()
    failing = RunFolder(loopback_runs.main, loopback_runs.ids["c"]).read_samples()
    for i in range(count):
        model = LONG_MODEL if i == count - 1 else f"openai/model-{i:02d}"
        write_run(run_dir, f"layout-{i:02d}", passing if i % 2 == 0 else failing,
                  models={"assistant": model, "judge": "openai/gpt-4o"})
    return run_dir


def _bench(folder: Path) -> Path:
    """An adapters benchmark file as `harness bench adapters` writes it: three modes, 1 to 64 adapters."""
    rows = [{"adapters": k, "mode": mode, "output_tok_s": round(speed / (1 + 0.05 * k), 1)}
            for mode, speed in (("base", 900.0), ("preft", 850.0), ("all-token", 700.0)) for k in (1, 2, 4, 8, 16, 32, 64)]
    folder.mkdir()
    (folder / "adapters_bench.json").write_text(json.dumps({"rows": rows}), encoding="utf-8")
    return folder


def _report(run_dir: Path, bench: Path, out: Path) -> Path:
    from typer.testing import CliRunner

    from leaderboards.commands import leaderboard_app

    result = CliRunner().invoke(leaderboard_app, ["export", "--suite", "proact", "--format", "html", "--run-dir",
                                                  str(run_dir), "--bench", str(bench), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def measure(pages: list[tuple[Path, Path]]) -> list[list[dict]]:
    """Each report's charts as measured in one Chromium (1280px wide, as a laptop shows it), with a
    full-page screenshot of each."""
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        shown = []
        for html_file, screenshot in pages:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(html_file.as_uri())
            shown.append(page.eval_on_selector_all("figure.chart", MEASURE))
            page.screenshot(path=str(screenshot), full_page=True)
            page.close()
        browser.close()
    return shown


def test_charts_are_readable_from_one_run_and_from_twenty(loopback_runs, tmp_path):
    bench = _bench(tmp_path / "bench")
    pages = [(_report(_runs(loopback_runs, tmp_path / f"runs{n}", n), bench, tmp_path / f"report{n}.html"),
              tmp_path / f"report{n}.png") for n in (1, 20)]
    for (html_file, _), charts in zip(pages, measure(pages), strict=True):
        assert [c["name"] for c in charts] == ["metric-bars", "style-heatmap", "adapter-throughput"], html_file
        for chart in charts:
            said = {t["text"] for t in chart["texts"]}
            # what a reader needs is there (a chart drawn without its labels has nothing to overlap)
            assert {"metric-bars": {"emergent", "overall", "openai/gpt-4o"},
                    "style-heatmap": {"1", "3", "style", "openai/gpt-4o"},
                    "adapter-throughput": {"base", "all-token", "adapters"}}[chart["name"]] <= {
                        w for s in said for w in s.replace("/ ", " ").split()} | said, (chart["name"], said)
        problems = [p for chart in charts for p in layout_problems(chart)]
        assert problems == [], f"{html_file.name}:\n" + "\n".join(problems)


def test_the_checks_catch_what_they_look_for():
    """layout_problems on hand-made measurements: each defect is named, a clean chart passes."""
    box = {"l": 0, "t": 0, "r": 400, "b": 300}
    text = {"text": "a", "l": 10, "t": 10, "r": 50, "b": 20}
    clean = {"name": "c", "box": box, "asked": 400, "texts": [text, {**text, "text": "b", "l": 50, "r": 90}],
             "legends": [{"l": 320, "t": 10, "r": 390, "b": 60}], "areas": [{"l": 60, "t": 30, "r": 300, "b": 280}]}
    assert layout_problems(clean) == []
    assert layout_problems({**clean, "texts": [text, {**text, "text": "b", "l": 40, "r": 80}]}) == ["c: 'a' overlaps 'b'"]
    assert layout_problems({**clean, "texts": [{**text, "r": 410}]}) == ["c: 'a' leaves the figure"]
    assert layout_problems({**clean, "legends": [{"l": 250, "t": 40, "r": 320, "b": 90}]}) == [
        "c: a legend lies on a plotting area"]
    assert layout_problems({**clean, "asked": 600}) == ["c: drawn 400px wide of its 600px: the page shrank it and its text"]
