"""`harness view`: a read-only web viewer of the runs in one or more run dirs, on 127.0.0.1 only.

Big runs stay responsive because a page never loads the whole run: a run's samples.jsonl gets an
index of byte offsets (one pass, kept in memory, extended as a running run appends), and a page
parses only the lines it shows (offset/limit). The id, epoch and status of every line are read
from the line's first bytes while indexing (`harness.run_folder.scan_heads`), so filtering by status
or id needs no JSON parsing either. The index is compact -- offsets, epochs and statuses in typed
arrays, one id string per line -- so a run of a million samples indexes in tens of MB.

URLs map to runs through the run dirs' `index.sqlite`, never to file paths: a request can only
reach a run folder the index names.
"""

from __future__ import annotations

import json
import threading
from array import array
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

from harness.errors import HarnessError
from harness.run_folder import Head, scan_heads
from leaderboards.runs import RunInfo, check_run_dirs, load_runs
from leaderboards.viewer_pages import page, run_page, runs_page, sample_page

HOST = "127.0.0.1"  # loopback only: records can hold prompts and outputs nobody meant to publish
PER_PAGE = 50
MAX_PER_PAGE = 500
STATUSES = ("ok", "error")  # a line's status as one byte: its place here (anything else: len(STATUSES))
# No scripts, no remote anything: even a rendering bug cannot run or fetch what a model wrote.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'"


class SampleIndex:
    """Offsets and (sample_id, epoch, status) of each finished line of one samples.jsonl."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.offsets = array("q")  # byte offset of each shown line
        self.ids: list[str] = []
        self.epochs = array("q")
        self.statuses = bytearray()
        self._keys: set[tuple[str, int]] = set()
        self._end = 0

    def refresh(self) -> None:
        """Index lines appended since the last call. A torn last line (a crash mid-write, or a
        write in progress) is left for later; a file that shrank is indexed afresh."""
        with self._lock:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size < self._end:
                self._reset()  # replaced or repaired: start over
            if size == self._end:
                return
            for head in scan_heads(self.path, self._end):
                self._add(head)
                self._end = head.end

    def _add(self, head: Head) -> None:
        key = (head.sample_id, head.epoch)
        if key in self._keys:  # a duplicate key: readers keep the first, so does the viewer
            return
        self._keys.add(key)
        self.offsets.append(head.offset)
        self.ids.append(head.sample_id)
        self.epochs.append(head.epoch)
        self.statuses.append(STATUSES.index(head.status) if head.status in STATUSES else len(STATUSES))

    def __len__(self) -> int:
        return len(self.offsets)

    def read(self, i: int) -> dict[str, Any]:
        with open(self.path, "rb") as fh:
            fh.seek(self.offsets[i])
            # json.loads gives Any: a samples.jsonl line is one record, a JSON object.
            return cast(dict[str, Any], json.loads(fh.readline()))

    def head(self, i: int) -> tuple[str, int, str]:
        """(sample_id, epoch, status) of line i, without reading the file."""
        code = self.statuses[i]
        return self.ids[i], self.epochs[i], STATUSES[code] if code < len(STATUSES) else "?"

    def select(self, status: str = "", q: str = "") -> Sequence[int]:
        """The line numbers a filter keeps; with no filter, a range (no list of a million numbers
        per page view)."""
        if not status and not q:
            return range(len(self.offsets))
        code = STATUSES.index(status) if status in STATUSES else -1
        q = q.lower()
        return [i for i, sid in enumerate(self.ids)
                if (not status or self.statuses[i] == code) and (not q or q in sid.lower())]


class Viewer:
    """Run lookup and per-run sample indexes, shared by the server's threads."""

    def __init__(self, run_dirs: list[Path]):
        self.run_dirs = check_run_dirs(run_dirs)
        self._indexes: dict[str, SampleIndex] = {}
        self._lock = threading.Lock()

    def runs(self) -> list[RunInfo]:
        return load_runs(self.run_dirs, details=False)

    def run(self, run_id: str) -> RunInfo | None:
        return next((r for r in self.runs() if r.run_id == run_id), None)

    def index(self, run: RunInfo) -> SampleIndex:
        with self._lock:
            idx = self._indexes.setdefault(run.run_id, SampleIndex(run.folder.samples_path))
        idx.refresh()
        return idx


