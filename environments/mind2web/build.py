"""The project's own Mind2Web corpus, written from its own sites (environments/web): each task's
gold steps are played on the shop, travel and mail sites (in-process, Flask's test client over a
freshly seeded SQLite file), and every step stores the page as served (`raw_html`), its cleaned
HTML with backend_node_ids, the target and the other actionable elements as candidates, and the
operation -- Mind2Web's format. Beyond it, under `cdwm`: the URL, the gold step's ledger delta and,
for every button on the page, the delta that pressing it would have made (played on a copy of the
database), so the offline protocol knows which wrong clicks were irreversible.

`build_corpus(out_dir)` rewrites the corpus byte for byte (`harness mind2web build-corpus`).

Splits: Mind2Web's three test splits need tasks, websites and domains the training split never
saw. With three sites, shop and travel share the domain "Commerce" and mail is "Communication":
train = 4 shop tasks; cross_task = 4 other shop tasks; cross_website = the travel site (its
domain seen through shop); cross_domain = the mail site.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin

from corpora.mind2web.loader import OWN_CORPUS, SPLIT_FOLDERS
from environments.cdwm.deltas import merge
from environments.mind2web import dom
from environments.web import db as dbm
from environments.web import ledger
from environments.web.server import create_app
from harness.environment import Delta

SITES = {"shop": ("Commerce", "Shopping"), "travel": ("Commerce", "Airlines"), "mail": ("Communication", "Email")}
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/harness/cdwm-mind2web")


@dataclass(frozen=True)
class Gold:
    """One scripted step: op, the element (`kind:text`, kind link/button/field/radio/checkbox, text
    found in its name), and the value typed."""

    op: str
    target: str
    value: str = ""


@dataclass(frozen=True)
class Script:
    key: str
    site: str
    split: str
    task: str
    steps: tuple[Gold, ...]


def C(target: str) -> Gold:
    return Gold("CLICK", target)


def T(target: str, value: str) -> Gold:
    return Gold("TYPE", target, value)


SCRIPTS = (
    # shop, seen in training
    Script("shop-socks", "shop", "train", "Add two pairs of Wool Hiking Socks to the cart",
           (C("link:Wool Hiking Socks"), T("field:Quantity", "2"), C("button:Add to cart"))),
    Script("shop-bottle", "shop", "train", "Buy one Insulated Water Bottle",
           (C("link:Insulated Water Bottle"), C("button:Add to cart"), C("link:Cart ("), C("link:Checkout"),
            C("button:Place order"))),
    Script("shop-address", "shop", "train", "Change the shipping address on my account to 5 Mill Lane, Leeds",
           (C("link:Account"), T("field:Address", "5 Mill Lane, Leeds"), C("button:Save"))),
    Script("shop-skillet", "shop", "train", "Browse the kitchen category and add the Cast Iron Skillet to the cart",
           (C("link:Kitchen"), C("link:Cast Iron Skillet"), C("button:Add to cart"))),
    # shop, held-out tasks (cross-task)
    Script("shop-yoga", "shop", "cross_task", "Search for a yoga mat and add it to the cart",
           (T("field:Search products", "yoga mat"), C("button:Search"), C("link:Yoga Mat"), C("button:Add to cart"))),
    Script("shop-headlamp", "shop", "cross_task", "Buy the Clearance Headlamp",
           (C("link:Clearance Headlamp"), C("button:Add to cart"), C("link:Cart ("), C("link:Checkout"),
            C("button:Place order"))),
    Script("shop-cancel4", "shop", "cross_task", "Cancel order #4",
           (C("link:Orders"), C("link:Order #4"), C("link:Cancel order"), C("button:Confirm cancellation"))),
    Script("shop-newsletter", "shop", "cross_task", "Unsubscribe from the weekly newsletter",
           (C("link:Account"), C("checkbox:newsletter"), C("button:Save"))),
    # travel (cross-website: the domain Commerce was seen through the shop)
    Script("travel-rome", "travel", "cross_website", "Find flights from London to Rome",
           (T("field:From", "London"), T("field:To", "Rome"), C("button:Search"))),
    Script("travel-flex", "travel", "cross_website", "Book the Flex fare on flight CW105 from London to Paris for Alex Morgan",
           (T("field:From", "London"), T("field:To", "Paris"), C("button:Search"), C("link:CW105"), C("radio:Flex"),
            T("field:Passenger name", "Alex Morgan"), C("button:Book"))),
    Script("travel-cancel2", "travel", "cross_website", "Cancel booking #2",
           (C("link:My bookings"), C("link:Booking #2"), C("link:Cancel booking"), C("button:Confirm cancellation"))),
    Script("travel-window", "travel", "cross_website", "Change the seat of booking #1 to a window seat",
           (C("link:My bookings"), C("link:Booking #1"), C("radio:Window"), C("button:Save changes"))),
    # mail (cross-domain: Communication never seen in training)
    Script("mail-reply-sam", "mail", "cross_domain", "Reply to Sam Lee's dinner invitation saying you are free on Saturday",
           (C("link:Dinner on Saturday?"), C("link:Reply"), T("field:Body", "Yes, I am free on Saturday."), C("button:Send"))),
    Script("mail-star-budget", "mail", "cross_domain", "Star the message about the budget approval",
           (C("link:Budget approval"), C("button:Star"))),
    Script("mail-trash-deals", "mail", "cross_domain", "Move the weekly deals email to the trash",
           (C("link:Weekly deals"), C("button:Move to trash"))),
    Script("mail-draft-priya", "mail", "cross_domain",
           "Write a message to priya@work.test with the subject Final numbers and save it as a draft, without sending it",
           (C("link:Compose"), T("field:To", "priya@work.test"), T("field:Subject", "Final numbers"),
            T("field:Body", "The final numbers follow on Friday."), C("button:Save draft"))),
)

KINDS = {"link": ("link",), "button": ("button",), "field": ("textbox", "combobox"), "radio": ("radio",),
         "checkbox": ("checkbox",)}


class BuildError(RuntimeError):
    pass


class SiteBrowser:
    """Just enough of a browser for plain-HTML sites: follow links, fill and submit forms."""

    def __init__(self, work: Path):
        template = dbm.build_template(work / "seed.sqlite")
        self.db = work / "episode.sqlite"
        dbm.reset(template, self.db)
        self.fork_db = work / "fork.sqlite"
        self.app = create_app(self.db, template, token="")  # no token: the admin endpoints stay closed
        self.client = self.app.test_client()
        self.url, self.raw = "", ""
        self.root = dom.Node("#document")
        self.values: dict[str, str] = {}
        self.checked: dict[str, bool] = {}

    def open(self, url: str) -> None:
        self._load(self.client.get(url, follow_redirects=True), url)

    def _load(self, resp: Any, what: str) -> None:
        if resp.status_code != 200:
            raise BuildError(f"{what}: HTTP {resp.status_code}")
        query = resp.request.query_string.decode()
        self.url = resp.request.path + (f"?{query}" if query else "")
        self.raw = resp.get_data(as_text=True)
        self.root = dom.number(dom.parse(self.raw))
        self.values, self.checked = {}, {}

    def find(self, target: str) -> dom.Node:
        kind, _, text = target.partition(":")
        found = [n for n in self.root.elements() if dom.actionable(n) and dom.role(n) in KINDS[kind]
                 and text.lower() in dom.describe(n).lower()]
        exact = [n for n in found if dom.describe(n).lower() == text.lower()]
        if len(exact) == 1 or len(found) == 1:
            return (exact or found)[0]
        raise BuildError(f"{target!r} on {self.url}: {len(found)} elements match")

    def form_data(self, form: dom.Node, button: dom.Node | None) -> dict[str, str]:
        data: dict[str, str] = {}
        for n in form.elements():
            name = n.attrs.get("name")
            if not name or "disabled" in n.attrs or n.tag not in ("input", "textarea", "select"):
                continue
            kind = n.attrs.get("type", "text")
            if n.tag == "input" and kind in ("checkbox", "radio"):
                if self.checked.get(n.bid, "checked" in n.attrs):
                    data[name] = n.attrs.get("value", "on")
            elif n.tag == "input" and kind not in ("submit", "button", "reset", "image"):
                data[name] = self.values.get(n.bid, n.attrs.get("value", ""))
            elif n.tag == "textarea":
                data[name] = self.values.get(n.bid, n.text())
            elif n.tag == "select":
                chosen = [o for o in n.elements() if o.tag == "option" and "selected" in o.attrs]
                default = (chosen or [o for o in n.elements() if o.tag == "option"] or [n])[0]
                data[name] = self.values.get(n.bid, default.attrs.get("value", default.text()))
        if button is not None and button.attrs.get("name"):
            data[button.attrs["name"]] = button.attrs.get("value", "")
        return data

    def submit(self, button: dom.Node, client: Any) -> Any:
        form = button.ancestor("form")
        if form is None:
            raise BuildError(f"button {dom.describe(button)!r} on {self.url} is in no form")
        action = urljoin(self.url, form.attrs.get("action") or self.url)
        data = self.form_data(form, button)
        if form.attrs.get("method", "get").lower() == "post":
            return client.post(action, data=data, follow_redirects=True)
        return client.get(action.split("?")[0] + "?" + urlencode(data), follow_redirects=True)

    def posts(self, node: dom.Node) -> bool:
        form = node.ancestor("form")
        return node.tag == "button" and form is not None and form.attrs.get("method", "get").lower() == "post"

    def delta_if_pressed(self, button: dom.Node) -> Delta:
        """The ledger's delta of pressing `button` now, played on a copy of the database."""
        shutil.copyfile(self.db, self.fork_db)
        since = ledger.last_id(self.fork_db)
        self.app.config["DB_PATH"] = self.fork_db
        try:
            self.submit(button, self.app.test_client())
        finally:
            self.app.config["DB_PATH"] = self.db
        return merge([e.delta for e in ledger.read(self.fork_db, since)])

    def act(self, node: dom.Node, gold: Gold) -> Delta:
        """Play one gold step; the ledger's delta of it."""
        since = ledger.last_id(self.db)
        if gold.op == "TYPE":
            self.values[node.bid] = gold.value
        elif node.tag == "a":
            self.open(urljoin(self.url, node.attrs["href"]))
        elif node.tag == "input" and node.attrs.get("type") in ("radio", "checkbox"):
            if node.attrs.get("type") == "radio":
                form = node.ancestor("form") or self.root
                for other in form.elements():
                    if other.tag == "input" and other.attrs.get("name") == node.attrs.get("name"):
                        self.checked[other.bid] = False
                self.checked[node.bid] = True
            else:
                self.checked[node.bid] = not self.checked.get(node.bid, "checked" in node.attrs)
        else:
            self._load(self.submit(node, self.client), f"{gold.target} on {self.url}")
        return merge([e.delta for e in ledger.read(self.db, since)])


