"""The Atari 100k protocol as data: its 26 games, their published random and human reference
scores, the emulator settings, and human-normalised score arithmetic.

Reference scores are the ones the Atari 100k papers (SimPLe, DER, CURL, DreamerV3, ...) normalise
with (random and human scores from the DQN / Rainbow literature):
HNS = (score - random) / (human - random).
"""

from __future__ import annotations

from harness.errors import HarnessError

STICKY_ACTION_P = 0.25  # repeat_action_probability (Machado et al. 2018)
FRAME_SKIP = 4
FULL_ACTION_SPACE = False
MAX_AGENT_STEPS = 100_000  # the "100k": agent steps = 400k frames at frame skip 4
MAX_FRAMES = MAX_AGENT_STEPS * FRAME_SKIP

# game id (ale-py ROM name) -> (random score, human score)
REFERENCE_SCORES: dict[str, tuple[float, float]] = {
    "alien": (227.8, 7127.7),
    "amidar": (5.8, 1719.5),
    "assault": (222.4, 742.0),
    "asterix": (210.0, 8503.3),
    "bank_heist": (14.2, 753.1),
    "battle_zone": (2360.0, 37187.5),
    "boxing": (0.1, 12.1),
    "breakout": (1.7, 30.5),
    "chopper_command": (811.0, 7387.8),
    "crazy_climber": (10780.5, 35829.4),
    "demon_attack": (152.1, 1971.0),
    "freeway": (0.0, 29.6),
    "frostbite": (65.2, 4334.7),
    "gopher": (257.6, 2412.5),
    "hero": (1027.0, 30826.4),
    "jamesbond": (29.0, 302.8),
    "kangaroo": (52.0, 3035.0),
    "krull": (1598.0, 2665.5),
    "kung_fu_master": (258.5, 22736.3),
    "ms_pacman": (307.3, 6951.6),
    "pong": (-20.7, 14.6),
    "private_eye": (24.9, 69571.3),
    "qbert": (163.9, 13455.0),
    "road_runner": (11.5, 7845.0),
    "seaquest": (68.4, 42054.7),
    "up_n_down": (533.4, 11693.2),
}
ATARI_100K_GAMES: tuple[str, ...] = tuple(REFERENCE_SCORES)


def check_game(game: str) -> str:
    """The game id, or one clear error naming it and the choices."""
    name = game.strip().lower().replace("-", "_")
    if name not in REFERENCE_SCORES:
        raise HarnessError(f"unknown Atari game {game!r}: choose one of the Atari 100k games "
                           f"{', '.join(ATARI_100K_GAMES)}")
    return name


def human_normalized(game: str, score: float) -> float:
    """(score - random) / (human - random) with the published reference scores of `game`."""
    random, human = REFERENCE_SCORES[check_game(game)]
    return (score - random) / (human - random)
