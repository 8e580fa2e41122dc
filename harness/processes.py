"""Killing what an environment started (a browser's process tree, a JVM) when asking it to exit
was not enough."""

from __future__ import annotations

from collections.abc import Iterable

import psutil


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
