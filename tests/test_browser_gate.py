"""`make test` on a machine without Chromium: a `browser` test fails naming the fix; with
HARNESS_SKIP_BROWSER=1 it is skipped and the terminal summary says so (also under xdist, as `make
test` runs). An inner pytest run loads tests/conftest.py's hooks with the browser path pointed at a
file that does not exist."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, SKIP_BROWSER

INNER_CONFTEST = """
from pathlib import Path

import tests.conftest as shared

shared.CHROMIUM = Path("/nonexistent/chromium")
from tests.conftest import pytest_runtest_setup, pytest_terminal_summary  # noqa: E402,F401
"""
INNER_TESTS = """
import pytest


@pytest.mark.browser
def test_drives_a_browser():
    pass


def test_needs_no_browser():
    pass
"""


def _inner_pytest(folder, *args: str, skip: bool) -> subprocess.CompletedProcess:
    (folder / "conftest.py").write_text(INNER_CONFTEST)
    (folder / "test_inner.py").write_text(INNER_TESTS)
    env = {k: v for k, v in os.environ.items() if k != SKIP_BROWSER} | {"PYTHONPATH": str(REPO)}
    if skip:
        env[SKIP_BROWSER] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", *args,
                           str(folder)], capture_output=True, text=True, cwd=folder, env=env, timeout=120)


def test_a_browser_test_without_chromium_fails_naming_the_fix(tmp_path):
    proc = _inner_pytest(tmp_path, skip=False)
    assert proc.returncode == 1, proc.stdout
    assert "1 passed, 1 error" in proc.stdout and "skipped" not in proc.stdout  # an error in its setup
    assert "/nonexistent/chromium is not installed: run `sudo apt-get install -y chromium`" in proc.stdout


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one process", "xdist"])
def test_the_opt_out_skips_and_says_so(tmp_path, workers):
    proc = _inner_pytest(tmp_path, *workers, skip=True)
    assert proc.returncode == 0, proc.stdout
    assert "1 passed, 1 skipped" in proc.stdout
    assert f"1 browser tests skipped because {SKIP_BROWSER}=1: they did not run" in proc.stdout
