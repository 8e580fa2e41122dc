"""The web world's one server process: the shop, travel and mail sites on 127.0.0.1.

    python -m environments.web.server --db /tmp/world.sqlite --port 0

Prints `serving http://127.0.0.1:PORT` once it accepts connections. The episode's database is
`--db`; it is (re)created from the seed template at start and by `POST /__reset`. The admin
endpoints (`/__reset`, `/__ledger`) need the token from `$CDWM_WEB_TOKEN` in the `X-Cdwm-Token`
header, so the agent's browser cannot read the ground truth or undo its own actions.
"""

from __future__ import annotations

import argparse
import logging
import hmac
import os
import secrets
import sys
import threading
import time
from pathlib import Path

from flask import Flask, Response, abort, jsonify, redirect, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException
from werkzeug.serving import make_server

from environments.web import db as dbm
from environments.web import ledger, rules
from environments.web.sites import common, mail, shop, travel

SITES = ("shop", "travel", "mail")
TOKEN_HEADER = "X-Cdwm-Token"


def create_app(db_path: Path, template: Path, token: str) -> Flask:
    app = Flask(__name__, template_folder=str(Path(__file__).parent / "sites" / "templates"))
    app.config.update(DB_PATH=db_path, TEMPLATE=template, SECRET_KEY=secrets.token_hex(16))
    for bp in (shop.bp, travel.bp, mail.bp):
        app.register_blueprint(bp)
    app.teardown_appcontext(common.close_conn)

    def admin() -> None:
        if not token or not hmac.compare_digest(request.headers.get(TOKEN_HEADER, ""), token):
            abort(403)

    @app.get("/")
    def index() -> str:
        return ('<!doctype html><title>Web world</title><h1>Web world</h1><ul>'
                + "".join(f'<li><a href="/{s}/">{s}</a></li>' for s in SITES) + "</ul>")

    @app.get("/favicon.ico")
    def favicon() -> tuple[str, int]:
        return "", 204

    @app.post("/__reset")
    def reset() -> Response:
        admin()
        rule = request.args.get("rule") or None  # a rule perturbation for this episode (rules.py)
        if rule is not None and rule not in rules.RULES:
            abort(400, f"unknown rule perturbation {rule!r}; choose from {', '.join(rules.RULES)}")
        dbm.reset(app.config["TEMPLATE"], app.config["DB_PATH"])
        app.config["RULE"] = rule
        return jsonify(ok=True)

    @app.get("/__ledger")
    def ledger_view() -> Response:
        admin()
        since = request.args.get("since", "0")
        entries = ledger.read(app.config["DB_PATH"], int(since) if since.isdigit() else 0)
        return jsonify([e.model_dump(mode="json") for e in entries])

    @app.after_request
    def no_cache(resp: Response) -> Response:
        resp.headers["Cache-Control"] = "no-store"  # every observation shows the current state
        return resp

    @app.errorhandler(400)
    @app.errorhandler(403)
    @app.errorhandler(409)
    def refused(err: HTTPException) -> tuple[str, int]:
        assert err.code is not None  # registered for 400, 403 and 409 only
        return (f"<!doctype html><title>Request refused</title><h1>Request refused</h1>"
                f"<p class=error role=alert>{_escape(err.description)}</p><p><a href=\"javascript:history.back()\">Back</a></p>",
                err.code)

    @app.get("/<site>")
    def site_root(site: str) -> ResponseReturnValue:
        return redirect(f"/{site}/") if site in SITES else abort(404)

    return app


def _escape(text: object) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _exit_with_parent(parent: int) -> None:
    """The server must not outlive the environment that started it, even after a SIGKILL."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m environments.web.server", description=__doc__.splitlines()[0])
    p.add_argument("--db", type=Path, required=True, help="the episode's SQLite file (replaced by the seed)")
    p.add_argument("--template", type=Path, default=None, help="seed template (default: <db>.seed, built if missing)")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--exit-with-parent", action="store_true", help="exit when the parent process dies")
    args = p.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request would dominate the step time
    template = args.template or args.db.with_name(args.db.name + ".seed")
    if not template.exists():
        dbm.build_template(template)
    dbm.reset(template, args.db)
    token = os.environ.get("CDWM_WEB_TOKEN", "")
    server = make_server("127.0.0.1", args.port, create_app(args.db, template, token), threaded=False)
    if args.exit_with_parent:
        threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    print(f"serving http://127.0.0.1:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
