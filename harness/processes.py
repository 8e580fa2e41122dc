"""Killing what an environment started (a browser's process tree, a JVM) when asking it to exit
was not enough, and a watchdog for when nobody is left to ask (`guard_descendants`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable

import psutil

GUARD_POLL_S = 0.5  # how often the watchdog refreshes its list of the guarded process's descendants
_guarded_pid: int | None = None  # the process this module already started a watchdog for


def kill_trees(procs: Iterable[psutil.Process], timeout: float = 5.0) -> None:
    """Kill each process that still runs and all its descendants, then wait for them. psutil
    refuses a pid that was reused, so a stale handle kills nothing."""
    found: dict[int, psutil.Process] = {}
    for proc in procs:
        try:
            if proc.is_running():
                found[proc.pid] = proc
                found |= {c.pid: c for c in proc.children(recursive=True)}
        except psutil.Error:
            pass
    for proc in found.values():
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(list(found.values()), timeout=timeout)


def guard_descendants() -> None:
    """Once per process: start a watchdog that kills this process's descendants when it dies.

    A Ray worker whose node dies exits without running any cleanup, and Ray then kills only its
    direct children: a browser started by Playwright's driver (a grandchild) or anything a child
    started lives on, re-parented to init (seen with Ray 2.60). The watchdog is detached (it is
    nobody's child here, so whatever kills this process's children does not kill it), remembers
    the descendants every `GUARD_POLL_S`, and kills them once this process is gone. Something
    started and orphaned within the last poll before the death can be missed."""
    global _guarded_pid
    if _guarded_pid == os.getpid():
        return
    # The launcher forks the watchdog and exits at once (a double fork), so waiting is short.
    subprocess.run([sys.executable, "-m", "harness.process_guard", str(os.getpid())], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    _guarded_pid = os.getpid()
