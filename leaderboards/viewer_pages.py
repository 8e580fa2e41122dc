"""HTML of the run viewer's pages. Model output is data: every text from a record goes through
`html.escape` (quotes included) before it reaches the page; the pages carry no scripts at all."""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from harness.presenter import Presenter, message_html, presenter_for
from harness.providers.embedded import judge_note

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5rem auto; max-width: 70rem; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: .5rem 0 1rem; } th, td { border: 1px solid #ccc; padding: .2rem .5rem;
text-align: left; vertical-align: top; } th { background: #f3f3f3; }
.msg { border: 1px solid #ddd; border-radius: 6px; padding: .5rem .75rem; margin: .5rem 0; white-space: pre-wrap; }
.role { font-weight: bold; font-size: .8rem; text-transform: uppercase; color: #555; white-space: normal; }
.user { background: #f5f8ff; } .assistant { background: #f7fff5; } .system { background: #fafafa; }
.label { font-weight: bold; padding: 0 .35rem; border-radius: 3px; }
.PASS { background: #c8f0c8; } .PARTIAL { background: #fbe7b5; } .FAIL { background: #f6c6c6; }
.SKIPPED, .ERROR { background: #ddd; } .errors { background: #fff0f0; border: 1px solid #e99; padding: .5rem; }
mark { background: #ffe066; } pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f6; padding: .5rem; }
.picture img { max-width: 100%; border: 1px solid #ccc; } .picture { margin: .5rem 0; }
.pager a, .pager span { margin-right: .6rem; } .muted { color: #777; } h1 { overflow-wrap: anywhere; }
"""


def page(title: str, body: str, css: str = "") -> str:
    """A whole page; `css`: a family presenter's own rules, after the viewer's."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>{escape(title)}</title>'
            f"<style>{CSS}{css}</style></head><body>\n{body}\n</body></html>\n")


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def run_link(run_id: str, **query: Any) -> str:
    q = {k: v for k, v in query.items() if v not in (None, "")}
    return f"/runs/{quote(run_id, safe='')}" + (f"?{urlencode(q)}" if q else "")


def sample_link(run_id: str, index: int) -> str:
    return f"/runs/{quote(run_id, safe='')}/samples/{index}"


def runs_page(runs: list[Any], run_dirs: list[str]) -> str:
    rows = []
    for r in runs:
        head = f"{r.headline_metric}={_fmt(r.metrics[r.headline_metric].value)}" \
            if r.headline_metric and r.headline_metric in r.metrics else ""
        rows.append(f'<tr class="run"><td><a href="{_e(run_link(r.run_id))}">{_e(r.run_id)}</a></td>'
                    f"<td>{_e(r.suite)} {_e(r.suite_version)}</td><td>{_e(r.model)}</td><td>{_e(r.judge or '-')}</td>"
                    f"<td>{_e(r.status)}</td><td>{r.samples}</td><td>{r.errors}</td><td>{_e(head)}</td>"
                    f"<td>{_e(r.started)}</td></tr>")
    table = ("<table><thead><tr><th>run</th><th>suite</th><th>model</th><th>judge</th><th>status</th>"
             "<th>samples</th><th>errors</th><th>headline</th><th>started</th></tr></thead><tbody>"
             + "".join(rows) + "</tbody></table>") if rows else '<p class="muted">No runs recorded here yet.</p>'
    return page("runs", f"<h1>Runs</h1><p class=\"muted\">{_e(', '.join(run_dirs))}</p>{table}")


def _labels(presenter: Presenter, record: dict[str, Any]) -> str:
    """A short verdict summary for the list: the family presenter's, else the scores themselves."""
    scores = record.get("scores") or {}
    labels = presenter.sample_labels(scores)
    if labels is not None:
        return labels
    text = json.dumps(scores, ensure_ascii=False)
    return _e(text if len(text) <= 120 else text[:117] + "...")


def run_page(run: Any, summary: dict[str, Any] | None, models: dict[str, str], listed: list[tuple[int, dict[str, Any]]],
             *, total: int, matching: int, page_no: int, pages: int, per_page: int, status: str, q: str) -> str:
    presenter = presenter_for(str(run.suite))
    parts = [f'<p><a href="/">all runs</a></p><h1>{_e(run.run_id)}</h1>',
             f"<p>{_e(run.suite)} {_e(run.suite_version)} &middot; {_e(run.status)} &middot; {total} samples, "
             f"{run.errors} errors</p>"]
    if models:
        parts.append("<table><tr><th>role</th><th>model</th></tr>" + "".join(
            f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in models.items()) + "</table>")
    note = judge_note(run.judge)
    if note:
        parts.append(f'<p class="note">{_e(note)}</p>')
    parts.append(_spend(summary or {}))
    if summary and summary.get("metrics"):
        parts.append("<details><summary>metrics (95% CI)</summary><table><tr><th>metric</th><th>value</th>"
                     "<th>CI</th><th>n</th></tr>" + "".join(
                         f"<tr><td>{_e(k)}</td><td>{_fmt(m.get('value'))}</td><td>[{_fmt(m.get('ci_low'))}, "
                         f"{_fmt(m.get('ci_high'))}]</td><td>{_e(m.get('n'))}</td></tr>"
                         for k, m in summary["metrics"].items()) + "</table></details>")
    parts.append(f'<form method="get" action="{_e(run_link(run.run_id))}">filter: '
                 f'<select name="status"><option value="">all</option>'
                 + "".join(f'<option value="{s}"{" selected" if status == s else ""}>{s}</option>' for s in ("ok", "error"))
                 + f'</select> sample id contains <input name="q" value="{_e(q)}"> '
                 f'<input type="hidden" name="per_page" value="{per_page}"><button>apply</button></form>')
    rows = "".join(
        f'<tr class="sample"><td>{i + 1}</td><td><a href="{_e(sample_link(run.run_id, i))}">{_e(rec.get("sample_id"))}'
        f'</a></td><td>{_e(rec.get("epoch"))}</td><td>{_e(rec.get("status"))}</td><td>{_labels(presenter, rec)}</td>'
        f'<td>{len(rec.get("errors") or [])}</td></tr>' for i, rec in listed)
    parts.append("<table><thead><tr><th>#</th><th>sample</th><th>epoch</th><th>status</th><th>verdicts</th>"
                 f"<th>errors</th></tr></thead><tbody>{rows}</tbody></table>")

    def nav(label: str, target: int) -> str:
        if target < 1 or target > pages or target == page_no:
            return f'<span class="muted">{label}</span>'
        href = run_link(run.run_id, page=target, per_page=per_page, status=status, q=q)
        return f'<a href="{_e(href)}" rel="{label}">{label}</a>'

    parts.append(f'<p class="pager">{nav("first", 1)}{nav("prev", page_no - 1)}<span>page {page_no} of {pages} '
                 f"({matching} matching)</span>{nav('next', page_no + 1)}{nav('last', pages)}</p>")
    return page(run.run_id, "\n".join(parts), presenter.css)


def _spend(summary: dict[str, Any]) -> str:
    """What each role paid (calls not answered from the cache) and why the run stopped, if it did."""
    parts = [f'<p class="note">stopped: {_e(summary["stop_reason"])}</p>'] if summary.get("stop_reason") else []
    spend = summary.get("spend") or {}
    if spend:
        parts.append("<table><tr><th>role</th><th>calls</th><th>prompt tokens</th><th>completion tokens</th>"
                     "<th>USD</th></tr>" + "".join(
                         f"<tr><td>{_e(r)}</td><td>{_e(s.get('calls'))}</td><td>{_e(s.get('prompt_tokens'))}</td>"
                         f"<td>{_e(s.get('completion_tokens'))}</td><td>"
                         f"{'no known price' if s.get('usd') is None else _e(format(s['usd'], '.4f'))}</td></tr>"
                         for r, s in spend.items()) + "</table>")
    return "".join(parts)


_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
PNG_PREFIX = "iVBORw0KGgo"  # base64 of the PNG signature


def _pictures(pictures: Any) -> str:
    """A transcript's pictures (`output["pictures"]`: [{"caption", "png"}], PNG as base64, e.g. a
    driving failure's filmstrip), as data-URL images. Anything but a base64 PNG is shown as a note,
    never put into the page."""
    if not isinstance(pictures, list):
        return ""
    out = []
    for pic in pictures:
        png, caption = (pic.get("png"), pic.get("caption", "")) if isinstance(pic, dict) else (None, "")
        if not isinstance(png, str) or not png.startswith(PNG_PREFIX) or not _BASE64.fullmatch(png):
            out.append(f'<p class="muted">picture {_e(caption)}: not a base64 PNG, not shown</p>')
            continue
        out.append(f'<figure class="picture"><img alt="{_e(caption)}" src="data:image/png;base64,{png}">'
                   f"<figcaption>{_e(caption)}</figcaption></figure>")
    return "".join(out)


def _without_pictures(output: dict[str, Any]) -> dict[str, Any]:
    """The raw output with each picture's bytes replaced by their size (the images are shown above)."""
    if not isinstance(output.get("pictures"), list):
        return output
    pics = [{**p, "png": f"<{len(str(p.get('png', '')))} base64 chars>"} if isinstance(p, dict) else p
            for p in output["pictures"]]
    return {**output, "pictures": pics}


def _error_text(error: Any) -> str:
    """An error record (`{kind, message, ...}`, format 2) or a plain string (format 1)."""
    return f"{error.get('kind')}: {error.get('message')}" if isinstance(error, dict) else str(error)


def _chat(messages: list[Any]) -> str:
    return "".join(message_html(str(m.get("role", "?")), _e(m.get("content"))) for m in messages if isinstance(m, dict))


def sample_page(run_id: str, index: int, total: int, record: dict[str, Any], suite: str = "") -> str:
    presenter = presenter_for(suite)
    output = record.get("output") or {}
    back = run_link(run_id, page=index // 50 + 1)
    nav = (f'<p class="pager"><a href="{_e(back)}">back to run</a>'
           + (f'<a href="{_e(sample_link(run_id, index - 1))}" rel="prev">prev</a>' if index > 0 else "")
           + (f'<a href="{_e(sample_link(run_id, index + 1))}" rel="next">next</a>' if index + 1 < total else "")
           + f'<a href="{_e(sample_link(run_id, index))}.json">raw JSON</a></p>')
    parts = [nav, f'<h1 class="sample-id">{_e(record.get("sample_id"))}</h1>',
             f"<p>epoch {_e(record.get('epoch'))} &middot; seed {_e(record.get('seed'))} &middot; status "
             f"{_e(record.get('status'))} &middot; {_e(record.get('duration_s'))} s &middot; {_e(record.get('started'))}</p>"]
    if record.get("errors"):
        parts.append('<div class="errors"><b>errors</b><ul>' + "".join(f"<li>{_e(_error_text(e))}</li>" for e in record["errors"])
                     + "</ul></div>")
    transcript = presenter.sample_view(output, record.get("scores") or {}) or ""
    if not transcript and isinstance(chat := output.get("messages") or output.get("transcript"), list):
        transcript = _chat(chat)
    pictures = _pictures(output.get("pictures"))
    if pictures:
        parts.append(f"<h2>Pictures</h2>{pictures}")
    scores = f"<pre>{_e(json.dumps(record.get('scores'), indent=2, ensure_ascii=False))}</pre>"
    if transcript:  # the verdicts are shown in the transcript; the raw scores are a click away
        parts.append(f'<h2>Transcript</h2><div class="transcript">{transcript}</div>'
                     f"<details><summary>scores (raw)</summary>{scores}</details>")
    else:
        parts.append(f"<h2>Scores</h2>{scores}")
    usage = record.get("usage") or {}
    if usage:
        parts.append("<h2>Usage</h2><table><tr><th>role</th><th>calls</th><th>prompt</th><th>completion</th></tr>"
                     + "".join(f"<tr><td>{_e(r)}</td><td>{_e(u.get('calls'))}</td><td>{_e(u.get('prompt_tokens'))}</td>"
                               f"<td>{_e(u.get('completion_tokens'))}</td></tr>" for r, u in usage.items()) + "</table>")
    calls = record.get("calls") or []
    if calls:
        parts.append(f"<details><summary>{len(calls)} model calls</summary><table><tr><th>role</th><th>model</th>"
                     "<th>cached</th><th>attempts</th><th>latency s</th><th>finish</th></tr>" + "".join(
                         f"<tr><td>{_e(c.get('role'))}</td><td>{_e(c.get('model'))}</td><td>{_e(c.get('cached'))}</td>"
                         f"<td>{_e(c.get('attempts'))}</td><td>{_e(round(c.get('latency_s') or 0, 3))}</td>"
                         f"<td>{_e(c.get('finish_reason'))}</td></tr>" for c in calls) + "</table></details>")
    parts.append(f"<details><summary>output (raw)</summary><pre>{_e(json.dumps(_without_pictures(output), indent=2, ensure_ascii=False))}"
                 "</pre></details>")
    return page(f"{record.get('sample_id')} - {run_id}", "\n".join(parts), presenter.css)
