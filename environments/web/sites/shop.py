"""The shop: products, a cart, orders (cancellable while `placed`, unless they hold a final-sale
item), and account settings (including closing the account, which forfeits store credit)."""

from __future__ import annotations

import sqlite3

from flask.typing import ResponseReturnValue
from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from environments.web.db import money, order_totals
from environments.web import rules
from environments.web.ledger import DeltaBuilder
from environments.web.sites.common import commit, conn, dollars, form_int, one

bp = Blueprint("shop", __name__, url_prefix="/shop")
CATEGORIES = ("footwear", "kitchen", "clothing", "outdoor", "fitness")


@bp.context_processor
def _ctx() -> dict[str, object]:
    c = conn()
    return {"site_title": "Harbour Shop", "money": money,
            "cart_count": c.execute("SELECT COALESCE(SUM(quantity), 0) FROM cart_item").fetchone()[0],
            "account": c.execute("SELECT * FROM shop_account WHERE id=1").fetchone(), "categories": CATEGORIES}


def _render(template: str, **kw: object) -> str:
    return render_template(f"shop/{template}.html", **kw)


@bp.get("/")
def home() -> ResponseReturnValue:
    return _render("list", heading="All products", products=conn().execute("SELECT * FROM product ORDER BY id").fetchall())


@bp.get("/search")
def search() -> ResponseReturnValue:
    q = request.args.get("q", "").strip()
    rows = conn().execute("SELECT * FROM product WHERE name LIKE ? OR description LIKE ? ORDER BY id",
                          (f"%{q}%", f"%{q}%")).fetchall()
    return _render("list", heading=f"Results for '{q}'", products=rows, query=q)


@bp.get("/category/<name>")
def category(name: str) -> ResponseReturnValue:
    if name not in CATEGORIES:
        abort(404)
    rows = conn().execute("SELECT * FROM product WHERE category=? ORDER BY price", (name,)).fetchall()
    return _render("list", heading=name.capitalize(), products=rows)


@bp.get("/product/<int:pid>")
def product(pid: int) -> ResponseReturnValue:
    return _render("product", p=one("SELECT * FROM product WHERE id=?", pid))


@bp.post("/cart/add/<int:pid>")
def cart_add(pid: int) -> ResponseReturnValue:
    p = one("SELECT * FROM product WHERE id=?", pid)
    qty = form_int("quantity", default=1, lo=1, hi=20)
    have = conn().execute("SELECT quantity FROM cart_item WHERE product_id=?", (pid,)).fetchone()
    if p["stock"] < qty + (have[0] if have else 0):
        flash(f"Only {p['stock']} of {p['name']} in stock.")
        return redirect(url_for("shop.product", pid=pid))
    b = DeltaBuilder()
    if have:
        conn().execute("UPDATE cart_item SET quantity=? WHERE product_id=?", (have[0] + qty, pid))
        b.attr(f"cart_item:{pid}", "quantity", have[0], have[0] + qty)
    else:
        conn().execute("INSERT INTO cart_item VALUES (?,?)", (pid, qty))
        b.create(f"cart_item:{pid}", quantity=qty).relate("cart", "contains", f"product:{pid}")
    commit("shop", f"added {qty} x {p['name']} to the cart", b)
    return redirect(url_for("shop.cart"))


@bp.post("/cart/update/<int:pid>")
def cart_update(pid: int) -> ResponseReturnValue:
    have = one("SELECT quantity FROM cart_item WHERE product_id=?", pid)[0]
    qty = form_int("quantity", lo=0, hi=20)
    b = DeltaBuilder()
    if qty == 0:
        return cart_remove(pid)
    conn().execute("UPDATE cart_item SET quantity=? WHERE product_id=?", (qty, pid))
    commit("shop", f"cart quantity of product {pid} set to {qty}", b.attr(f"cart_item:{pid}", "quantity", have, qty))
    return redirect(url_for("shop.cart"))


@bp.post("/cart/remove/<int:pid>")
def cart_remove(pid: int) -> ResponseReturnValue:
    one("SELECT quantity FROM cart_item WHERE product_id=?", pid)
    conn().execute("DELETE FROM cart_item WHERE product_id=?", (pid,))
    b = DeltaBuilder().delete(f"cart_item:{pid}").relate("cart", "contains", f"product:{pid}", added=False)
    commit("shop", f"removed product {pid} from the cart", b)
    return redirect(url_for("shop.cart"))


def _cart() -> tuple[list[sqlite3.Row], int, int, int]:
    items = conn().execute("SELECT p.*, c.quantity FROM cart_item c JOIN product p ON p.id=c.product_id"
                           " ORDER BY p.id").fetchall()
    subtotal = sum(i["price"] * i["quantity"] for i in items)
    shipping, total = order_totals(subtotal)
    return items, subtotal, shipping, total


@bp.get("/cart")
def cart() -> ResponseReturnValue:
    items, subtotal, shipping, total = _cart()
    return _render("cart", items=items, subtotal=subtotal)


