"""Suite `cdwm-atari`: Atari 100k games in ale-py played by the ReAct baseline or the CDWM agent
(`--agent react|cdwm`), scored by the episode's game score, its human-normalised score (the
protocol's official figure) and CDWM's metrics over ground-truth object deltas.

One sample = one (game, seed) episode. The default is small (Breakout and Pong, 2 seeds each,
20 agent steps of 4 emulator steps each) so tests and `--limit` runs are quick; `games=all` and a
large `max_steps` give the protocol's 26 games (the 100k cap: 100,000 emulator steps per episode).
Success = the episode scored (return > 0); a truncated episode's human-normalised score is only
comparable to the published ones when episodes run to the game's end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from environments.atari import games as protocol
from environments.atari.env import WORLD_MODEL_HELP_TEXT, AtariEnvironment
from environments.cdwm.episode import EpisodeScores, EpisodeTask, EpisodeTranscript, Evaluation
from environments.cdwm.suite_base import CdwmOptions, GeneratedCdwmSuite
from harness.environment import ALL, NONE, ActionMask, Environment
from harness.errors import HarnessError
from harness.records import Metric, SampleRecord
from harness.stats import ratio_metric
from harness.suite import Sample, SampleContext, Score, Transcript, dump_payload

DEFAULT_GAMES = "breakout,pong"
# The world moves whatever the agent does (a noop can lose a life), so every game action may
# touch every dimension; only stopping changes nothing.
ATARI_MASK = ActionMask({"stop": NONE, "noop": ALL}, name="atari")


class AtariOptions(CdwmOptions):
    max_steps: int = Field(20, ge=1, description="agent steps per episode (each holds its action action_repeat emulator steps)")
    games: str = Field(DEFAULT_GAMES, description="'all' (the 26 Atari 100k games) or a comma list of game ids")
    seeds: int = Field(2, ge=1, description="episodes (seeds 0..seeds-1) per game")
    action_repeat: int = Field(4, ge=1, description="emulator steps (of 4 frames) each agent action is held")
    sticky: float = Field(protocol.STICKY_ACTION_P, ge=0.0, le=1.0, description="sticky-action probability (protocol: 0.25)")
    image: bool = Field(False, description="also send the screen as an image with each observation")
    filmstrip: bool = Field(True, description="keep a strip of frames around each irreversible event (transcript pictures)")

    @field_validator("games")
    @classmethod
    def _known_games(cls, value: str) -> str:
        game_list(value)
        return value


def game_list(spec: str) -> list[str]:
    if spec.strip() in ("", "all"):
        return list(protocol.ATARI_100K_GAMES)
    try:
        return [protocol.check_game(g) for g in spec.split(",") if g.strip()]
    except HarnessError as exc:
        raise ValueError(str(exc)) from None


class AtariTask(EpisodeTask):
    """One (game, seed) episode."""

    game: str
    seed: int
    required_irreversible: list[str] = []  # no irreversible change is ever required


class AtariEvaluation(Evaluation):
    game: str | None = None
    score: float = 0.0  # the episode's game score
    human_normalized_score: float = 0.0


class AtariTranscript(EpisodeTranscript):
    evaluation: AtariEvaluation
    pictures: list[dict[str, str]] = Field(default_factory=list)  # filmstrips, shown by `harness view`


class AtariScores(EpisodeScores):
    game: str | None = None
    game_score: float = 0.0
    human_normalized_score: float = 0.0


class CdwmAtariSuite(GeneratedCdwmSuite[AtariTask, AtariTranscript, AtariScores]):
    name = "cdwm-atari"
    version = "0.1.0"
    description = ("CDWM Atari 100k: ale-py games (sticky actions, frame skip 4) with object deltas from RAM, "
                   "human-normalised score (--agent react|cdwm)")
    mask = ATARI_MASK
    episode_source = "ale-py:atari100k"
    choose_episodes = "choose (game, seed) pairs with --suite-option games=... --suite-option seeds=N"
    world_model_help = WORLD_MODEL_HELP_TEXT
    Options = AtariOptions
    options: AtariOptions
    transcript_type = AtariTranscript
    scores_type = AtariScores

    def __init__(self, options: AtariOptions | None = None) -> None:
        super().__init__(options)
        self._envs: dict[str, AtariEnvironment] = {}

    def episode_tasks(self) -> list[AtariTask]:
        return [AtariTask(task_id=f"{g}-{s}", game=g, seed=s,
                          intent=f"Play {g.replace('_', ' ')}: score as many points as you can without losing a life "
                                 "or a point.")
                for g in game_list(self.options.games) for s in range(self.options.seeds)]

    def make_env(self, sample: Sample, judge: Callable[[str], str] | None) -> Environment:
        o = self.options
        env = AtariEnvironment(action_repeat=o.action_repeat, filmstrip=o.filmstrip, image=o.image, sticky=o.sticky)
        self._envs[sample.id] = env
        return env

    async def _run_episode(self, sample: Sample, ctx: SampleContext) -> Transcript:
        try:
            transcript = await super()._run_episode(sample, ctx)
        finally:
            env = self._envs.pop(sample.id, None)
        pictures = list(env.filmstrips) if env is not None else []
        transcript.output = AtariTranscript.model_validate(dump_payload(transcript.output) | {"pictures": pictures})
        return transcript

    async def _score_episode(self, sample: Sample, transcript: AtariTranscript, ctx: SampleContext) -> Score:
        ev = transcript.evaluation
        return Score(values=AtariScores(**dict(self.episode_scores(transcript)), game=ev.game, game_score=ev.score,
                                        human_normalized_score=ev.human_normalized_score))

    def scores_on_failure(self, sample: Sample[AtariTask]) -> dict[str, Any]:
        game = sample.data.game
        scores = AtariScores(**dict(self.failed_scores()), game=game,
                             human_normalized_score=protocol.human_normalized(game, 0.0))
        return scores.model_dump(mode="json")  # as recorded

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        out = super().metrics(records, seed)
        scores = [self.read_scores(r.scores) for r in records]
        rows = np.array([[s.human_normalized_score, s.game_score, 1.0] for s in scores], dtype=float).reshape(-1, 3)
        out["human_normalized_score"] = ratio_metric(rows, lambda t: t[0], lambda t: t[2], seed=seed)
        out["game_score"] = ratio_metric(rows, lambda t: t[1], lambda t: t[2], seed=seed)
        return out
