"""The household world's observation -> delta reader (reader.py), for the generative baseline: on the
real engine, reading the status line and reply before and after each collected transition gives the
ledger's delta; on written observations, what the reply alone could not say (where a `go to` started,
the temperature a `heat` removes) comes from the status, and what cannot be read is None."""

from __future__ import annotations

from typing import Any

from environments.cdwm.collect import NEXT, NEXT_STATUS, STATUS, CollectConfig, Shard, parse_heldout, play_shard
from environments.cdwm.generative_model import observe
from environments.household.reader import observation_delta, read_status
from harness.environment import Delta

HOUSEHOLD = ("household",)


def household_rows(n: int, split: str = "heldout_task_type", irreversible_rate: float = 0.8) -> list[Any]:
    """`n` collected rows; by default a shard that slices a lettuce at its third step and then slices it
    again (admissible, and no change)."""
    cfg = CollectConfig(worlds=HOUSEHOLD, transitions=n, seed=0, irreversible_rate=irreversible_rate,
                        heldout=parse_heldout(None, HOUSEHOLD))
    return list(play_shard(cfg, Shard("household", split, 0, n)))


def test_reading_the_true_observations_reproduces_the_ledgers_delta():
    rows = household_rows(16)
    assert {r["reversible"] for r in rows} == {True, False}  # a slice is among them
    assert any(r["action"].startswith("slice") and r["reversible"] for r in rows)  # and a slice that changes nothing
    for r in rows:
        truth = Delta.model_validate_json(r["delta"])
        read = observation_delta(observe(r["observation"], r[STATUS]), observe(r[NEXT], r[NEXT_STATUS]))
        assert read is not None and read.facts() == truth.facts(), (r["action"], r[STATUS], r[NEXT_STATUS], r[NEXT])
        assert (read.reversible, read.irreversible_cost) == (truth.reversible, truth.irreversible_cost)
        assert r[STATUS] not in r["observation"]  # the policy reads the reply only
    for a, b in zip(rows, rows[1:]):
        if a["episode"] == b["episode"]:
            assert (a[NEXT], a[NEXT_STATUS]) == (b["observation"], b[STATUS])


def _obs(status: str, reply: str) -> str:
    return observe(reply, f"Status: {status}")


def _facts(delta: Delta | None) -> set[tuple[str, ...]]:
    assert delta is not None
    return delta.facts()


def test_the_status_says_what_the_reply_cannot():
    # after `inventory` the reply does not say where the agent is; the status does
    before = _obs("at fridge 1; carrying apple 1 (cool)", "You are carrying: a apple 1.")
    went = _obs("at microwave 1; carrying apple 1 (cool)", "You arrive at microwave 1. The microwave 1 is closed.")
    assert _facts(observation_delta(before, went)) == {("rel+", "agent", "at", "microwave 1"),
                                                        ("rel-", "agent", "at", "fridge 1")}
    # heating a cool apple also ends its coolness; an apple can be cooled again, so it stays reversible
    heated = observation_delta(went, _obs("at microwave 1; carrying apple 1 (hot)",
                                          "You heat the apple 1 using the microwave 1."))
    assert _facts(heated) == {("attr", "apple 1", "hot", "true"), ("attr", "apple 1", "cool", "false")}
    assert heated is not None and heated.reversible
    # heating a hot apple again changes nothing
    hot = _obs("at microwave 1; carrying apple 1 (hot)", "You heat the apple 1 using the microwave 1.")
    assert _facts(observation_delta(hot, hot)) == set()


def test_irreversible_changes_are_judged_by_the_ledgers_rule():
    at_fridge = _obs("at fridge 1; carrying lettuce 1", "You arrive at fridge 1. The fridge 1 is closed.")
    cooled = observation_delta(at_fridge, _obs("at fridge 1; carrying lettuce 1 (cool)",
                                               "You cool the lettuce 1 using the fridge 1."))
    assert cooled is not None and not cooled.reversible and cooled.irreversible_cost == 1.0  # lettuce cannot be heated
    knife = _obs("at countertop 1; carrying knife 1", "You pick up the knife 1 from the countertop 1.")
    sliced = observation_delta(knife, _obs("at countertop 1; carrying knife 1; sliced bread 1",
                                           "You sliced the bread 1 with the knife 1."))
    assert _facts(sliced) == {("attr", "bread 1", "sliced", "true")}  # the reply alone says so ...
    assert sliced is not None and not sliced.reversible
    knife_by_slice = _obs("at countertop 1; carrying knife 1; sliced bread 1", "You pick up the knife 1 from the countertop 1.")
    again = _obs("at countertop 1; carrying knife 1; sliced bread 1", "You sliced the bread 1 with the knife 1.")
    assert _facts(observation_delta(knife_by_slice, again)) == set()  # ... but the same reply again changes nothing
    opened = observation_delta(knife, _obs("at countertop 1; carrying knife 1",
                                           "You open the drawer 1. The drawer 1 is open. In it, you see nothing."))
    assert _facts(opened) == {("attr", "drawer 1", "open", "true")}
    # a lamp turned on is no change, as in the ledger (the engine never records one as on)
    lamp = _obs("at sidetable 1; carrying book 1", "You turn on the desklamp 1.")
    assert _facts(observation_delta(lamp, lamp)) == set()
    nothing = _obs("at sidetable 1; carrying book 1", "Nothing happens.")  # an inadmissible command
    assert _facts(observation_delta(lamp, nothing)) == set()


def test_what_cannot_be_read_is_none():
    here = _obs("at countertop 1; carrying nothing", "You arrive at countertop 1.")
    assert observation_delta("You arrive at countertop 1.", here) is None  # no status: not a state
    assert observation_delta(here, "Status: somewhere\nYou arrive at fridge 1.") is None
    # a pick-up the status does not show
    assert observation_delta(here, _obs("at countertop 1; carrying nothing",
                                        "You pick up the apple 1 from the countertop 1.")) is None
    # a heated object of a type the catalog does not know: whether it can be undone is unknown
    holding = _obs("at microwave 1; carrying gizmo 1", "You arrive at microwave 1.")
    assert observation_delta(holding, _obs("at microwave 1; carrying gizmo 1 (hot)",
                                           "You heat the gizmo 1 using the microwave 1.")) is None
    # a slice the status does not show
    assert observation_delta(here, _obs("at countertop 1; carrying nothing", "You sliced the bread 1 with the knife 1.")) is None
    assert read_status(here) == ("countertop 1", None, frozenset(), frozenset())
    assert read_status("Status: at fridge 1; carrying apple 1 (clean, hot); sliced bread 1, tomato 2") == (
        "fridge 1", "apple 1", frozenset({"clean", "hot"}), frozenset({"bread 1", "tomato 2"}))
