"""Content-addressed SQLite cache of model calls.

Key = `request_hash` (provider/model, messages, sampling params incl. seed). A re-run of the same
config with the same seed reads every answer from here without calling the model.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from harness.providers.base import ModelOutput


class CallCache:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # One connection used from the event-loop thread only; WAL keeps readers of other runs happy.
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, model TEXT, output TEXT, created REAL DEFAULT (julianday('now')))"
        )

    def get(self, key: str) -> ModelOutput | None:
        row = self._db.execute("SELECT output FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        out = ModelOutput.model_validate_json(row[0])
        return out.model_copy(update={"cached": True, "latency_s": 0.0, "attempts": 0})

    def put(self, key: str, model: str, output: ModelOutput) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO calls (key, model, output) VALUES (?, ?, ?)",
            (key, model, output.model_dump_json()),
        )

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        self._db.close()
