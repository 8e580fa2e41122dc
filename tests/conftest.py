"""Shared test fixtures: loopback servers (real HTTP on 127.0.0.1) and the data locations."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.loopback import running_server

REPO = Path(__file__).resolve().parents[1]


def _find_shared_data() -> Path:
    """The real ProactBench rows live in a `shared/data` folder beside the checkout (or an
    ancestor's); tests only read them, never copy them into the repo."""
    if os.environ.get("HARNESS_SHARED_DATA"):
        return Path(os.environ["HARNESS_SHARED_DATA"])
    for parent in REPO.parents:
        if (parent / "shared" / "data").is_dir():
            return parent / "shared" / "data"
    return REPO.parent / "shared" / "data"


SHARED_DATA = _find_shared_data()
REAL_PROACT = SHARED_DATA / "proactbench" / "final_dialogues.sample.jsonl"
OWN_PROACT = REPO / "corpora" / "proact" / "dialogues.jsonl"

# The `browser` tests drive Debian's Chromium through Playwright (`make install` installs it where it
# may). Without it they fail, naming the fix; HARNESS_SKIP_BROWSER=1 skips them, and the summary says so.
CHROMIUM = Path("/usr/bin/chromium")
SKIP_BROWSER = "HARNESS_SKIP_BROWSER"

# Every local Ray cluster the tests start runs without token auth and usage stats, set once for the
# whole process: Ray keeps the auth mode of a process's first `ray.init`, so a test that set
# RAY_AUTH_MODE only for itself, after another test's cluster had started with the default, got
# actors that never ran (CI, stop 47: adv0's Ray test ran first in the same worker).
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

JUDGE_PASS = '{"score": "PASS", "rationale": "it acted on the anchor", "evidence": "PASS"}'


@pytest.fixture(scope="session")
def real_corpus() -> Path:
    if not REAL_PROACT.exists():
        pytest.skip(f"real ProactBench rows not found at {REAL_PROACT}; set HARNESS_SHARED_DATA")
    return REAL_PROACT


@pytest.fixture()
def echo_server():
    """An instant OpenAI-compatible server; answers `echo: <last message>`."""
    with running_server("--echo") as url:
        yield url


@pytest.fixture()
def judge_pass_server():
    """Answers every call with a valid PASS verdict (also the 'assistant' reply, which is fine)."""
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        yield url


def default_sigint() -> None:
    """`preexec_fn` for a child a test will Ctrl-C: SIGINT back to its default disposition. A shell
    without job control starts background commands (`cmd &`, `nohup cmd &`) with SIGINT ignored,
    the child inherits that, and Python then never raises KeyboardInterrupt; the test is about our
    handling of Ctrl-C, not about how the test run was launched."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def harness_cli(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real `harness` command in a child process. Tests run one at a time, so the model
    process gets both cores (twice as fast as one torch thread here)."""
    full_env = os.environ | (env or {})
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=REPO)


@pytest.fixture(scope="module")
def loop():
    """One event loop per module, for a module-scoped async engine (vLLM's AsyncLLM binds to it)."""
    import asyncio

    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def pytest_collection_modifyitems(config, items):
    """Files with a slow (or Ray cluster) test run first (stable: each file keeps its order), so that `make test`'s
    two workers end together instead of one waiting on a long embedded-model file at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") or item.get_closest_marker("ray")}
    items.sort(key=lambda item: item.path not in slow_files)


def browser_missing() -> str | None:
    """What a `browser` test lacks here, or None."""
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"{CHROMIUM} is not installed"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (the dev extra)"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A `browser` test on a machine without the browser fails before its fixtures are built: a skip
    would pass `make test` with every browser test unrun. The opt-out is explicit and reported."""
    if item.get_closest_marker("browser") is None:
        return
    missing = browser_missing()
    if missing is None:
        return
    if os.environ.get(SKIP_BROWSER) == "1":
        pytest.skip(f"{SKIP_BROWSER}=1 and {missing}")
    pytest.fail(f"a browser test, and {missing}: run `sudo apt-get install -y chromium` (`make install` does it "
                f"where it may), or set {SKIP_BROWSER}=1 to skip the browser tests", pytrace=False)


def pytest_terminal_summary(terminalreporter):
    """One line for the browser tests skipped on request (also counted from xdist's workers)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if f"{SKIP_BROWSER}=1" in str(r.longrepr)]
    if skipped:
        terminalreporter.write_sep("=", f"{len(skipped)} browser tests skipped because {SKIP_BROWSER}=1: "
                                   "they did not run", yellow=True)
