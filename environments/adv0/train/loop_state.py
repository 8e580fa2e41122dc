"""What a min-max run is and how it is kept: its config (`LoopConfig`), one round's state
(`RoundState`, with its evaluation rows `EvalRow`), and the run folder --
`<run-dir>/adv0-train/<run_id>/config.json` plus `rounds/NNNN/` per complete round, each written
into a hidden staging folder, `done` last, then renamed into place (see `loop.py`).

May import: the standard library, pydantic, `harness` and `environments.adv0` (metrics).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from environments.adv0.metrics import EpisodeScores
from harness.errors import HarnessError

DEFENDERS = ("idm", "dqn", "llm")
ATTACKERS = ("adv0", "none", "random", "scripted", "cat", "sage", "closed_loop")
CLOSED_LOOP_ABLATIONS = ("none", "no-kl", "no-fault-gate", "frozen")  # the closed-loop attacker's config flags
ABLATIONS = ("none", "no-kl", "no-fault-gate", "frozen", "avoidable", "avoidable-closed")
LOOP_FAMILIES = ("highway", "toy")
TRAIN_DIR = "adv0-train"
Split = Literal["normal", "attack", "held_out"]


class LoopConfig(BaseModel):
    """Everything a run is a function of (written to config.json)."""

    defender: Literal["idm", "dqn", "llm"] = "idm"
    attacker: Literal["adv0", "none", "random", "scripted", "cat", "sage", "closed_loop"] = "adv0"
    ablation: Literal["none", "no-kl", "no-fault-gate", "frozen", "avoidable", "avoidable-closed"] = "none"
    family: Literal["highway", "toy"] = "highway"
    rounds: int = Field(3, ge=1)
    episodes: int = Field(20, ge=1, description="evaluation episodes per split (normal, attack) and round")
    held_out_episodes: int = Field(6, ge=0, description="evaluation episodes per held-out condition and round")
    seed: int = Field(0, ge=0, le=200)
    contexts: int = Field(8, ge=1, le=900, description="attacker training contexts (seeds) per round")
    k: int = Field(8, ge=2, description="ADV-0: distinct candidates per context")
    dpo_steps: int | None = Field(None, ge=1, description="ADV-0: DPO steps per round (default: AttackerConfig's)")
    scenarios: int = Field(16, ge=1, le=900, description="attacker draws the defender trains on per round")
    cem_generations: int = Field(2, ge=1)
    cem_population: int = Field(8, ge=2)
    cem_elite_frac: float = Field(0.25, gt=0, le=1)
    dqn_steps: int = Field(1000, ge=1, description="DQN fine-tuning steps per round")
    dqn_ratio: float = Field(0.5, ge=0, le=1, description="DQN: share of attacked episodes while fine-tuning")
    dqn_checkpoint: str | None = Field(None, description="DQN start (default: the cached pretraining)")
    model: str = Field("local/smollm2-135m", description="the LLM driver's model spec")

    @model_validator(mode="after")
    def _closed_loop_fits(self) -> "LoopConfig":
        """The closed-loop attacker acts in highway-env (the toy world plays one-shot scripts; its
        closed-loop game is `toy_game.py`) and has the ablations that are flags of its config."""
        if self.attacker == "closed_loop":
            if self.family != "highway":
                raise ValueError("--attacker closed_loop needs --family highway (the toy world plays one-shot "
                                 "scripts; the enumerable closed-loop game is environments/adv0/checks/toy_game.py)")
            if self.ablation not in CLOSED_LOOP_ABLATIONS:
                raise ValueError(f"--ablation {self.ablation} does not apply to --attacker closed_loop; use one of "
                                 f"{', '.join(CLOSED_LOOP_ABLATIONS)}")
        return self


class EvalRow(EpisodeScores):
    round: int
    split: Split
    seed: int


class RoundState(BaseModel):
    round: int
    attacker: dict[str, Any]
    defender: dict[str, Any]
    attacker_report: dict[str, Any] = Field(default_factory=dict)
    defender_report: dict[str, Any] = Field(default_factory=dict)
    rows: list[EvalRow] = Field(default_factory=list)
    cpu_s: dict[str, float] = Field(default_factory=dict)  # attacker, defender, eval, per CEM generation in the report
    wall_s: float = 0.0


def round_name(round_: int) -> str:
    return f"{round_:04d}"


def new_run_id(cfg: LoopConfig) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    ablation = "" if cfg.ablation == "none" else f"-{cfg.ablation}"
    return f"adv0-{cfg.defender}-{cfg.attacker}{ablation}-{cfg.family}-{stamp}-{secrets.token_hex(2)}"


def run_folder(run_dir: Path, run_id: str) -> Path:
    return Path(run_dir) / TRAIN_DIR / run_id


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def complete_rounds(folder: Path) -> list[int]:
    """The complete rounds, in order: folders `rounds/NNNN` holding `done`, counted from 1 while
    there is no gap."""
    rounds_dir = folder / "rounds"
    found = sorted(int(p.name) for p in rounds_dir.glob("[0-9][0-9][0-9][0-9]") if (p / "done").is_file()) \
        if rounds_dir.is_dir() else []
    out = []
    for i, r in enumerate(found, start=1):
        if r != i:
            break
        out.append(r)
    return out


def clean_partial(folder: Path) -> list[str]:
    """Delete what is not part of the run's complete history: a killed round's hidden staging
    folder, a round folder without `done`, or one after a gap (neither is ever produced by a
    rename; a hand-edited run may hold them). Returns their names."""
    rounds_dir = folder / "rounds"
    keep = {round_name(r) for r in complete_rounds(folder)}
    removed = []
    if rounds_dir.is_dir():
        for p in sorted(rounds_dir.iterdir()):
            if p.name not in keep:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
                removed.append(p.name)
    return removed


def save_round(folder: Path, state: RoundState, staging: Path) -> Path:
    """Write `state` into `staging` (where the defender already put its files), `done` last, then
    rename it into place: the round's folder appears complete or not at all."""
    (staging / "attacker.json").write_text(json.dumps(state.attacker), encoding="utf-8")
    _write_atomic(staging / "state.json", state.model_dump_json())
    _write_atomic(staging / "done", json.dumps({"round": state.round, "at": time.time()}))
    _fsync_dir(staging)
    final = folder / "rounds" / round_name(state.round)
    os.replace(staging, final)
    _fsync_dir(final.parent)
    return final


