"""A real multi-node Ray cluster on one machine for tests: a head and worker nodes started as
separate `ray start` processes on 127.0.0.1, each with its own --temp-dir under one private
root, so teardown kills exactly the processes this cluster started (never `ray stop`, which
stops every Ray process of the machine)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
ROOT = Path("/tmp/ray-helper")
NODE_MEMORY = str(100 * 1024 * 1024)  # object store per node: the tests move kilobytes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    def __init__(self) -> None:
        self.root = ROOT / uuid.uuid4().hex[:8]
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # Token auth off, explicitly: Ray 2.60 turns it on when ~/.ray/auth_token exists (a local
        # `ray.init()` writes one), and this cluster listens on 127.0.0.1 only. Drivers use `env` too.
        self.env = os.environ | {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        return subprocess.Popen([RAY, "start", "--temp-dir", str(self.root / name), "--node-ip-address", "127.0.0.1",
                                 "--object-store-memory", NODE_MEMORY, "--disable-usage-stats", *args],
                                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def start(self, workers: tuple[str, ...] = ("w1", "w2")) -> None:
        # The head takes no tasks: every sample runs on a worker node, so killing one matters.
        head = self._start("head", "--head", "--port", str(self.port), "--num-cpus", "0", "--include-dashboard=false")
        _, err = head.communicate(timeout=120)
        if head.returncode != 0:
            raise RuntimeError(f"ray head did not start: {err[-2000:]}")
        starting = [self._start(w, "--address", self.address, "--num-cpus", "1", "--resources", json.dumps({w: 1}))
                    for w in workers]
        for proc in starting:
            _, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise RuntimeError(f"ray worker did not start: {err[-2000:]}")

    def raylet_pid(self, node: str) -> int:
        for pid in self.pids():
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"raylet/raylet" in cmd and f"{self.root / node}/".encode() in cmd:
                return pid
        raise LookupError(f"no raylet for node {node}")

    def node_id(self, node: str) -> str:
        """The Ray node id of a node (as `get_node_id()` reports it on that node's workers)."""
        args = Path(f"/proc/{self.raylet_pid(node)}/cmdline").read_bytes().decode().split("\0")
        return next(a.split("=", 1)[1] for a in args if a.startswith("--node_id="))

    def pids(self) -> list[int]:
        """Every live process of this cluster: its root in the command line or among open files
        (workers and agents rename themselves `ray::...` but keep their log files open)."""
        found, mark, me = [], str(self.root), os.getuid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                if os.stat(f"/proc/{entry}").st_uid != me:
                    continue
                status = Path(f"/proc/{entry}/stat").read_text()
                if status.rsplit(")", 1)[1].split()[0] == "Z":  # a zombie holds nothing
                    continue
                hit = mark.encode() in Path(f"/proc/{entry}/cmdline").read_bytes()
                if not hit:
                    for fd in os.listdir(f"/proc/{entry}/fd"):
                        try:
                            if os.readlink(f"/proc/{entry}/fd/{fd}").startswith(mark):
                                hit = True
                                break
                        except OSError:
                            continue
            except OSError:
                continue
            if hit:
                found.append(int(entry))
        return found

    def stop(self, timeout_s: float = 20.0) -> list[int]:
        """SIGKILL every process of this cluster until none is left; returns what survived."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            left = self.pids()
            if not left:
                return []
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.3)
        return self.pids()
