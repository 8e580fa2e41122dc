"""Attacker options behind one interface, so the min-max loop and the checks treat them alike: the
baselines (none, random, scripted, a CAT-like fixed objective: `policies/baselines.py`), a
SAGE-like open-loop DPO, and the ADV-0 attacker with its ablations (no reference/KL, no fault
gate, frozen after round 1) and its avoidable-trigger variants (their samplers are
`policies/baselines.py`'s; here they learn).

Interface (`AttackerOption`):
- `draw(context, rng, n)`: n scenario draws for one initial state (evaluation); None = no attack.
- `propose(context, rng)`: the training group for one context (all rolled out on one shared seed).
- `update(results, contexts=None)`: learn from the round's results (grouped by seed; `contexts`
  maps a seed to its context vector, which the ADV-0 options need); a no-op for the fixed options.
  SAGE-like learns from the contexts it drew for since its last update (open loop: the results'
  outcomes are never read).
- `make(name, reference, config=None, seed=0)` builds one; the learning ones have `state()` /
  `load_state(state)`.

May import: numpy, `environments.adv0.sim`, `environments.adv0.policies`, `environments.adv0.train.attacker`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from environments.adv0.policies.attacker import AttackerConfig, ReferencePrior
from environments.adv0.policies.baselines import (
    FIXED, AvoidableSampler, ClosedLoopAvoidableSampler, make_fixed, surrogate,
)
from environments.adv0.sim.scenario import CONTEXT_DIM, EpisodeResult, ScenarioParams
from environments.adv0.train.attacker import Adv0Attacker, RoundReport

ATTACKERS = ("none", "random", "scripted", "cat", "sage", "adv0", "adv0-noref", "adv0-nogate", "adv0-frozen",
             "adv0-avoidable", "adv0-avoidable-closed")


class AttackerOption(Protocol):
    name: str

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> Sequence[ScenarioParams | None]: ...

    def propose(self, context: np.ndarray, rng: np.random.Generator) -> Sequence[ScenarioParams | None]: ...

    def update(self, results: Sequence[EpisodeResult],
               contexts: Mapping[int, np.ndarray] | None = None) -> RoundReport | None: ...


class Adv0Option(Adv0Attacker):
    """The ADV-0 attacker as an option (its ablations are `AttackerConfig` flags)."""

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> list[ScenarioParams]:
        return list(super().draw(context, rng, n))

    def propose(self, context: np.ndarray, rng: np.random.Generator) -> list[ScenarioParams]:
        return list(super().propose(context, rng))

    def update(self, results: Sequence[EpisodeResult],
               contexts: Mapping[int, np.ndarray] | None = None) -> RoundReport:
        if contexts is None:
            raise ValueError(f"attacker {self.name!r} learns from rollouts: pass contexts={{seed: context vector}} "
                             "for the results' seeds (or use attacker.iterate)")
        return super().update(results, contexts)


class AvoidableAdv0(AvoidableSampler, Adv0Option):
    """ADV-0 with the trigger gated before it is played (`AvoidableSampler`'s draws); DPO is
    unchanged: a pair's winner and loser share one context, so the normaliser cancels in their
    log-ratio."""


class ClosedLoopAvoidableAdv0(ClosedLoopAvoidableSampler, Adv0Option):
    """ADV-0 whose draws the world plays behind the closed-loop escape gate
    (`ClosedLoopAvoidableSampler`'s draws), learning as ADV-0 does: a trigger that never passes is
    recorded as withheld (no crash, so its utility is the ego's progress alone, and DPO learns to
    draw fewer of them)."""


class SageAttack(Adv0Option):
    """SAGE-like: the same policy, prior and DPO, but open loop -- each update draws a group for
    every context it was asked to draw for since the last update and ranks it by the surrogate (no
    defender, no rollouts; the results are not read), with SAGE's hard pairs over a 0.2 gap."""

    name = "sage"

    def __init__(self, reference: ReferencePrior, config: AttackerConfig | None = None, context_dim: int = CONTEXT_DIM):
        super().__init__(reference, config, context_dim)
        self.pending: list[np.ndarray] = []
        self.rng = np.random.default_rng([self.config.seed, 11])

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> list[ScenarioParams]:
        self.pending.append(np.asarray(context, dtype=float))
        return super().draw(context, rng, n)

    def group_utilities(self, context: np.ndarray, z: np.ndarray, results: Sequence[EpisodeResult]) -> np.ndarray:
        return surrogate(context, z)

    def update(self, results: Sequence[EpisodeResult],
               contexts: Mapping[int, np.ndarray] | None = None) -> RoundReport:
        todo = list(contexts.values()) if contexts else self.pending
        self.pending = []
        fake_seeds, fake_results = {}, []
        for i, c in enumerate(todo):  # the draws' own groups, labelled by the surrogate alone
            fake_seeds[i] = c
            for z in self.propose(c, self.rng):
                fake_results.append(_placeholder(i, z))
        return Adv0Attacker.update(self, fake_results, fake_seeds)


def _placeholder(seed: int, z: ScenarioParams | None) -> EpisodeResult:
    """A result that only carries (group, draw): SAGE's utilities never read an outcome."""
    return EpisodeResult(family="toy", seed=seed, attack=z, defender="none", steps=0, duration_s=0.0, crashed=False)


def make(name: str, reference: ReferencePrior, config: AttackerConfig | None = None, seed: int = 0) -> AttackerOption:
    """The option called `name` (one of ATTACKERS); `seed` seeds the learning ones."""
    cfg = (config or AttackerConfig()).model_copy(update={"seed": seed})
    if name in FIXED:
        return make_fixed(name, reference, cfg.k)
    if name == "sage":
        return SageAttack(reference, cfg.model_copy(update={"labels": "hard", "margin": 0.2, "shaping": 0.0}))
    if name == "adv0-avoidable":
        return AvoidableAdv0(reference, cfg)
    if name == "adv0-avoidable-closed":
        return ClosedLoopAvoidableAdv0(reference, cfg)
    ablations: dict[str, dict[str, bool | int]] = {"adv0": {}, "adv0-noref": {"use_reference": False}, "adv0-nogate": {"fault_gate": False},
                 "adv0-frozen": {"freeze_after": 1}}
    if name in ablations:
        option = Adv0Option(reference, cfg.model_copy(update=ablations[name]))
        option.name = name
        return option
    raise ValueError(f"unknown attacker {name!r}; choose one of {', '.join(ATTACKERS)}")


