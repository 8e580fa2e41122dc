"""The escape gates measured (`harness adv0 gate`): the same draws on the same seeds played three
ways, with the IDM/MOBIL ego at its default parameters, and each arm's crashes split by fault.

- `none`: every draw played as drawn.
- `open-loop`: only the draws `escape.escape_exists` keeps from the seed's initial context (the
  option `adv0-avoidable`); the others are not played. An episode is a pure function of (seed, z),
  so the kept draws' episodes are the `none` arm's own: they are read from it, not replayed.
- `closed-loop`: every draw played with `escape_gate=True` (the option `adv0-avoidable-closed`):
  the world fires only at a step whose state passes `escape.escape_at_firing`.

Each arm also counts its fired triggers that the closed-loop predicate judged unescapable at the
firing step (the worlds record the predicate for ungated triggers too) and the crashes on them:
with the closed-loop gate there are none by construction; in the other arms they show how much of
each fault class the predicate would have withheld.

Toy world: every draw of the grid (`scenario.all_scenarios`) on each seed. Highway: one uniform draw
per seed (`loop.held_out_attack` over the training manoeuvres), seeds `first_seed + i`.

May import: numpy, pydantic, `environments.adv0`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from environments.adv0.policies.baselines import _slots
from environments.adv0.sim.escape import escape_exists
from environments.adv0.sim.scenario import TRAIN_MANOEUVRES, IdmParams, ScenarioParams, all_scenarios

ARMS = ("none", "open-loop", "closed-loop")


class ArmCounts(BaseModel):
    """One arm's episodes; `defender` counts defender failures (defender or shared fault)."""

    arm: str
    draws: int
    played: int
    fired: int
    withheld: int
    crashed: int
    defender: int
    attacker: int
    other: int
    fired_unescapable: int  # fired at a step the closed-loop predicate judged unescapable
    defender_unescapable: int  # ... and then a defender failure
    attacker_unescapable: int  # ... and then an attacker-at-fault crash


def _counts(arm: str, draws: int, played: np.ndarray, fired: np.ndarray, withheld: np.ndarray, crashed: np.ndarray,
            defender: np.ndarray, attacker: np.ndarray, unescapable: np.ndarray) -> ArmCounts:
    p = played.astype(bool)

    def n(x: np.ndarray) -> int:
        return int(np.count_nonzero(p & x.astype(bool)))

    u = fired.astype(bool) & unescapable.astype(bool)
    return ArmCounts(arm=arm, draws=draws, played=int(p.sum()), fired=n(fired), withheld=n(withheld),
                     crashed=n(crashed), defender=n(defender), attacker=n(attacker),
                     other=n(crashed.astype(bool) & ~defender.astype(bool) & ~attacker.astype(bool)),
                     fired_unescapable=n(u), defender_unescapable=n(u & defender.astype(bool)),
                     attacker_unescapable=n(u & attacker.astype(bool)))


def toy_gate_split(seeds: Sequence[int], idm: IdmParams | None = None) -> list[ArmCounts]:
    """The three arms on every draw of the grid on each toy seed."""
    from environments.adv0.sim import toy
    from environments.adv0.sim.toy_sim import FAULT_CODES, context

    z = all_scenarios()
    kept = np.stack([escape_exists(c[0] * 30.0, _slots(c[None])[0], z) for c in (context(s) for s in seeds)])
    out = []
    for gated in (False, True):
        o = toy.evaluate(seeds, z, idm, gate=gated, record_escape=True)
        defender, attacker = o.fault == FAULT_CODES.index("defender"), o.fault == FAULT_CODES.index("attacker")
        unescapable = o.fired & ~o.escape_at_fire
        arms = [("closed-loop", np.ones_like(kept))] if gated else [("none", np.ones_like(kept)), ("open-loop", kept)]
        for arm, played in arms:
            out.append(_counts(arm, len(z) * len(seeds), played, o.fired, o.withheld, o.crashed,
                               defender, attacker, unescapable))
    return sorted(out, key=lambda c: ARMS.index(c.arm))


def highway_draws(n: int, first_seed: int = 9_000_000) -> list[tuple[int, ScenarioParams]]:
    from environments.adv0.train.loop import held_out_attack

    return [(first_seed + i, held_out_attack(first_seed + i, TRAIN_MANOEUVRES)) for i in range(n)]


def highway_gate_split(n: int, first_seed: int = 9_000_000, family: str = "highway",
                       idm: IdmParams | None = None) -> list[ArmCounts]:
    """The three arms on `n` uniform draws, one per highway-env seed."""
    from environments.adv0.sim import highway
    from environments.adv0.sim.worlds import context_of

    draws = highway_draws(n, first_seed)
    contexts = [context_of(highway, family, seed) for seed, _ in draws]
    kept = np.array([escape_exists(c[0] * 30.0, _slots(c[None])[0], np.array([z.index()]))[0]
                     for c, (_, z) in zip(contexts, draws)])
    out = []
    for gated in (False, True):
        rows = []
        for seed, z in draws:
            episode = highway.start_episode(family, seed, z.model_copy(update={"escape_gate": gated}),
                                            planner=idm or IdmParams())
            try:
                while not episode.done:
                    episode.step(None)
                r = episode.result()
                att = episode.attacker
                said = None if att is None else att.escape_at_fire
            finally:
                episode.close()
            fault = r.collision.fault if r.collision is not None else None
            rows.append((r.attack_fired, r.trigger_withheld, r.crashed, r.defender_failure,
                         r.crashed and fault == "attacker", said is False))
        a = np.array(rows, dtype=bool).T
        arms = [("closed-loop", np.ones(n, bool))] if gated else [("none", np.ones(n, bool)), ("open-loop", kept)]
        for arm, played in arms:
            out.append(_counts(arm, n, played, *a))
    return sorted(out, key=lambda c: ARMS.index(c.arm))


def render(rows: Sequence[ArmCounts]) -> str:
    head = ("arm", "draws", "played", "fired", "withheld", "crashed", "defender", "attacker", "other",
            "fired-unesc", "def-unesc", "att-unesc")
    lines = ["  ".join(f"{h:>11}" for h in head)]
    for r in rows:
        values = list(r.model_dump().values())
        lines.append("  ".join(f"{v!s:>11}" for v in values))
    return "\n".join(lines)
