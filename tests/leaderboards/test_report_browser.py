"""The HTML report in a real Chromium: charts render, nothing errors, nothing reaches the network."""

from __future__ import annotations

import pytest

from tests.conftest import harness_cli
from tests.leaderboards.runs import launch_chromium, torch_env

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (dev extra)")


def _export_html(runs, out, *extra: str) -> None:
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--format", "html", "--run-dir", str(runs.main),
                       "--run-dir", str(runs.other), "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr


def render(html_file, screenshot) -> dict:
    """Open the report offline (every request other than the file itself is refused and counted),
    screenshot it, and return what the page showed."""
    problems: list[str] = []
    requests: list[str] = []
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

        def route(r):
            if r.request.url == html_file.as_uri():
                return r.continue_()
            requests.append(r.request.url)
            return r.abort()

        page.route("**/*", route)
        page.goto(html_file.as_uri())
        charts = page.eval_on_selector_all(
            "figure.chart", "els => els.map(f => { const s = f.querySelector('svg').getBoundingClientRect();"
            " return {name: f.dataset.chart, w: s.width, h: s.height,"
            " paths: f.querySelectorAll('svg path').length}; })")
        rows = page.eval_on_selector_all("table.leaderboard tbody tr", "els => els.map(e => e.innerText)")
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    return {"problems": problems, "requests": requests, "charts": charts, "rows": rows}


def test_report_renders_its_charts_offline(loopback_runs, tmp_path):
    out = tmp_path / "report.html"
    _export_html(loopback_runs, out)
    shown = render(out, tmp_path / "report.png")
    assert shown["problems"] == [] and shown["requests"] == []
    assert [c["name"] for c in shown["charts"]] == ["metric-bars", "style-heatmap"]
    for chart in shown["charts"]:
        assert chart["w"] > 300 and chart["h"] > 150 and chart["paths"] > 20, chart  # drawn, not an empty box
    assert len(shown["rows"]) == 5 and any(r.startswith("1=\topenai/a") for r in shown["rows"])
    assert (tmp_path / "report.png").stat().st_size > 20_000


@pytest.mark.slow
def test_report_with_a_real_adapter_benchmark(loopback_runs, tmp_path):
    """A tiny real `harness bench adapters` run (base, preft and all-token on 1 and 2 adapters)
    gives the throughput-vs-adapters chart."""
    bench = tmp_path / "bench"
    proc = harness_cli("bench", "adapters", "--adapters", "1,2", "--requests", "2", "--prompt-len", "8",
                       "--gen-len", "2", "--rank", "2", "--threads", "1", "--out", str(bench), env=torch_env())
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "report.html"
    _export_html(loopback_runs, out, "--bench", str(bench))
    shown = render(out, tmp_path / "report-bench.png")
    assert shown["problems"] == [] and shown["requests"] == []
    assert [c["name"] for c in shown["charts"]] == ["metric-bars", "style-heatmap", "adapter-throughput"]
    assert shown["charts"][2]["paths"] > 20