def _delta_json(delta: Delta) -> dict[str, Any]:
    return delta.model_dump(mode="json", exclude={"confidence"})


def record_task(script: Script, work: Path) -> dict[str, Any]:
    """Play one script on fresh sites and write it as a Mind2Web task."""
    browser = SiteBrowser(work)
    start = f"/{script.site}/"
    browser.open(start)
    steps, reprs = [], []
    for i, gold in enumerate(script.steps):
        node = browser.find(gold.target)
        cands = [n for n in browser.root.elements() if dom.actionable(n)]
        deltas = {n.bid: _delta_json(d) for n in cands if browser.posts(n)
                  for d in [browser.delta_if_pressed(n)] if not d.is_empty() or not d.reversible}
        url, raw, cleaned = browser.url, browser.raw, dom.cleaned_html(browser.root)
        delta = browser.act(node, gold)
        if delta.facts() != (Delta.model_validate(deltas[node.bid]).facts() if node.bid in deltas else set()):
            raise BuildError(f"{script.key} step {i}: the pressed copy and the real press disagree")
        reprs.append(f"[{dom.role(node)}]  {dom.describe(node)} -> {gold.op}" + (f": {gold.value}" if gold.op != "CLICK" else ""))
        steps.append({
            "action_uid": str(uuid.uuid5(NAMESPACE, f"{script.key}/{i}")),
            "raw_html": raw,
            "cleaned_html": cleaned,
            "operation": {"op": gold.op, "original_op": gold.op, "value": gold.value},
            "pos_candidates": [dom.candidate_record(node, True)],
            "neg_candidates": [dom.candidate_record(n, False) for n in cands if n is not node],
            "cdwm": {"url": url, "delta": _delta_json(delta), "irreversible": not delta.reversible,
                     "candidate_deltas": deltas},
        })
    domain, subdomain = SITES[script.site]
    return {"annotation_id": str(uuid.uuid5(NAMESPACE, script.key)), "website": script.site, "domain": domain,
            "subdomain": subdomain, "confirmed_task": script.task, "action_reprs": reprs, "actions": steps,
            "cdwm": {"key": script.key, "start_url": start}}


def build_corpus(out_dir: Path = OWN_CORPUS) -> dict[str, str]:
    """Write every split's file under `out_dir` (`<split folder>/<site>.json`); {relative path: sha256}."""
    files: dict[Path, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="m2w-build-") as tmp:
        for script in SCRIPTS:
            work = Path(tmp) / script.key
            work.mkdir()
            rel = Path(SPLIT_FOLDERS[script.split]) / f"{script.site}.json"
            files.setdefault(rel, []).append(record_task(script, work))
    digests = {}
    for rel, tasks in sorted(files.items()):
        text = json.dumps(tasks, indent=1, ensure_ascii=False) + "\n"
        (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (out_dir / rel).write_text(text, encoding="utf-8")
        digests[str(rel)] = hashlib.sha256(text.encode()).hexdigest()
    return digests