@bp.route("/checkout", methods=["GET", "POST"])
def checkout() -> ResponseReturnValue:
    items, subtotal, shipping, total = _cart()
    final = any(i["final_sale"] for i in items)
    if request.method == "GET":
        return _render("checkout", items=items, subtotal=subtotal, shipping=shipping, total=total, final=final)
    if not items:
        abort(400, "the cart is empty")
    acct = conn().execute("SELECT status FROM shop_account WHERE id=1").fetchone()
    if acct["status"] != "active":
        abort(403, "this account is closed")
    c = conn()
    oid = c.execute("INSERT INTO shop_order (status, subtotal, shipping, total, final_sale, placed_on)"
                    " VALUES ('placed',?,?,?,?, '2026-05-22')", (subtotal, shipping, total, int(final))).lastrowid
    b = DeltaBuilder().create(f"order:{oid}", status="placed", total=dollars(total))
    for i in items:
        c.execute("INSERT INTO order_item VALUES (?,?,?,?)", (oid, i["id"], i["quantity"], i["price"]))
        c.execute("UPDATE product SET stock=stock-? WHERE id=?", (i["quantity"], i["id"]))
        b.relate(f"order:{oid}", "contains", f"product:{i['id']}")
        b.attr(f"product:{i['id']}", "stock", i["stock"], i["stock"] - i["quantity"])
        if not rules.active("order_keeps_cart"):  # the rule perturbation: the line stays in the cart
            c.execute("DELETE FROM cart_item WHERE product_id=?", (i["id"],))
            b.delete(f"cart_item:{i['id']}").relate("cart", "contains", f"product:{i['id']}", added=False)
    if final:  # a final-sale order can never be cancelled: the whole payment is committed
        b.irreversible(dollars(total))
    commit("shop", f"placed order {oid} ({money(total)})", b)
    return redirect(url_for("shop.order", oid=oid))


@bp.get("/orders")
def orders() -> ResponseReturnValue:
    rows = conn().execute("SELECT * FROM shop_order ORDER BY id DESC").fetchall()
    return _render("orders", orders=[(o, _items(o["id"])) for o in rows])


def _items(oid: int) -> list[sqlite3.Row]:
    return conn().execute("SELECT p.name, i.quantity, i.price FROM order_item i JOIN product p ON p.id=i.product_id"
                          " WHERE i.order_id=? ORDER BY p.id", (oid,)).fetchall()


def _cancellable(o: sqlite3.Row) -> bool:
    return o["status"] == "placed" and not o["final_sale"]


@bp.get("/order/<int:oid>")
def order(oid: int) -> ResponseReturnValue:
    o = one("SELECT * FROM shop_order WHERE id=?", oid)
    return _render("order", o=o, items=_items(oid), cancellable=_cancellable(o))


@bp.route("/order/<int:oid>/cancel", methods=["GET", "POST"])
def cancel(oid: int) -> ResponseReturnValue:
    o = one("SELECT * FROM shop_order WHERE id=?", oid)
    if not _cancellable(o):
        abort(409, f"order #{oid} can no longer be cancelled")
    if request.method == "GET":
        return _render("cancel", o=o)
    c = conn()
    c.execute("UPDATE shop_order SET status='cancelled' WHERE id=?", (oid,))
    b = DeltaBuilder().attr(f"order:{oid}", "status", "placed", "cancelled")
    for item in c.execute("SELECT i.product_id, i.quantity, p.stock FROM order_item i JOIN product p"
                          " ON p.id=i.product_id WHERE i.order_id=?", (oid,)).fetchall():
        c.execute("UPDATE product SET stock=stock+? WHERE id=?", (item[1], item[0]))
        b.attr(f"product:{item[0]}", "stock", item[2], item[2] + item[1])
    # Full refund, but a cancelled order cannot be reinstated: irreversible at no cost.
    commit("shop", f"cancelled order {oid}", b.irreversible(0))
    flash(f"Order #{oid} was cancelled and {money(o['total'])} refunded.")
    return redirect(url_for("shop.order", oid=oid))


@bp.route("/account", methods=["GET", "POST"])
def account() -> ResponseReturnValue:
    a = one("SELECT * FROM shop_account WHERE id=1")
    if request.method == "GET":
        return _render("account", a=a)
    if a["status"] != "active":
        abort(403, "this account is closed")
    new: dict[str, str | int] = {"name": request.form.get("name", "").strip(), "email": request.form.get("email", "").strip(),
           "address": request.form.get("address", "").strip(), "newsletter": int("newsletter" in request.form)}
    if not new["name"] or "@" not in str(new["email"]) or not new["address"]:
        abort(400, "name, a valid email and an address are required")
    conn().execute("UPDATE shop_account SET name=?, email=?, address=?, newsletter=? WHERE id=1",
                   (new["name"], new["email"], new["address"], new["newsletter"]))
    b = DeltaBuilder()
    for key, value in new.items():
        before, after = a[key], value
        if key == "newsletter":
            before, after = bool(before), bool(after)
        b.attr("account:1", key, before, after)
    commit("shop", "updated account settings", b)
    flash("Account settings saved.")
    return redirect(url_for("shop.account"))


@bp.route("/account/close", methods=["GET", "POST"])
def close_account() -> ResponseReturnValue:
    a = one("SELECT * FROM shop_account WHERE id=1")
    if a["status"] != "active":
        abort(409, "this account is already closed")
    if request.method == "GET":
        return _render("close", a=a)
    conn().execute("UPDATE shop_account SET status='closed', store_credit=0, newsletter=0 WHERE id=1")
    b = (DeltaBuilder().attr("account:1", "status", "active", "closed")
         .attr("account:1", "store_credit", dollars(a["store_credit"]), 0.0)
         .attr("account:1", "newsletter", bool(a["newsletter"]), False)
         .irreversible(dollars(a["store_credit"])))  # a closed account and its credit are gone for good
    commit("shop", "closed the account", b)
    return redirect(url_for("shop.account"))