def load_round(folder: Path, round_: int) -> RoundState:
    path = folder / "rounds" / round_name(round_) / "state.json"
    return RoundState.model_validate_json(path.read_text(encoding="utf-8"))


def load_rows(folder: Path) -> list[EvalRow]:
    """Every complete round's evaluation rows, in round order."""
    return [row for r in complete_rounds(folder) for row in load_round(folder, r).rows]


def start_run(cfg: LoopConfig, run_dir: Path) -> tuple[str, Path]:
    run_id = new_run_id(cfg)
    folder = run_folder(run_dir, run_id)
    (folder / "rounds").mkdir(parents=True, exist_ok=False)
    _write_atomic(folder / "config.json", cfg.model_dump_json(indent=1))
    return run_id, folder


def open_run(run_dir: Path, run_id: str, rounds: int | None = None) -> tuple[LoopConfig, Path]:
    """A run to resume: its saved config (with `rounds` replaced when given)."""
    folder = run_folder(run_dir, run_id)
    if not (folder / "config.json").is_file():
        known = sorted(p.name for p in (Path(run_dir) / TRAIN_DIR).glob("adv0-*")) if (Path(run_dir) / TRAIN_DIR).is_dir() else []
        hint = f"; runs here: {', '.join(known[-5:])}" if known else ""
        raise HarnessError(f"--resume {run_id}: no ADV-0 training run at {folder}{hint}")
    cfg = LoopConfig.model_validate_json((folder / "config.json").read_text(encoding="utf-8"))
    if rounds is not None and rounds != cfg.rounds:
        cfg = cfg.model_copy(update={"rounds": rounds})
        _write_atomic(folder / "config.json", cfg.model_dump_json(indent=1))
    return cfg, folder
