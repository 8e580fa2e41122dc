"""The mail site: folders, drafts (reversible), send (irreversible: it cannot be recalled),
trash with restore, and delete forever (irreversible)."""

from __future__ import annotations

from flask.typing import ResponseReturnValue
from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from environments.web.db import ME
from environments.web.ledger import DeltaBuilder
from environments.web.sites.common import commit, conn, one

bp = Blueprint("mail", __name__, url_prefix="/mail")
FOLDERS = ("inbox", "drafts", "sent", "trash")
MESSAGE_COST = 1.0  # the mail site's unit: one message sent or destroyed


@bp.context_processor
def _ctx() -> dict[str, object]:
    counts = dict(conn().execute("SELECT folder, COUNT(*) FROM message GROUP BY folder").fetchall())
    return {"site_title": "Post Mail", "folders": FOLDERS, "counts": counts, "me": ME}


def _render(template: str, **kw: object) -> str:
    return render_template(f"mail/{template}.html", **kw)


@bp.get("/")
def home() -> ResponseReturnValue:
    return folder("inbox")


@bp.get("/folder/<name>")
def folder(name: str) -> ResponseReturnValue:
    if name not in FOLDERS:
        abort(404)
    rows = conn().execute("SELECT * FROM message WHERE folder=? ORDER BY date DESC, id DESC", (name,)).fetchall()
    return _render("folder", name=name, messages=rows)


@bp.get("/contacts")
def contacts() -> ResponseReturnValue:
    return _render("contacts", contacts=conn().execute("SELECT * FROM contact ORDER BY name").fetchall())


@bp.get("/message/<int:mid>")
def message(mid: int) -> ResponseReturnValue:
    return _render("message", m=one("SELECT * FROM message WHERE id=?", mid))


@bp.get("/compose")
def compose() -> ResponseReturnValue:
    """A blank form, a reply (`reply_to`), a forward (`forward`) or a draft to edit (`draft`)."""
    to = subject = body = ""
    draft_id = None
    if request.args.get("draft", "").isdigit():
        d = one("SELECT * FROM message WHERE id=? AND folder='drafts'", int(request.args["draft"]))
        draft_id, to, subject, body = d["id"], d["recipient"], d["subject"], d["body"]
    elif request.args.get("reply_to", "").isdigit():
        m = one("SELECT * FROM message WHERE id=?", int(request.args["reply_to"]))
        to = m["sender"].split("<")[-1].rstrip(">") if "<" in m["sender"] else m["sender"]
        subject = m["subject"] if m["subject"].startswith("Re: ") else f"Re: {m['subject']}"
    elif request.args.get("forward", "").isdigit():
        m = one("SELECT * FROM message WHERE id=?", int(request.args["forward"]))
        subject = f"Fwd: {m['subject']}"
        body = f"\n\n---------- Forwarded message ----------\nFrom: {m['sender']}\n{m['body']}"
    return _render("compose", draft_id=draft_id, to=to, subject=subject, body=body)


@bp.post("/compose")
def send_or_save() -> ResponseReturnValue:
    action = request.form.get("action", "")
    if action not in ("save", "send"):
        abort(400, "action must be save or send")
    fields = {"recipient": " ".join(request.form.get("to", "").split()),
              "subject": request.form.get("subject", "").strip(), "body": request.form.get("body", "").strip()}
    if action == "send" and "@" not in fields["recipient"]:
        abort(400, "a recipient address is required to send")
    if any(len(v) > 5000 for v in fields.values()):
        abort(400, "fields are limited to 5000 characters")
    folder_to = "sent" if action == "send" else "drafts"
    c, b = conn(), DeltaBuilder()
    draft = request.form.get("draft_id", "")
    if draft.isdigit():
        old = one("SELECT * FROM message WHERE id=? AND folder='drafts'", int(draft))
        mid = old["id"]
        c.execute("UPDATE message SET folder=?, recipient=?, subject=?, body=? WHERE id=?",
                  (folder_to, fields["recipient"], fields["subject"], fields["body"], mid))
        b.attr(f"message:{mid}", "folder", "drafts", folder_to)
        for key, value in fields.items():
            b.attr(f"message:{mid}", key, old[key], value)
    else:
        mid = c.execute("INSERT INTO message (folder, sender, recipient, subject, body, date, starred)"
                        " VALUES (?,?,?,?,?, '2026-05-22', 0)",
                        (folder_to, ME, fields["recipient"], fields["subject"], fields["body"])).lastrowid
        b.create(f"message:{mid}", folder=folder_to, **fields)
    if action == "send":  # a sent message has been read by someone else: no undo
        b.irreversible(MESSAGE_COST)
    commit("mail", f"{'sent' if action == 'send' else 'saved draft'} message {mid}", b)
    flash("Message sent." if action == "send" else "Draft saved.")
    return redirect(url_for("mail.message", mid=mid))


@bp.post("/message/<int:mid>/star")
def star(mid: int) -> ResponseReturnValue:
    m = one("SELECT * FROM message WHERE id=?", mid)
    new = 0 if m["starred"] else 1
    conn().execute("UPDATE message SET starred=? WHERE id=?", (new, mid))
    commit("mail", f"{'starred' if new else 'unstarred'} message {mid}",
           DeltaBuilder().attr(f"message:{mid}", "starred", bool(m["starred"]), bool(new)))
    return redirect(url_for("mail.message", mid=mid))


@bp.post("/message/<int:mid>/trash")
def trash(mid: int) -> ResponseReturnValue:
    m = one("SELECT * FROM message WHERE id=?", mid)
    if m["folder"] == "trash":
        abort(409, "already in the trash")
    conn().execute("UPDATE message SET folder='trash', previous_folder=? WHERE id=?", (m["folder"], mid))
    commit("mail", f"moved message {mid} to the trash", DeltaBuilder().attr(f"message:{mid}", "folder", m["folder"], "trash"))
    flash("Moved to the trash.")
    return redirect(url_for("mail.folder", name=m["folder"]))


@bp.post("/message/<int:mid>/restore")
def restore(mid: int) -> ResponseReturnValue:
    m = one("SELECT * FROM message WHERE id=? AND folder='trash'", mid)
    back = m["previous_folder"] or "inbox"
    conn().execute("UPDATE message SET folder=?, previous_folder=NULL WHERE id=?", (back, mid))
    commit("mail", f"restored message {mid}", DeltaBuilder().attr(f"message:{mid}", "folder", "trash", back))
    flash(f"Restored to {back}.")
    return redirect(url_for("mail.folder", name="trash"))


@bp.post("/message/<int:mid>/delete")
def delete_forever(mid: int) -> ResponseReturnValue:
    one("SELECT * FROM message WHERE id=? AND folder='trash'", mid)
    conn().execute("DELETE FROM message WHERE id=?", (mid,))
    commit("mail", f"deleted message {mid} forever", DeltaBuilder().delete(f"message:{mid}").irreversible(MESSAGE_COST))
    flash("Deleted forever.")
    return redirect(url_for("mail.folder", name="trash"))
