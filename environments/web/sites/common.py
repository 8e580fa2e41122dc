"""What every site handler shares: the per-request database connection and the one way to
change state (`commit`: the change and its ledger entry in one transaction)."""

from __future__ import annotations

import sqlite3

from flask import abort, current_app, g, request

from environments.web import db as dbm
from environments.web.ledger import DeltaBuilder, record


def conn() -> sqlite3.Connection:
    if "conn" not in g:
        g.conn = dbm.connect(current_app.config["DB_PATH"])
    c: sqlite3.Connection = g.conn
    return c


def close_conn(_exc: BaseException | None = None) -> None:
    c = g.pop("conn", None)
    if c is not None:
        c.close()


def commit(site: str, summary: str, built: DeltaBuilder) -> None:
    """Write the ledger entry for this request and commit it with the change it describes."""
    c = conn()
    record(c, site, request.method, request.path, {k: v for k, v in request.form.items()}, summary, built)
    c.commit()


def one(sql: str, *args: object) -> sqlite3.Row:
    row: sqlite3.Row | None = conn().execute(sql, args).fetchone()
    if row is None:
        abort(404)
    return row


def form_int(name: str, default: int | None = None, lo: int = 0, hi: int = 99) -> int:
    """A bounded integer form field; anything else is a 400 with the field's name (typed text is data)."""
    raw = request.form.get(name, "").strip()
    if not raw and default is not None:
        return default
    try:
        value = int(raw)
    except ValueError:
        abort(400, f"{name} must be a whole number")
    if not lo <= value <= hi:
        abort(400, f"{name} must be between {lo} and {hi}")
    return value


def dollars(cents: int) -> float:
    return round(cents / 100, 2)
