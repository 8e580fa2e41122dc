"""A tiny, real, deterministic text shop behind the CDWM protocol -- a test fixture for the agents,
metrics and export (the web world in environments/web is the one users run).

Pages carry WebArena-style element ids; `click [11]` on a product page buys it at once (an
irreversible order), `click [10]` adds it to the cart (reversible). Every step returns the
ground-truth delta of what it changed.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from environments.cdwm.deltas import AttributeChange, Delta, Relation
from environments.cdwm.env import Observation, StepResult

PRODUCTS = {1: ("blue mug", 12.0), 2: ("red mug", 9.0), 3: ("green teapot", 30.0)}
CLASSES = ("click", "hover", "scroll", "goto", "stop")

TASKS = [
    {"task_id": "shop-cart", "intent": "Add the blue mug to the cart", "kind": "cart", "product": 1,
     "required_irreversible": []},
    {"task_id": "shop-buy", "intent": "Buy the green teapot", "kind": "buy", "product": 3,
     "required_irreversible": ["order"]},
    {"task_id": "shop-price", "intent": "What is the price of the red mug?", "kind": "answer", "answer": "9",
     "required_irreversible": []},
]


class ShopEnv:
    def __init__(self) -> None:
        self.closed = False
        self.actions: list[str] = []
        self.threads = {threading.get_ident()}  # the threads that drove it (the agents use one)

    def reset(self, task: dict[str, Any]) -> Observation:
        self.threads.add(threading.get_ident())
        self.task, self.page, self.cart, self.orders, self.answer = task, task.get("start", "home"), [], [], None
        self.actions = []
        return self._obs()

    def _obs(self) -> Observation:
        if self.page == "home":
            lines = ["URL: http://shop.test/", "heading 'Shop'"] + [f"[{pid}] link '{name}'" for pid, (name, _) in PRODUCTS.items()]
            lines.append(f"[4] link 'Cart ({len(self.cart)})'")
        elif self.page.startswith("product:"):
            name, price = PRODUCTS[int(self.page.split(":")[1])]
            lines = [f"URL: http://shop.test/{self.page}", f"heading '{name}'", f"StaticText 'Price: ${price:g}'",
                     "[10] button 'Add to cart'", "[11] button 'Buy now'", "[12] link 'Home'"]
        else:
            lines = ["URL: http://shop.test/cart"] + [f"StaticText '{PRODUCTS[p][0]}'" for p in self.cart] + ["[12] link 'Home'"]
        return Observation(text="\n".join(lines), action_classes=CLASSES)

    def action_class(self, action: str) -> str:
        return (action.split() or [""])[0].split("[")[0].lower()

    def step(self, action: str) -> StepResult:
        self.threads.add(threading.get_ident())
        self.actions.append(action)
        cls = self.action_class(action)
        arg = re.search(r"\[(.*?)\]", action)
        arg = arg.group(1) if arg else ""
        delta = Delta()
        if cls == "stop":
            self.answer = arg
            return StepResult(self._obs(), delta, done=True)
        if cls in ("hover", "scroll", "goto"):
            return StepResult(self._obs(), delta, done=False)
        if cls != "click" or not arg.isdigit():
            return StepResult(self._obs(), delta, done=False, valid=False, info={"error": f"cannot do {action!r}"})
        target = int(arg)
        if self.page == "home" and target in PRODUCTS:
            self.page = f"product:{target}"
        elif self.page == "home" and target == 4:
            self.page = "cart"
        elif target == 12 and self.page != "home":
            self.page = "home"
        elif self.page.startswith("product:") and target in (10, 11):
            pid = int(self.page.split(":")[1])
            if target == 10:
                self.cart.append(pid)
                delta = Delta(attributes=[AttributeChange(entity="cart:1", attribute="item_count", before=len(self.cart) - 1, after=len(self.cart))],
                              relations_added=[Relation(subject="cart:1", relation="contains", object=f"product:{pid}")])
            else:
                self.orders.append(pid)
                oid = f"order:{len(self.orders)}"
                delta = Delta(created=[oid], relations_added=[Relation(subject=oid, relation="contains", object=f"product:{pid}")],
                              reversible=False, irreversible_cost=PRODUCTS[pid][1])
        else:
            return StepResult(self._obs(), delta, done=False, valid=False, info={"error": f"no element [{target}] here"})
        return StepResult(self._obs(), delta, done=False)

    def evaluate(self) -> dict[str, Any]:
        kind = self.task["kind"]
        if kind == "cart":
            ok = self.task["product"] in self.cart
        elif kind == "buy":
            ok = self.task["product"] in self.orders
        else:
            ok = self.answer is not None and self.task["answer"] in self.answer
        return {"success": float(ok), "required_irreversible": list(self.task["required_irreversible"])}

    def close(self) -> None:
        self.threads.add(threading.get_ident())
        self.closed = True
