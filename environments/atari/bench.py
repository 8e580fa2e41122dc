"""`harness bench cdwm-visual`: the Atari world's own cost, no model -- emulator steps per second
and the object-delta extraction's overhead relative to the emulator's own step (target <= 10%),
with the filmstrip's screen copies reported apart (they are optional).

Each game plays a fixed pseudo-random action sequence (seeded) at the protocol's settings.
"""

from __future__ import annotations

import random
import time
from typing import TypedDict

from environments.atari.env import AtariEnvironment
from environments.atari.objects import EXTRACTORS


class VisualBench(TypedDict):
    """`run_visual_bench`'s result: the settings and, per game, its timings and overheads."""

    steps: int
    seed: int
    filmstrip: bool
    action_repeat: int
    games: dict[str, dict[str, float]]


def run_visual_bench(games: tuple[str, ...] = tuple(EXTRACTORS), steps: int = 2000,
                     seed: int = 0, filmstrip: bool = False, action_repeat: int = 4) -> VisualBench:
    rows: dict[str, dict[str, float]] = {}
    for game in games:
        env = AtariEnvironment(action_repeat=action_repeat, filmstrip=filmstrip)
        rng = random.Random(seed)
        try:
            env.reset({"game": game, "seed": seed})
            in_step = 0.0
            t_start = time.perf_counter()
            while env.timing["env_steps"] < steps:
                t0 = time.perf_counter()
                done = env.step(rng.choice(env.actions)).done
                in_step += time.perf_counter() - t0
                if done:
                    env.reset({"game": game, "seed": seed})  # resets are not steps: left out of in_step
            wall = time.perf_counter() - t_start
        finally:
            env.close()
        t = env.timing
        rows[game] = {"env_steps": t["env_steps"], "steps_per_s": t["env_steps"] / wall,
                      "emulator_ms": 1000 * t["emulator_s"] / t["env_steps"],
                      "extract_ms": 1000 * t["extract_s"] / t["env_steps"],
                      "extract_overhead": t["extract_s"] / t["emulator_s"],
                      "frames_overhead": t["frames_s"] / t["emulator_s"],
                      # everything around the emulator: extraction, typed deltas (pydantic), observation text
                      "wrapper_overhead": (in_step - t["emulator_s"]) / t["emulator_s"], "wall_s": wall}
    return {"steps": steps, "seed": seed, "filmstrip": filmstrip, "action_repeat": action_repeat, "games": rows}


def format_table(result: VisualBench) -> str:
    lines = [f"{result['steps']} emulator steps per game (frame skip 4, sticky 0.25), "
             f"{result['action_repeat']} per agent step, filmstrip={result['filmstrip']}; "
             "wrapper = everything step() does besides the emulator (extraction, typed delta, observation text)",
             f"{'game':15} {'steps/s':>9} {'emu ms':>8} {'extract ms':>11} {'extract %':>10} {'frames %':>9} {'wrapper %':>10}"]
    for game, r in result["games"].items():
        lines.append(f"{game:15} {r['steps_per_s']:>9.0f} {r['emulator_ms']:>8.3f} {r['extract_ms']:>11.4f} "
                     f"{100 * r['extract_overhead']:>9.1f}% {100 * r['frames_overhead']:>8.1f}% "
                     f"{100 * r['wrapper_overhead']:>9.0f}%")
    return "\n".join(lines)
