"""The science world's rule perturbation `put_closes` (a closable container something is moved into
closes): the changed step's delta differs from the trained world's in exactly the changed rule's
fact and is the simulator's own state; perturbed rows only reach the `heldout_rule` split; an unknown rule is
one clear error; the JVM runs with the constant identity hash that makes a seed reproducible."""

from __future__ import annotations

import pytest

from environments.cdwm.collect import SPLITS, split_types
from environments.science.deltas import parse_state
from environments.science.env import JVM_OPTIONS, ScienceEnvironment, check_rule
from environments.science.explore import WORLD
from harness.errors import HarnessError

# The move is ambiguous (two oranges); "1" picks the one in the inventory.
ACTIONS = ["teleport to kitchen", "open fridge", "move orange to fridge", "1"]


def facts(env: ScienceEnvironment, perturbation: str | None) -> list[set[tuple[str, ...]]]:
    env.reset({"task_name": "find-living-thing", "variation": 0, "perturbation": perturbation})
    return [set(env.step(a).delta.facts()) for a in ACTIONS]


def test_put_closes_changes_what_a_move_does_and_nothing_else():
    with ScienceEnvironment() as env:
        trained = facts(env, None)
        perturbed = facts(env, "put_closes")
        # The simulator's own tree, read afresh, has the fridge closed with the orange inside.
        sw = env._sw
        state = parse_state(sw.getObjectTree(), str(sw.server.freeActionLook()))
        fridge = {u for u, t in state.things.items() if t.name == "fridge"}
        assert {str(state.things[u].attrs["is open"]).lower() for u in fridge} == {"false"}
        assert any(t.name == "orange" and t.parent in fridge for t in state.things.values())
        # The identity hash is constant in this JVM (JVM_OPTIONS), whatever object is asked.
        jvm = sw._gateway.jvm
        assert "-XX:hashCode=2" in JVM_OPTIONS
        assert {jvm.java.lang.System.identityHashCode(jvm.java.lang.Object()) for _ in range(3)} == {1}
    # Before the move the two worlds agree; the move differs in exactly the fridge closing.
    assert trained[:3] == perturbed[:3] and ("rel+", "orange", "in", "fridge") in trained[3]
    assert perturbed[3] - trained[3] == {("attr", "fridge", "is open", "false")}
    assert trained[3] <= perturbed[3]


def test_perturbed_rows_only_in_the_heldout_rule_split():
    held = WORLD.default_heldout
    pairs = {s: split_types(WORLD, s, held) for s in SPLITS}
    assert all(p is None for s in ("train", "validation", "heldout_task_type") for _, p in pairs[s])
    assert pairs["heldout_rule"] and {p for _, p in pairs["heldout_rule"]} == {"put_closes"}
    assert not {t for t, _ in pairs["heldout_rule"]} & set(held)  # training task types, rule changed


def test_an_unknown_rule_is_one_clear_error():
    assert check_rule(None) is None and check_rule("put_closes") == "put_closes"
    with pytest.raises(
        HarnessError,
        match="rule perturbation 'melts_neighbours': the science world has no such rule; choose from put_closes",
    ):
        check_rule("melts_neighbours")
    with pytest.raises(HarnessError, match="'melts_neighbours'"):
        WORLD.spec("boil", 0, 0, "melts_neighbours")  # refused before any JVM starts
