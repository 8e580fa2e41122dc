"""`harness view`: the run viewer over real runs, a 10k-sample run, and hostile model output."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from html import escape

import pytest

from harness.records import ErrorRecord
from harness.run_folder import RunFolder
from leaderboards.viewer import PER_PAGE, make_server
from tests.conftest import REPO
from tests.leaderboards.runs import write_run

XSS = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'


@contextmanager
def serving(*run_dirs):
    server = make_server(list(run_dirs), 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def get(url: str) -> tuple[int, str, dict]:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def sample_rows(html: str) -> list[str]:
    return re.findall(r'<tr class="sample"><td>(\d+)</td>', html)


def test_lists_runs_of_every_run_dir_and_opens_a_sample(loopback_runs):
    runs = loopback_runs
    with serving(runs.main, runs.other) as url:
        status, html, headers = get(url + "/")
        assert status == 200 and "script-src" not in headers["Content-Security-Policy"]
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert set(re.findall(r'<tr class="run"><td><a href="/runs/([^"]+)"', html)) == set(runs.ids.values())
        status, html, _ = get(f"{url}/runs/{runs.ids['c']}")
        assert status == 200 and sample_rows(html) == ["1", "2", "3"]
        assert html.count('class="label FAIL"') >= 9 and "openai/c" in html and "page 1 of 1 (3 matching)" in html
        status, html, _ = get(f"{url}/runs/{runs.ids['c']}/samples/0")
        assert status == 200
        record = RunFolder(runs.main, runs.ids["c"]).read_samples()[0]
        assert record.sample_id in html
        tp = record.output["trigger_points"][0]  # the rubric; the verdict is the scorer's
        assert tp["evaluation_rubric"]["pass_criteria"][:60] in html  # the rubric
        assert '<span class="label FAIL">FAIL</span>' in html and "it ignored the anchor" in html  # label, rationale
        # The evidence is marked inside the graded reply.
        assert re.search(r'<div class="msg assistant">.*?<mark>FAIL</mark>', html, re.S)
        assert escape(record.output["turn_records"][0]["user_message"][:40]) in html
        status, raw, headers = get(f"{url}/runs/{runs.ids['c']}/samples/0.json")
        assert status == 200 and headers["Content-Type"].startswith("application/json") and record.sample_id in raw


def test_unknown_run_sample_and_paths_are_404_with_a_way_back(loopback_runs):
    with serving(loopback_runs.main) as url:
        status, html, _ = get(url + "/runs/no-such-run")
        assert status == 404 and "no-such-run" in html and 'href="/"' in html
        status, html, _ = get(f"{url}/runs/{loopback_runs.ids['c']}/samples/3")
        assert status == 404 and "has no sample 3 (it has 3)" in html
        for path in ("/runs/..%2F..%2Fetc/samples/0", "/runs/%2e%2e/samples/0", "/etc/passwd", "/runs/x/y/z/w"):
            status, html, _ = get(url + path)
            assert status == 404, path


def test_model_output_is_escaped_text(loopback_runs, tmp_path):
    record = RunFolder(loopback_runs.main, loopback_runs.ids["c"]).read_samples()[0]
    output, scores = record.output, record.scores
    output["turn_records"][0]["assistant_response"] = f"Sure. {XSS} Done."
    verdict = scores["verdicts"][0]["evaluation_result"]
    verdict["evidence"] = "<script>"
    verdict["rationale"] = '</p><script>window.pwned = 3</script>'
    error = ErrorRecord(kind="suite", message="<b>boom</b>")
    write_run(tmp_path, "proact-xss", [record.model_copy(update={"output": output, "scores": scores, "errors": [error]})])
    with serving(tmp_path) as url:
        status, html, _ = get(url + "/runs/proact-xss/samples/0")
    assert status == 200
    assert "<script" not in html and "<img" not in html and "<b>boom" not in html
    # Shown as the text it is, with the judge's evidence ("<script>") marked inside it.
    assert ("Sure. <mark>&lt;script&gt;</mark>window.pwned = 1&lt;/script&gt;&lt;img src=x "
            "onerror=&quot;window.pwned = 2&quot;&gt; Done.") in html
    assert "&lt;/p&gt;&lt;script&gt;window.pwned = 3" in html and "&lt;b&gt;boom&lt;/b&gt;" in html


@pytest.fixture(scope="module")
def big_run(tmp_path_factory, loopback_runs):
    """10,000 samples written with the harness's records writer (a real sample, renumbered);
    every 7th failed. No summary: a 10k-dialogue bootstrap is not what this test is about."""
    run_dir = tmp_path_factory.mktemp("big")
    template = RunFolder(loopback_runs.main, loopback_runs.ids["a0"]).read_samples()[0]
    timeout = ErrorRecord(kind="timeout", message="solve timed out after 3600s")
    records = [template.model_copy(update={"sample_id": f"dlg-{i:05d}", "status": "error" if i % 7 == 0 else "ok",
                                           "errors": [timeout] if i % 7 == 0 else []})
               for i in range(10_000)]
    write_run(run_dir, "proact-big", records, summarise=False)
    return run_dir


def test_ten_thousand_samples_paginate(big_run):
    with serving(big_run) as url:
        start = time.perf_counter()
        status, html, _ = get(url + "/runs/proact-big")
        first = time.perf_counter() - start
        assert status == 200 and "page 1 of 200 (10000 matching)" in html
        assert sample_rows(html) == [str(i) for i in range(1, PER_PAGE + 1)]
        assert len(html) < 200_000  # a page carries its 50 rows, not the run
        start = time.perf_counter()
        status, html, _ = get(url + "/runs/proact-big?page=200")
        later = time.perf_counter() - start
        assert sample_rows(html)[0] == "9951" and sample_rows(html)[-1] == "10000" and "dlg-09999" in html
        status, html, _ = get(url + "/runs/proact-big?page=999999&per_page=abc")
        assert "page 200 of 200" in html  # clamped, bad numbers fall back to the defaults
        status, html, _ = get(url + "/runs/proact-big?status=error&per_page=100")
        errors = len(range(0, 10_000, 7))
        assert f"page 1 of {-(-errors // 100)} ({errors} matching)" in html and len(sample_rows(html)) == 100
        assert sample_rows(html)[:2] == ["1", "8"]  # samples 0 and 7 (shown 1-based)
        status, html, _ = get(url + "/runs/proact-big?q=dlg-0999")
        assert "(10 matching)" in html
        status, html, _ = get(url + "/runs/proact-big/samples/9999")
        assert status == 200 and "dlg-09999" in html and 'rel="next"' not in html
        print(f"\n10k run page: first {first * 1000:.0f} ms (builds the offset index), later {later * 1000:.0f} ms")


def test_a_growing_run_shows_new_lines_and_skips_a_torn_one(big_run, loopback_runs):
    folder = RunFolder(big_run, "proact-big")
    with serving(big_run) as url:
        assert "(10000 matching)" in get(url + "/runs/proact-big")[1]
        extra = RunFolder(loopback_runs.main, loopback_runs.ids["c"]).read_samples()[0]
        with open(folder.samples_path, "a", encoding="utf-8") as fh:
            fh.write(extra.model_dump_json() + "\n")
            fh.write(extra.model_dump_json()[:100])  # a write in progress (or a crash mid-line)
        status, html, _ = get(url + "/runs/proact-big?page=201")
        assert status == 200 and "(10001 matching)" in html and extra.sample_id in html


def _lan_address() -> str | None:
    """This machine's address on a non-loopback interface, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def test_view_command_binds_loopback_only(loopback_runs):
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "view", "--run-dir", str(loopback_runs.main),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        line = proc.stdout.readline()
        match = re.match(r"serving http://127\.0\.0\.1:(\d+)/", line)
        assert match, line + proc.stderr.read() if proc.poll() is not None else line
        port = int(match[1])
        assert get(f"http://127.0.0.1:{port}/")[0] == 200
        lan = _lan_address()
        if lan:
            with pytest.raises(OSError):
                socket.create_connection((lan, port), timeout=2).close()
        # The port is taken now: a second viewer on it says so in one line.
        again = subprocess.run([sys.executable, "-m", "harness.cli", "view", "--run-dir", str(loopback_runs.main),
                                "--port", str(port)], capture_output=True, text=True, timeout=60, cwd=REPO)
        assert again.returncode != 0 and again.stderr.strip().startswith("error: ")
        assert f"--port {port}" in again.stderr and "--port 0" in again.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_view_of_a_missing_run_dir_is_one_clear_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "view", "--run-dir", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1
    assert "nope" in proc.stderr and "--run-dir DIR" in proc.stderr


def test_pictures_are_shown_as_png_data_and_anything_else_is_not():
    """A transcript's pictures (a driving failure's filmstrip) become data-URL images; a value that
    is not a base64 PNG never reaches the page, and the raw output shows sizes, not the bytes."""
    import base64

    from leaderboards.viewer_pages import sample_page

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 40).decode()
    hostile = '"><script>alert(1)</script>'
    html = sample_page("run", 0, 1, {"sample_id": "highway/seed0", "output": {"pictures": [
        {"caption": "crash at t=3.0s <i>", "png": png}, {"caption": "bad", "png": hostile},
        {"caption": "not png", "png": base64.b64encode(b"GIF89a").decode()}]}})
    assert html.count("<img") == 1 and f'src="data:image/png;base64,{png}"' in html
    assert "<script>" not in html and "&lt;i&gt;" in html
    assert html.count("not a base64 PNG") == 2
    assert f"&lt;{len(png)} base64 chars&gt;" in html and png not in html.split("output (raw)")[1]
