"""`python -m harness.process_guard PID`: the watchdog `processes.guard_descendants` starts.

It detaches (forks, the parent returns at once, the child starts a new session), then until PID
is gone it keeps the list of PID's descendants, and at the end kills those still running (and
their own descendants). Only psutil is imported: the watchdog lives as long as the process it
guards, one per guarded process."""

from __future__ import annotations

import os
import sys
import time

import psutil

from harness.processes import GUARD_POLL_S, kill_trees


def watch(pid: int, poll_s: float = GUARD_POLL_S) -> None:
    """Remember `pid`'s descendants until it exits, then kill the ones still running."""
    try:
        guarded = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    me = os.getpid()
    known: dict[int, psutil.Process] = {}
    while True:
        try:
            if not guarded.is_running() or guarded.status() == psutil.STATUS_ZOMBIE:
                break
            # the dead are dropped; an orphan of the guarded tree still runs, so it stays known
            known = {p: proc for p, proc in known.items() if proc.is_running()}
            known |= {c.pid: c for c in guarded.children(recursive=True) if c.pid != me}
        except psutil.NoSuchProcess:
            break
        time.sleep(poll_s)
    kill_trees(known.values())


def main(argv: list[str]) -> None:
    if len(argv) != 1 or not argv[0].isdigit():
        raise SystemExit("usage: python -m harness.process_guard PID")
    if os.fork() > 0:  # the launcher returns; the watchdog is re-parented away from the guarded tree
        os._exit(0)
    os.setsid()
    watch(int(argv[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
