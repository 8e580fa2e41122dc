"""The web world's rule perturbations (environments/web/rules.py): a perturbed request's ledger
delta differs from the trained sites' in exactly the changed rule's facts; collected rows are the
server's ledger; perturbed rows reach only the `heldout_rule` split; an unknown rule is one clear
error."""

from __future__ import annotations

import json
import random

import httpx
import pytest

from environments.cdwm.collect import SPLITS, CollectConfig, collect, parse_heldout, play_episode, split_types
from environments.cdwm.deltas import Delta, merge
from environments.web.explore import WORLD
from environments.web.world import WorldServer
from harness.errors import HarnessError


def ledger_delta(world: WorldServer, rule: str | None, before: list[str], path: str) -> Delta:
    """The ledger's one entry for POST `path` after the POSTs `before`, on a fresh database."""
    world.reset(rule)
    for p in before:
        assert httpx.post(world.base_url + p, data={"quantity": "1"}).status_code == 302  # (httpx: no redirect)
    since = world.last_ledger_id()
    assert httpx.post(world.base_url + path).status_code == 302
    entries = world.ledger_since(since)
    assert len(entries) == 1, [e.summary for e in entries]
    return entries[0].delta


def test_each_rule_changes_exactly_its_facts():
    world = WorldServer()
    world.start()
    try:
        # order_keeps_cart: placing the order no longer takes the line out of the cart.
        trained = ledger_delta(world, None, ["/shop/cart/add/3"], "/shop/checkout")
        perturbed = ledger_delta(world, "order_keeps_cart", ["/shop/cart/add/3"], "/shop/checkout")
        assert trained.facts() - perturbed.facts() == {
            ("delete", "cart_item:3"),
            ("rel-", "cart", "contains", "product:3"),
        }
        assert perturbed.facts() < trained.facts() and ("create", "order:5") in perturbed.facts()
        assert (perturbed.reversible, perturbed.irreversible_cost) == (trained.reversible, trained.irreversible_cost)
        # cancel_refunds_nothing: booking #1 (Standard) refunds nothing, so the whole fare is lost.
        trained = ledger_delta(world, None, [], "/travel/booking/1/cancel")
        perturbed = ledger_delta(world, "cancel_refunds_nothing", [], "/travel/booking/1/cancel")
        (refund,) = [a.after for a in trained.attributes if a.attribute == "refund"]
        assert trained.facts() - perturbed.facts() == {("attr", "booking:1", "refund", f"{refund:g}")}
        assert perturbed.facts() < trained.facts()
        assert (trained.irreversible_cost, perturbed.irreversible_cost) == (40.0, refund + 40.0)
        # Each reset sets the rule afresh: the next trained episode is the trained site again.
        assert ledger_delta(world, None, [], "/travel/booking/1/cancel") == trained
        # The server refuses an unknown rule itself too.
        bad = httpx.post(world.base_url + "/__reset?rule=free_shipping", headers={"X-Cdwm-Token": world._token})
        assert bad.status_code == 400 and "choose from order_keeps_cart" in bad.text
    finally:
        world.stop()


def test_an_unknown_rule_is_one_clear_error():
    message = "rule perturbation 'free_shipping': the web world has no such rule; choose from order_keeps_cart, "
    with pytest.raises(HarnessError, match=message):
        WORLD.spec("shop", 0, 0, "free_shipping")
    with pytest.raises(HarnessError, match=message):
        WorldServer().reset("free_shipping")  # refused before any request


def test_perturbed_episodes_play_tasks_that_press_the_changed_button():
    pairs = {s: split_types(WORLD, s, ("mail",)) for s in SPLITS}
    assert all(p is None for s in ("train", "validation", "heldout_task_type") for _, p in pairs[s])
    assert sorted(pairs["heldout_rule"]) == [("shop", "order_keeps_cart"), ("travel", "cancel_refunds_nothing")]
    shop = {WORLD.spec("shop", 2 * k, 0, "order_keeps_cart")["task_id"] for k in range(6)}
    assert shop == {"shop_009", "shop_022"}  # the tasks whose gold plan places an order


@pytest.mark.browser
def test_perturbed_rows_are_the_ledger_and_only_in_heldout_rule(tmp_path):
    held = parse_heldout(None, ("web",))
    try:
        out = tmp_path / "web"
        gold = {"off_plan_rate": 0.0, "irreversible_rate": 0.0}  # no detours: the fewest browser steps
        collect(out, CollectConfig(worlds=("web",), transitions=10, shard_size=10, heldout=held, **gold))
        rows = [json.loads(line) for f in sorted((out / "shards").glob("*.jsonl")) for line in f.open()]
        assert {r["split"] for r in rows if r["perturbation"]} == {"heldout_rule"}
        assert all(r["perturbation"] for r in rows if r["split"] == "heldout_rule")
        # A perturbed gold episode: its rows together are exactly the server's ledger of the episode,
        # and the changed rule is met (the order is placed, the cart line stays).
        config = CollectConfig(worlds=("web",), transitions=5, heldout=held, **gold)
        rows = play_episode(config, WORLD, WORLD.spec("shop", 0, 0, "order_keeps_cart"), random.Random(0), {}, 5)
        assert WORLD._web is not None  # the episode's browser and server, kept for the next episode
        ledger = merge([e.delta for e in WORLD._web.env.ledger])
        assert sorted(merge([Delta.model_validate_json(r["delta"]) for r in rows]).facts()) == sorted(ledger.facts())
        placed = [r for r in rows if any(f.startswith("create | order:") for f in r["facts"])]
        assert len(placed) == 1 and not any(f.startswith("delete | cart_item") for f in placed[0]["facts"])
    finally:
        WORLD.shutdown()
