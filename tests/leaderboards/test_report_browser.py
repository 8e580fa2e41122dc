"""The HTML report in a real Chromium: charts render, nothing errors, nothing reaches the network."""

from __future__ import annotations

import pytest

from tests.conftest import harness_cli
from tests.leaderboards.runs import launch_chromium, torch_env

pytestmark = pytest.mark.browser
# Playwright is in the dev extra that `make install` installs: missing, this module fails to import.
from playwright import sync_api as playwright_api  # noqa: E402


def _export_html(runs, out, *extra: str) -> None:
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--format", "html", "--run-dir", str(runs.main),
                       "--run-dir", str(runs.other), "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr


def render(html_file, screenshot) -> dict:
    return render_all([(html_file, screenshot)])[0]


def render_all(pages: list) -> list[dict]:
    """Open each (report, screenshot) offline in one Chromium and return what each page showed."""
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        shown = [_show(browser, html_file, screenshot) for html_file, screenshot in pages]
        browser.close()
    return shown


def _show(browser, html_file, screenshot) -> dict:
    """Every request other than the file itself is refused and counted; console errors are kept."""
    problems: list[str] = []
    requests: list[str] = []
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
    # Pictures as the browser decoded them (a broken data URL loads with naturalWidth 0), per section.
    pictures = page.eval_on_selector_all(
        "figure.picture img", "els => els.map(i => ({family: i.closest('section.family').dataset.family,"
        " w: i.naturalWidth, complete: i.complete}))")
    families = page.eval_on_selector_all("section.family", "els => els.map(e => e.dataset.family)")
    verdicts = page.eval_on_selector_all(
        "table.claims tbody tr", "els => els.map(e => [e.dataset.verdict,"
        " getComputedStyle(e.children[2].querySelector('span')).color, e.children[2].innerText])")
    page.screenshot(path=str(screenshot), full_page=True)
    page.close()
    return {"problems": problems, "requests": requests, "charts": charts, "rows": rows, "pictures": pictures,
            "families": families, "verdicts": verdicts}


def test_report_renders_its_charts_offline(loopback_runs, report_run_dir, tmp_path):
    """The one-suite report (charts, ranked rows) and the whole report (every suite's own section,
    pictures decoded, the claims table's verdicts) in one browser."""
    from typer.testing import CliRunner

    from leaderboards.commands import leaderboard_app

    out, whole = tmp_path / "report.html", tmp_path / "whole.html"
    _export_html(loopback_runs, out)
    result = CliRunner().invoke(leaderboard_app, ["export", "--format", "html", "--run-dir", str(loopback_runs.main),
                                                  "--run-dir", str(report_run_dir), "--out", str(whole)])
    assert result.exit_code == 0, result.output
    shown, full = render_all([(out, tmp_path / "report.png"), (whole, tmp_path / "whole.png")])
    assert shown["problems"] == [] and shown["requests"] == []
    assert [c["name"] for c in shown["charts"]] == ["metric-bars", "style-heatmap"]
    for chart in shown["charts"]:
        assert chart["w"] > 300 and chart["h"] > 150 and chart["paths"] > 20, chart  # drawn, not an empty box
    assert len(shown["rows"]) == 5 and any(r.startswith("1=\topenai/a") for r in shown["rows"])
    assert (tmp_path / "report.png").stat().st_size > 20_000

    assert full["problems"] == [] and full["requests"] == []
    assert full["families"] == ["adv0", "proact", "prograf", "claims", "serving"]
    assert "metric-bars-proact" in [c["name"] for c in full["charts"]]  # an agent suite's leaderboard chart
    # adv0: two filmstrips; prograf: two SVG renders and the DOT flowchart, drawn from its parsed scene
    assert sorted(p["family"] for p in full["pictures"]) == ["adv0", "adv0", "prograf", "prograf", "prograf"]
    assert all(p["complete"] and p["w"] > 0 for p in full["pictures"]), full["pictures"]
    # the verdicts in words, a miss in red
    assert [v[0] for v in full["verdicts"]] == ["inconclusive", "not reproduced", "reproduced"]
    assert full["verdicts"][1][1] == "rgb(176, 0, 32)" and full["verdicts"][1][2].startswith("not reproduced")
    assert (tmp_path / "whole.png").stat().st_size > 50_000


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
