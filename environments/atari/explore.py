"""The Atari world's exploring policy for `harness cdwm collect` (environments/cdwm/collect.py):
a simple heuristic where the objects allow one (Breakout and Pong: keep the paddle under / level
with the ball, serving when it is out of play; Freeway: cross), seeded random play elsewhere (Boxing),
and, when the collector asks for an irreversible action, the heuristic turned round (move away from
the ball: a life lost, a point conceded). No model is called. Deltas are `AtariEnvironment`'s,
read from the console's RAM.

Rule perturbation `mirrored_controls`: left and right (Freeway: up and down) act the other way
round, so a key has a different effect than in training; the policy knows it and presses the key
that now does what it means.

It lives here, not in `cdwm/`, because the CDWM environment folders import `cdwm`, never the
reverse (the acyclic import contract); `cdwm/collect.py` names this module by string.
"""

from __future__ import annotations

import random
from typing import TypedDict

from environments.atari.env import AtariEnvironment
from harness.environment import StepResult

MIRROR = {
    "left": "right",
    "right": "left",
    "leftfire": "rightfire",
    "rightfire": "leftfire",
    "up": "down",
    "down": "up",
}


class MirroredControls(AtariEnvironment):
    """Rule perturbation: every key is played as its mirror image (`MIRROR`)."""

    def step(self, action: str) -> StepResult:
        key = " ".join(action.lower().split())
        return super().step(MIRROR.get(key, action))


class AtariSpec(TypedDict):
    """One collection episode: the game, the emulator's seed and the rule perturbation (or None)."""

    game: str
    seed: int
    perturbation: str | None


class AtariEpisode:
    def __init__(self, spec: AtariSpec) -> None:
        self.env = MirroredControls(filmstrip=False) if spec["perturbation"] else AtariEnvironment(filmstrip=False)
        self.observation = self.env.reset({"game": spec["game"], "seed": spec["seed"]})
        self.intent = f"Play {spec['game']}: score points, lose no life."
        self._mirrored = bool(spec["perturbation"])
        self._rng = random.Random(f"{spec['game']}:{spec['seed']}")

    def admissible(self) -> list[str]:
        return list(self.env.actions)

    def detoured(self) -> None:
        pass  # the heuristic reads the objects afresh every step

    def _key(self, meaning: str) -> str:
        """The key that does `meaning` under this episode's rules."""
        return MIRROR.get(meaning, meaning) if self._mirrored else meaning

    def _toward_ball(self, away: bool) -> str | None:
        objects = self.env.frame.objects
        game = self.env.game
        if game == "freeway":
            return None if away else self._key("up")
        if game not in ("breakout", "pong"):
            return None
        ball = objects.get("ball")
        if ball is None or (ball["x"], ball["y"]) == (0, 0):
            return None if away else "fire"  # serve
        if game == "breakout":  # the paddle moves in x; `right` raises x
            gap = ball["x"] - objects["paddle"]["x"]
            toward, back = ("right", "left") if gap > 0 else ("left", "right")
        else:  # pong: the player moves in y; `right` lowers y (up the screen)
            gap = ball["y"] - objects["player"]["y"]
            toward, back = ("left", "right") if gap > 0 else ("right", "left")
        if away:
            return self._key(back)
        return self._key(toward) if abs(gap) > 1 else "noop"

    def expert(self) -> str | None:
        move = self._toward_ball(away=False)
        return move if move is not None else self._rng.choice(self.env.actions)

    def toward_irreversible(self) -> str | None:
        return self._toward_ball(away=True)

    def close(self) -> None:
        self.env.close()


class AtariWorld:
    name = "atari"
    task_types = ("breakout", "pong", "freeway", "boxing")
    default_heldout = ("boxing",)
    perturbations = {"mirrored_controls": ("breakout", "pong", "freeway")}
    max_steps = 50

    def spec(self, task_type: str, index: int, seed: int, perturbation: str | None) -> AtariSpec:
        # The collector gives train even task indices and validation odd ones: disjoint emulator seeds.
        return {"game": task_type, "seed": (index + seed * 1_000_003) % (1 << 31), "perturbation": perturbation}

    def open(self, spec: AtariSpec) -> AtariEpisode:
        return AtariEpisode(spec)


WORLD = AtariWorld()
