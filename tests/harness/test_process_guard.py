"""The watchdog of `processes.guard_descendants`: when the guarded process is SIGKILLed, what it
started -- a child and, re-parented to init, a grandchild -- is killed too; without the watchdog
the same grandchild lives on (the case the watchdog exists for)."""

import os
import signal
import subprocess
import sys
import time

import psutil

from tests.conftest import REPO

# The guarded process: maybe start the watchdog, start `sh` which starts a sleeping grandchild,
# print both pids, then wait to be killed.
SCRIPT = """
import subprocess, sys, time
import psutil
from harness.processes import guard_descendants
if sys.argv[1] == "guarded":
    guard_descendants()
sh = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 601"])
while not psutil.Process(sh.pid).children():
    time.sleep(0.05)
grandchild = psutil.Process(sh.pid).children()[0].pid
print(sh.pid, grandchild, flush=True)
time.sleep(600)
"""


def _start(mode: str) -> tuple[subprocess.Popen, list[psutil.Process]]:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, mode], cwd=REPO, stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    time.sleep(1.5)  # the watchdog refreshes its list every 0.5 s
    return proc, [psutil.Process(p) for p in pids]


def _running(procs: list[psutil.Process], within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while True:
        alive = [p.pid for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def test_descendants_of_a_killed_process_are_killed_by_its_watchdog():
    proc, started = _start("guarded")
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _running(started, within_s=10) == []
    finally:
        for p in started:
            if p.is_running():
                p.kill()


def test_without_the_watchdog_the_grandchild_outlives_a_killed_process():
    proc, started = _start("unguarded")
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(1.5)
        assert started[1].pid in _running(started, within_s=0)
        assert started[1].ppid() != proc.pid
    finally:
        for p in started:
            if p.is_running():
                p.kill()


def test_the_watchdog_is_started_once_per_process_and_is_nobodys_child(tmp_path):
    script = ("import os, psutil\nfrom harness.processes import guard_descendants\n"
              "guard_descendants(); guard_descendants()\n"
              "print(len([p for p in psutil.process_iter(['cmdline']) "
              "if p.info['cmdline'] and 'harness.process_guard' in p.info['cmdline'] and str(os.getpid()) in p.info['cmdline']]),"
              " len(psutil.Process().children()))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "0"]
