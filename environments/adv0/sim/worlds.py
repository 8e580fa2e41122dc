"""The worlds by family name, and the attacker's context of an episode: what the loop, the checks
and suite `adv0` all need to draw a one-shot attacker's scenario.

May import: numpy, `environments.adv0.sim`.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from environments.adv0.sim.scenario import context_vector


def world_for(family: str) -> ModuleType:
    """The world module that plays `family`: `toy` for the toy world, `highway` for the rest."""
    if family == "toy":
        from environments.adv0.sim import toy

        return toy
    from environments.adv0.sim import highway

    return highway


def context_of(world: object, family: str, seed: int) -> np.ndarray:
    """The attacker's context for an episode: the world's own `context(seed)` where it has one, else
    the initial view's neighbours (nearest first: lane offset, gap, speed difference). `world` is a
    world module or a wrapper of one (any object with `start_episode`)."""
    if family == "toy":
        from environments.adv0.sim.toy_sim import context

        return context(seed)
    episode = world.start_episode(family, seed, None)  # type: ignore[attr-defined]  # a module or its wrapper
    try:
        view = episode.view()
    finally:
        episode.close()
    slots = [(float(round(v.d / 4.0)), float(v.s), float(v.vx - view.ego_speed)) for v in view.neighbours]
    return context_vector(view.ego_speed, slots)
