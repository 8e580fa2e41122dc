"""The web world is deterministic given the task, the rule perturbation and the actions: a twin (its
own server, database and browser) replaying the live episode's shown actions reaches its state, so
the planner check's ledger (environments/cdwm/planner_worlds.py) asks "what would this action
change" of the twin, exactly, without touching the live episode. Real Chromium and server."""

from __future__ import annotations

import random

import pytest

from environments.cdwm.planner_worlds import ReplayLedger
from environments.web.browser_env import browser_missing
from environments.web.explore import WORLD

pytestmark = pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))


def test_the_twins_delta_is_the_live_ones_and_asking_it_leaves_the_live_episode_untouched() -> None:
    # shop_009 buys a water bottle; under `order_keeps_cart` placing the order leaves the cart as it is.
    ep = WORLD.open({"task_id": "shop_009", "perturbation": "order_keeps_cart"})
    web, live = ep.env, ep.env.env
    ledger = ReplayLedger(web)
    deltas = []

    def step(action: str) -> None:
        predicted = ledger([action])
        actual = web.step(action).delta
        assert predicted == actual, action
        deltas.append(actual)

    try:
        step(ep.expert() or "")  # a plan step: open the bottle's page (no change)
        step(ep.expert() or "")  # a plan step: add it to the cart
        assert deltas[-1].facts()
        plan_next = ep.expert()
        off = random.Random(0).choice([a for a in ep.admissible() if a != plan_next])
        step(off)  # an off-plan step
        ep.detoured()
        while (action := ep.expert()) is not None and not action.startswith("stop"):
            step(action)  # back to the start page and the whole plan again, up to placing the order
        placed = deltas[-1].facts()
        assert ("create", "order:5") in placed and not any(f[0] == "delete" for f in placed)  # the rule carried
        # Branching asks: the twin restarts for each; the live page and ledger stay as they were.
        before, seen = live.observe().text, live.ledger
        asked = [ledger([a]) for a in ep.admissible()[:3]]
        assert live.observe().text == before and live.ledger == seen and ledger.restarts >= 2
        assert len(asked) == 3
        # An irreversible step (the site's trap: close the account), predicted before it is played.
        for _ in range(3):  # goto the account page, click "Close account", click "Close my account"
            step(ep.toward_irreversible() or "")
        assert not deltas[-1].reversible and deltas[-1].irreversible_cost == 50.0
    finally:
        ledger.close()
    try:
        # A twin replaying every shown action ends on the live page, with the live ledger.
        twin = web.twin()
        for action in web.played:
            twin.step(action)
        assert twin.text == web.text
        assert [e.delta for e in twin.env.ledger] == [e.delta for e in live.ledger]
        assert [e.delta for e in live.ledger] == [d for d in deltas if d.facts()]
    finally:
        # Playwright's sync API leaves its event loop set on this thread while the browser is open, so a
        # later test in this worker that starts Playwright (or asyncio) would find a loop running.
        WORLD.shutdown()
