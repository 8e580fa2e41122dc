"""`harness view` in a real Chromium: list the runs, open a run, open a sample; a reply that
carries a script is shown as text and never runs."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from harness.run_folder import RunFolder
from tests.conftest import REPO
from tests.leaderboards.runs import launch_chromium, write_run

pytestmark = pytest.mark.browser
# Playwright is in the dev extra that `make install` installs: missing, this module fails to import.
from playwright import sync_api as playwright_api  # noqa: E402

XSS = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'


@pytest.fixture()
def viewer(loopback_runs, tmp_path):
    """The real command, on a free port, over both run dirs plus one run with a hostile reply."""
    record = RunFolder(loopback_runs.main, loopback_runs.ids["c"]).read_samples()[0]
    output = record.output
    output["turn_records"][0]["assistant_response"] = f"Sure. {XSS} Done."
    write_run(tmp_path / "xss", "proact-xss", [record.model_copy(update={"output": output})])
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "view", "--port", "0",
                             *(f"--run-dir={d}" for d in (loopback_runs.main, loopback_runs.other, tmp_path / "xss"))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        line = proc.stdout.readline()
        match = re.match(r"serving (http://127\.0\.0\.1:\d+)/", line)
        assert match, line
        yield match[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_viewer_lists_runs_and_opens_a_sample(viewer, loopback_runs, tmp_path):
    problems: list[str] = []
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.goto(viewer + "/")
        listed = page.eval_on_selector_all("tr.run td:first-child", "els => els.map(e => e.innerText)")
        assert set(listed) == set(loopback_runs.ids.values()) | {"proact-xss"}
        page.screenshot(path=str(tmp_path / "viewer-runs.png"), full_page=True)

        page.click(f"text={loopback_runs.ids['c']}")
        # click() returns once the click is sent, not when the next page is loaded; expect() retries
        # until the run's table is there (a bare count() saw 0 rows once, in a landing CI run).
        playwright_api.expect(page.locator("tr.sample")).to_have_count(3)
        page.screenshot(path=str(tmp_path / "viewer-run.png"), full_page=True)
        page.locator("tr.sample a").first.click()
        page.wait_for_selector(".transcript")
        assert page.locator(".msg.user").count() >= 3 and page.locator(".trigger").count() >= 3
        assert page.locator(".trigger .label.FAIL").first.inner_text() == "FAIL"
        assert "ignored the anchor" in page.locator(".rationale").first.inner_text()
        assert page.locator(".msg.assistant mark").first.inner_text() == "FAIL"  # evidence highlighted
        assert "pass" in page.locator("table.rubric").first.inner_text()
        page.screenshot(path=str(tmp_path / "viewer-sample.png"), full_page=True)

        page.goto(viewer + "/runs/proact-xss/samples/0")
        reply = page.locator(".msg.assistant").first.inner_text()
        assert XSS in reply  # the markup is visible as text
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.evaluate("document.querySelectorAll('script, .msg img').length") == 0
        page.screenshot(path=str(tmp_path / "viewer-xss.png"), full_page=True)
        browser.close()
    assert problems == []
    for name in ("viewer-runs", "viewer-run", "viewer-sample", "viewer-xss"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
