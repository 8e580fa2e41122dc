"""Run the `vllm`-marked test modules in lanes, one lane per CPU core (`make test-vllm`).

Each module still gets its own pytest process (after engines of several modules in one process, a
ZeroMQ context that vLLM left open can block the interpreter's exit). A module's time is mostly its
engines' start, which is single-threaded Python, so two modules side by side on two cores take
about half the time of one after the other. Each lane is pinned to its core (the process's CPU
affinity, inherited by vLLM's engine processes and Ray's actors), and vLLM's OpenMP threads are
bound to the same core: with vLLM's default ("auto") binding both engines would claim every core
and spin-wait on each other.

Usage: python tests/vllm_lanes.py [--lanes N] FILE... ; exit status 1 if any module failed.
Modules start longest first (by the last measured times below; an unknown module counts as long).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

# Seconds per module in session 23's CI run (one after another on a quiet machine); only the order
# uses them.
LAST_SECONDS = {
    "tests/kernels/test_vllm_preft.py": 262,
    "tests/harness/test_vllm.py": 157,
    "tests/harness/test_vllm_replicas.py": 139,
    "tests/harness/test_tool_calls_e2e.py": 100,
    "tests/kernels/test_adapter_bench.py": 77,
}
UNKNOWN_SECONDS = 300


def module_command(path: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-m", "vllm", "--durations=5", "-p", "no:cacheprovider", path]


def lane_env(core: int | None) -> dict[str, str]:
    env = dict(os.environ)
    if core is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = str(core)
        env["OMP_NUM_THREADS"] = "1"
    return env


def run_module(path: str, core: int | None) -> tuple[int, str, float]:
    start = time.monotonic()

    def pin() -> None:
        if core is not None:
            os.sched_setaffinity(0, {core})

    done = subprocess.run(module_command(path), env=lane_env(core), preexec_fn=pin,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    return done.returncode, done.stdout, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--lanes", type=int, default=0,
                        help="parallel lanes (default: one per CPU core this process may use, at most 2)")
    args = parser.parse_args(argv)
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        parser.error(f"no such test module: {', '.join(missing)}")
    cores = sorted(os.sched_getaffinity(0))
    lanes = args.lanes or min(2, len(cores))
    if lanes < 1:
        parser.error(f"--lanes {args.lanes}: give at least 1")
    # One lane may use every core (no pinning); several lanes each get one core of their own.
    lane_cores: list[int | None] = [None] if lanes == 1 else [cores[i % len(cores)] for i in range(lanes)]
    queue = sorted(args.files, key=lambda f: -LAST_SECONDS.get(f, UNKNOWN_SECONDS))
    lock = threading.Lock()
    failed: list[str] = []

    def lane(core: int | None) -> None:
        while True:
            with lock:
                if not queue or failed:
                    return
                path = queue.pop(0)
            code, output, seconds = run_module(path, core)
            with lock:
                where = "all cores" if core is None else f"core {core}"
                print(f"===== {path} ({where}): exit {code} in {seconds:.0f} s", flush=True)
                print(output, flush=True)
                if code != 0:
                    failed.append(path)

    threads = [threading.Thread(target=lane, args=(core,)) for core in lane_cores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        print(f"vLLM test modules failed: {', '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