def _int(query: dict[str, list[str]], key: str, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(query.get(key, [default])[0]), low), high)
    except ValueError:
        return default


class Handler(BaseHTTPRequestHandler):
    viewer: Viewer  # set on the subclass made by make_server
    server_version = "harness-view"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal is the user's
        pass

    def _send(self, status: int, body: str, content_type: str = "text/html; charset=utf-8") -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self, what: str) -> None:
        self._send(HTTPStatus.NOT_FOUND, page("not found", f'<h1>Not found</h1><p>{what}</p><p><a href="/">all runs</a></p>'))

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        from html import escape

        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        try:
            if not parts:
                runs = self.viewer.runs()
                return self._send(200, runs_page(runs, [str(d) for d in self.viewer.run_dirs]))
            if parts[0] != "runs" or len(parts) not in (2, 4) or (len(parts) == 4 and parts[2] != "samples"):
                return self._not_found(f"no page at {escape(url.path)}")
            run = self.viewer.run(parts[1])
            if run is None:
                return self._not_found(f"run {escape(parts[1])!s} is not in {escape(', '.join(map(str, self.viewer.run_dirs)))}")
            index = self.viewer.index(run)
            if len(parts) == 2:
                return self._run(run, index, query)
            raw = parts[3].endswith(".json")
            number = parts[3][:-5] if raw else parts[3]
            if not number.isdigit() or int(number) >= len(index):
                return self._not_found(f"run {escape(run.run_id)} has no sample {escape(number)} "
                                       f"(it has {len(index)})")
            record = index.read(int(number))
            if raw:
                return self._send(200, json.dumps(record, indent=2, ensure_ascii=False), "application/json")
            return self._send(200, sample_page(run.run_id, int(number), len(index), record, suite=run.suite))
        except (HarnessError, OSError, ValueError) as exc:
            return self._send(HTTPStatus.INTERNAL_SERVER_ERROR, page("error", f"<h1>Error</h1><p>{escape(str(exc))}</p>"))

    def _run(self, run: RunInfo, index: SampleIndex, query: dict[str, list[str]]) -> None:
        status = query.get("status", [""])[0]
        status = status if status in ("ok", "error") else ""
        q = query.get("q", [""])[0][:200]
        per_page = _int(query, "per_page", PER_PAGE, 1, MAX_PER_PAGE)
        chosen = index.select(status, q)
        pages = max(1, -(-len(chosen) // per_page))
        page_no = _int(query, "page", 1, 1, pages)
        shown = chosen[(page_no - 1) * per_page: page_no * per_page]
        listed = [(i, index.read(i)) for i in shown]
        folder = run.folder
        summary = json.loads(folder.summary_path.read_text(encoding="utf-8")) if folder.summary_path.exists() else None
        models: dict[str, str] = {}
        if folder.manifest_path.exists():  # read as a RunConfig: manifests hold `roles` (older ones `models`)
            models = folder.read_manifest().config.models
        self._send(200, run_page(run, summary, models, listed, total=len(index), matching=len(chosen),
                                 page_no=page_no, pages=pages, per_page=per_page, status=status, q=q))


def make_server(run_dirs: list[Path], port: int = 0) -> ThreadingHTTPServer:
    """A server bound to 127.0.0.1 (port 0: any free port); call serve_forever() on it."""
    viewer = Viewer(run_dirs)
    handler = type("BoundHandler", (Handler,), {"viewer": viewer})
    try:
        server = ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        raise HarnessError(f"--port {port}: cannot listen on {HOST}:{port} ({exc.strerror}); "
                           "pick another port or --port 0 for any free one") from None
    server.daemon_threads = True
    return server
