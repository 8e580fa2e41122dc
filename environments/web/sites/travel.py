"""The travel site: flight search, fares (Saver non-refundable, Standard refundable less a fee,
Flex refundable), bookings with seat and passenger changes, and cancellation with fees."""

from __future__ import annotations

import sqlite3

from flask.typing import ResponseReturnValue
from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from environments.web import rules
from environments.web.db import money
from environments.web.ledger import DeltaBuilder
from environments.web.sites.common import commit, conn, dollars, form_int, one

bp = Blueprint("travel", __name__, url_prefix="/travel")
SEATS = ("window", "aisle")
BOOKING_SQL = ("SELECT b.*, f.class, f.refundable, f.cancel_fee, f.price, f.flight_id, l.code, l.origin,"
               " l.destination, l.date, l.depart, l.arrive FROM booking b JOIN fare f ON f.id=b.fare_id"
               " JOIN flight l ON l.id=f.flight_id")


@bp.context_processor
def _ctx() -> dict[str, object]:
    return {"site_title": "CloudWays Travel", "money": money}


def _render(template: str, **kw: object) -> str:
    return render_template(f"travel/{template}.html", **kw)


def fare_label(f: sqlite3.Row) -> str:
    """One wording for a fare's refund rule, used on the flight page and in bookings."""
    if not f["refundable"]:
        return "non-refundable"
    return "free cancellation" if f["cancel_fee"] == 0 else f"refundable, cancellation fee {money(f['cancel_fee'])}"


@bp.get("/")
def home() -> ResponseReturnValue:
    return _render("home")


@bp.get("/search")
def search() -> ResponseReturnValue:
    args = {k: request.args.get(k, "").strip() for k in ("origin", "destination", "date")}
    sql, params = "SELECT l.*, MIN(f.price) AS lowest FROM flight l JOIN fare f ON f.flight_id=l.id WHERE 1=1", []
    for key, value in args.items():
        if value:
            sql += f" AND lower(l.{key}) = lower(?)"  # key is one of three fixed column names
            params.append(value)
    rows = conn().execute(sql + " GROUP BY l.id ORDER BY l.date, l.depart", params).fetchall()
    return _render("results", flights=rows, args=args)


@bp.get("/flight/<int:fid>")
def flight(fid: int) -> ResponseReturnValue:
    f = one("SELECT * FROM flight WHERE id=?", fid)
    fares = conn().execute("SELECT * FROM fare WHERE flight_id=? ORDER BY price", (fid,)).fetchall()
    return _render("flight", f=f, fares=fares, fare_label=fare_label)


@bp.post("/book")
def book() -> ResponseReturnValue:
    fare = one("SELECT f.*, l.code FROM fare f JOIN flight l ON l.id=f.flight_id WHERE f.id=?",
               form_int("fare", lo=1, hi=10_000))
    passenger = " ".join(request.form.get("passenger", "").split())
    seat = request.form.get("seat", "aisle")
    if not passenger or len(passenger) > 80:
        abort(400, "passenger name is required (at most 80 characters)")
    if seat not in SEATS:
        abort(400, f"seat must be one of {', '.join(SEATS)}")
    bid = conn().execute("INSERT INTO booking (fare_id, passenger, seat, status, paid, refund) VALUES (?,?,?,?,?,0)",
                         (fare["id"], passenger, seat, "confirmed", fare["price"])).lastrowid
    b = (DeltaBuilder().create(f"booking:{bid}", status="confirmed", fare=fare["class"], passenger=passenger,
                                seat=seat, paid=dollars(fare["price"]))
         .relate(f"booking:{bid}", "on_flight", f"flight:{fare['flight_id']}"))
    if not fare["refundable"]:  # the whole fare is lost if the trip is not taken
        b.irreversible(dollars(fare["price"]))
    commit("travel", f"booked {fare['class']} on {fare['code']} for {passenger}", b)
    flash(f"Booking #{bid} confirmed.")
    return redirect(url_for("travel.booking", bid=bid))


@bp.get("/bookings")
def bookings() -> ResponseReturnValue:
    rows = conn().execute(BOOKING_SQL + " ORDER BY b.id DESC").fetchall()
    return _render("bookings", bookings=rows)


@bp.get("/booking/<int:bid>")
def booking(bid: int) -> ResponseReturnValue:
    b = one(BOOKING_SQL + " WHERE b.id=?", bid)
    return _render("booking", b=b, rule=fare_label(b), refund=_refund(b))


def _refund(b: sqlite3.Row) -> int:
    if rules.active("cancel_refunds_nothing"):  # the rule perturbation (shown on the pages too)
        return 0
    return int(b["paid"] - b["cancel_fee"]) if b["refundable"] else 0


@bp.post("/booking/<int:bid>/update")
def update(bid: int) -> ResponseReturnValue:
    b = one(BOOKING_SQL + " WHERE b.id=?", bid)
    if b["status"] != "confirmed":
        abort(409, f"booking #{bid} is {b['status']}")
    passenger = " ".join(request.form.get("passenger", b["passenger"]).split())
    seat = request.form.get("seat", b["seat"])
    if not passenger or len(passenger) > 80 or seat not in SEATS:
        abort(400, "passenger name (at most 80 characters) and a seat (window or aisle) are required")
    conn().execute("UPDATE booking SET passenger=?, seat=? WHERE id=?", (passenger, seat, bid))
    d = (DeltaBuilder().attr(f"booking:{bid}", "passenger", b["passenger"], passenger)
         .attr(f"booking:{bid}", "seat", b["seat"], seat))
    commit("travel", f"updated booking {bid}", d)
    flash(f"Booking #{bid} updated.")
    return redirect(url_for("travel.booking", bid=bid))


@bp.route("/booking/<int:bid>/cancel", methods=["GET", "POST"])
def cancel(bid: int) -> ResponseReturnValue:
    b = one(BOOKING_SQL + " WHERE b.id=?", bid)
    if b["status"] != "confirmed":
        abort(409, f"booking #{bid} is already {b['status']}")
    refund = _refund(b)
    if request.method == "GET":
        return _render("cancel", b=b, refund=refund, fee=b["paid"] - refund)
    conn().execute("UPDATE booking SET status='cancelled', refund=? WHERE id=?", (refund, bid))
    d = (DeltaBuilder().attr(f"booking:{bid}", "status", "confirmed", "cancelled")
         .attr(f"booking:{bid}", "refund", 0.0, dollars(refund))
         .irreversible(dollars(b["paid"] - refund)))  # the fee (all of a Saver fare) is lost for good
    commit("travel", f"cancelled booking {bid}, refund {money(refund)}", d)
    flash(f"Booking #{bid} cancelled; {money(refund)} refunded.")
    return redirect(url_for("travel.booking", bid=bid))
