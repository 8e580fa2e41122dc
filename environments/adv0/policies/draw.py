"""The attacker of one evaluation episode (suite `adv0`): a pure function of (attacker, family,
seed, trained state). The fixed options (none, random, scripted, CAT-like) need nothing more; the
trained ADV-0 attacker reads `attacker.json` from a round folder of `harness adv0 train`. The
closed-loop attacker (`closed_loop`) draws no scenario: `closed_loop_attacker` builds the policy
that acts every step (the reference policy, or a saved one from `attacker_state=FILE.json`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Literal, get_args

import numpy as np
from pydantic import JsonValue

from environments.adv0.policies.attacker import Adv0Sampler, reference_prior
from environments.adv0.policies.baselines import NoAttack, make_fixed, sampler_from_state
from environments.adv0.sim.closed_loop import ClosedLoopAttacker, ClosedLoopLimits, ClosedLoopPolicy
from environments.adv0.sim.scenario import ScenarioParams
from environments.adv0.sim.worlds import context_of, world_for
from harness.errors import HarnessError

AttackerName = Literal["none", "random", "scripted", "cat", "adv0", "closed_loop"]
ATTACKERS: tuple[str, ...] = get_args(AttackerName)


def draw_scenario(name: str, family: str, seed: int, state_dir: str | None = None) -> ScenarioParams | None:
    """The scenario attacker `name` draws for this episode (None: normal traffic)."""
    if name in ("none", "closed_loop"):  # closed_loop acts every step instead (closed_loop_attacker)
        return None
    option = _option(name, family, state_dir)
    context = context_of(world_for(family), family, seed)
    drawn: ScenarioParams | None = option.draw(context, np.random.default_rng([seed, 0xAD0]), 1)[0]
    return drawn


@lru_cache(maxsize=16)
def _option(name: str, family: str, state_dir: str | None) -> Adv0Sampler | NoAttack:
    if name == "adv0":  # a trained ADV-0 attacker; its avoidable-trigger variant keeps drawing only escapable triggers
        return sampler_from_state(_trained_state(state_dir))
    if name not in ATTACKERS:
        raise HarnessError(f"unknown attacker {name!r}; choose one of {', '.join(ATTACKERS)}")
    return make_fixed(name, reference_prior(family))


def closed_loop_attacker(seed: int, state_file: str | None = None,
                         limits: ClosedLoopLimits | None = None) -> ClosedLoopAttacker:
    """A fresh closed-loop attacker for one episode: its own generator seeded by the episode's seed
    (so the episode stays a pure function of its inputs), taking over the nearest vehicle."""
    policy = _closed_loop_policy(state_file)
    return ClosedLoopAttacker(policy, limits, slot=0, seed=[seed, 0xC10])


@lru_cache(maxsize=4)
def _closed_loop_policy(state_file: str | None) -> ClosedLoopPolicy:
    if state_file is None:
        return ClosedLoopPolicy.reference()
    try:
        return ClosedLoopPolicy.load(state_file)
    except ValueError as exc:
        raise HarnessError(f"--suite-option attacker_state={state_file}: {exc}") from exc


def check_state(state_dir: str | None) -> dict[str, JsonValue]:
    """The trained attacker's state; a ValueError naming the option and the fix otherwise."""
    if state_dir is None:
        raise ValueError("attacker=adv0 needs attacker_state=DIR: a round folder of `harness adv0 train` "
                         "(e.g. runs/adv0-train/<run_id>/rounds/0003)")
    file = Path(state_dir) / "attacker.json"
    if not file.is_file():
        raise ValueError(f"attacker_state={state_dir}: no attacker.json there (a round folder of `harness adv0 train`)")
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"attacker_state={state_dir}: attacker.json is not JSON ({exc})") from exc
    if not isinstance(state, dict) or not str(state.get("kind", "")).startswith("adv0") or "policy" not in state:
        kind = state.get("kind") if isinstance(state, dict) else None
        raise ValueError(f"attacker_state={state_dir}: attacker.json holds a {kind!r} attacker, not a trained ADV-0 one")
    return state


def _trained_state(state_dir: str | None) -> dict[str, JsonValue]:
    try:
        return check_state(state_dir)
    except ValueError as exc:
        raise HarnessError(f"--suite-option {exc}") from exc
