"""The environment's side of the server process: start it on a free loopback port, reset its
database, read its ledger, and always stop it (its whole process group)."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

from environments.web import ledger, rules
from environments.web.server import SITES, TOKEN_HEADER

PLACEHOLDERS = {"shop": "__SHOP__", "travel": "__TRAVEL__", "mail": "__MAIL__"}


class WorldError(RuntimeError):
    pass


class WorldServer:
    def __init__(self, work_dir: Path | None = None, start_timeout_s: float = 20.0):
        self._tmp = None if work_dir else tempfile.TemporaryDirectory(prefix="cdwm-web-")
        self.work_dir = work_dir if work_dir else Path(self._tmp.name if self._tmp else "")
        self.db_path = self.work_dir / "episode.sqlite"
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""
        self._token = secrets.token_hex(16)

    @property
    def site_urls(self) -> dict[str, str]:
        """Placeholder -> base URL for each site (no trailing slash, like WebArena's env vars)."""
        return {PLACEHOLDERS[s]: f"{self.base_url}/{s}" for s in SITES}

    def start(self) -> None:
        env = os.environ | {"CDWM_WEB_TOKEN": self._token, "PYTHONUNBUFFERED": "1"}
        # A new session: stop() can signal the server and anything it starts as one group.
        with open(self.work_dir / "server.log", "wb") as server_log:
            proc = self.proc = subprocess.Popen(
                [sys.executable, "-m", "environments.web.server", "--db", str(self.db_path), "--port", "0",
                 "--exit-with-parent"], stdout=subprocess.PIPE, stderr=server_log, env=env, start_new_session=True,
                text=True)
        stdout = proc.stdout
        assert stdout is not None  # stdout=PIPE
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(self.start_timeout_s)
        match = re.match(r"serving (http://127\.0\.0\.1:\d+)", line[0] if line else "")
        if not match:
            log = (self.work_dir / "server.log").read_text(errors="replace")[-2000:]
            self.stop()
            raise WorldError(f"the web world server did not start within {self.start_timeout_s:.0f} s; "
                             f"its log ends:\n{log}")
        self.base_url = match[1]

    def _admin(self, method: str, path: str) -> bytes:
        req = urllib.request.Request(self.base_url + path, method=method, headers={TOKEN_HEADER: self._token})
        with urllib.request.urlopen(req, timeout=10) as resp:
            body: bytes = resp.read()
            return body

    def reset(self, rule: str | None = None) -> None:
        """A fresh database from the seed template (the ledger starts empty), with the sites'
        rules as trained, or with the rule perturbation `rule` (environments/web/rules.py)."""
        self._admin("POST", "/__reset" + (f"?rule={rules.check(rule)}" if rule else ""))

    def ledger_since(self, since_id: int) -> list[ledger.LedgerEntry]:
        return ledger.read(self.db_path, since_id)

    def last_ledger_id(self) -> int:
        return ledger.last_id(self.db_path)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=5)
        if proc is not None and proc.stdout:
            proc.stdout.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
