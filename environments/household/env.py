"""`HouseholdEnvironment`: ALFWorld's text engine (TextWorld's PDDL environment over the bundled
ALFRED domain, with ALFWorld's entity naming) behind the CDWM protocol.

A task is either generated (`pddl_problem` + `intent`, see `generator.py`) or an official ALFWorld
game (`game_file`, a `game.tw-pddl` read unchanged). The agent reads the engine's feedback and may
send any admissible command; after each step the environment reports the ground-truth delta
(`facts.py`). `stop [...]` ends the episode (giving up). Won = the PDDL goal holds.

The engine runs in-process on a private copy of fast-downward's shared library (33 MB, loaded by
`fast_downward.load_lib()` and never unloaded), so engines are pooled: an episode borrows one and
`close()` gives it back; at most as many exist as episodes ever ran at once.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from environments.cdwm.deltas import Delta
from environments.household import facts as hf
from environments.household.reader import status_text
from environments.household.task import GeneratedTask, HouseholdTask, OfficialTask, read_task
from harness.environment import STOP, EnvironmentClosed, Observation, StepResult

# TextWorld's PDDL engine keeps module-level state (one TatSu parser, the translator's tables) that
# is not thread-safe: environments on several threads (`parallel_envs` > 1) loading or stepping at
# once broke it ("pop from empty list", KeyError in implied preconditions). The engine's work is
# milliseconds against a model call's seconds, so engines take turns.
ENGINE_LOCK = threading.Lock()

ACTION_CLASSES = ("go to", "open", "close", "take", "move", "examine", "use", "heat", "clean", "cool", "slice",
                  "look", "inventory", "help", STOP)
ACTION_HELP = "\n".join([
    "  go to (receptacle)             walk to a receptacle",
    "  open (receptacle) / close (receptacle)",
    "  take (object) from (receptacle)",
    "  move (object) to (receptacle)  put the object you hold in or on a receptacle",
    "  examine (something) / look / inventory",
    "  use (object)                   turn a lamp on or off",
    "  heat (object) with (microwave) / cool (object) with (fridge) / clean (object) with (sinkbasin)",
    "  slice (object) with (knife)",
    "  stop [reason]                  give up the task",
    "Write the action exactly as listed among the admissible actions.",
])


def bundled_logic() -> tuple[str, str]:
    """ALFWorld's ALFRED domain and text grammar, as shipped in the alfworld package."""
    import alfworld

    data = Path(alfworld.__file__).parent / "data"
    return (data / "alfred.pddl").read_text(), (data / "alfred.twl2").read_text()


class _EnginePool:
    """Idle TextWorld PDDL engines, each holding its own copy of fast-downward's library."""

    def __init__(self) -> None:
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self.created = 0

    def acquire(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.created += 1
        import textworld
        from textworld.envs.pddl import PddlEnv

        return PddlEnv(textworld.EnvInfos(admissible_commands=True, facts=True, won=True, feedback=True))

    def release(self, engine: Any) -> None:
        with self._lock:
            self._idle.append(engine)


ENGINES = _EnginePool()


def game_data(task: HouseholdTask) -> dict[str, Any]:
    """The engine's game (TextWorld's `tw-pddl` JSON): an official `game.tw-pddl` unchanged, or a
    generated problem with the bundled domain and grammar (the task's description filled in as
    ALFWorld does)."""
    if isinstance(task, OfficialTask):
        game: dict[str, Any] = json.loads(Path(task.game_file).read_text())
        return game
    domain, grammar = bundled_logic()
    return {"pddl_domain": domain, "grammar": grammar.replace("UNKNOWN GOAL", task.intent),
            "pddl_problem": task.pddl_problem}


class HouseholdEnvironment:
    def __init__(self, max_steps: int = 50) -> None:
        self.max_steps = max_steps
        self._engine: Any = None
        self._task: HouseholdTask | None = None
        self._state: Any = None
        self._facts: set[hf.Fact] = set()
        self._static: dict[str, set[str]] = {}
        self._names: dict[str, str] = {}
        self._steps = 0
        self._done = False
        self._stopped: str | None = None
        self._played: list[str] = []  # every action since reset, as given (`played`, `twin`)
        self.closed = False

    # -- protocol --------------------------------------------------------------------------------
    def reset(self, task: dict[str, Any]) -> Observation:
        if self.closed:
            raise EnvironmentClosed("this HouseholdEnvironment was closed; create a new one")
        if self._engine is None:
            self._engine = ENGINES.acquire()
        self._task = read_task(task)
        game = game_data(self._task)
        with ENGINE_LOCK:
            # An engine that holds this game already only resets (0.3 s of the 0.7 s a load adds):
            # what a replay twin (`twin`) does on every restart.
            if getattr(self._engine, "_game_data", None) != game:
                self._engine.load(game)
            self._names = self._demangle()
            self._state = self._engine.reset()
        all_facts = self._read_facts()
        self._static = hf.static_index(all_facts)
        self._facts = hf.world_facts(all_facts)
        self._steps, self._done, self._stopped, self._played = 0, False, None, []
        return self._observe(self._state.feedback)

    def step(self, action: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("call reset(task) before step()")
        self._played.append(action)
        if self._done:
            return StepResult(self._observe("The episode is over."), Delta(), done=True, valid=False,
                              info={"error": "the episode is over"})
        self._steps += 1
        command = " ".join(action.strip().split())
        if command.lower().startswith(STOP):
            self._done, self._stopped = True, command
            return StepResult(self._observe("You stop."), Delta(), done=True)
        admissible = {c.lower(): c for c in self._state["admissible_commands"]}
        if command.lower() not in admissible:
            self._done = self._steps >= self.max_steps
            return StepResult(self._observe("Nothing happens."), Delta(), done=self._done, valid=False,
                              info={"error": f"not an admissible command here: {command[:80]}"})
        with ENGINE_LOCK:
            self._state, _, _ = self._engine.step(admissible[command.lower()])
        after = hf.world_facts(self._read_facts())
        delta = hf.delta_between(self._facts, after, self._static)
        self._facts = after
        self._done = bool(self._state["won"]) or self._steps >= self.max_steps
        return StepResult(self._observe(self._state.feedback), delta, done=self._done,
                          info={"won": bool(self._state["won"])})

    def action_class(self, action: str) -> str:
        low = " ".join(action.lower().split())
        for cls in sorted(ACTION_CLASSES, key=len, reverse=True):
            if low == cls or low.startswith(cls + " "):
                return cls
        return low.split(" ", 1)[0] if low else ""

    def evaluate(self) -> dict[str, JsonValue]:  # the transcript's evaluation (JSON)
        if self._task is None:
            raise RuntimeError("call reset(task) and run the episode before evaluate()")
        won, task = bool(self._state["won"]), self._task
        generated = task if isinstance(task, GeneratedTask) else None
        return {"success": 1.0 if won else 0.0, "won": won, "steps": self._steps, "stopped": self._stopped,
                "required_irreversible": list(task.required_irreversible),
                "irreversible_trap": generated.irreversible_trap if generated else None,
                "gold_steps": len(generated.gold_plan) if generated and generated.gold_plan else None}

    def close(self) -> None:
        if self._engine is not None:
            ENGINES.release(self._engine)
            self._engine = None
        self.closed = True

    # -- helpers for tests and tools -------------------------------------------------------------
    @property
    def won(self) -> bool:
        return bool(self._state is not None and self._state["won"])

    @property
    def world_facts(self) -> frozenset[hf.Fact]:
        """The engine's world facts now (`facts.world_facts`): what an exploring policy reads to find
        its way to an object (`harness cdwm collect`); never shown to the agent under test."""
        return frozenset(self._facts)

    @property
    def admissible(self) -> list[str]:
        return list(self._state["admissible_commands"])

    @property
    def played(self) -> tuple[str, ...]:
        """The actions stepped since reset, as given (admissible or not): the engine is deterministic
        given the task, so replaying them on `twin()` reaches this state (a test checks it)."""
        return tuple(self._played)

    def twin(self) -> HouseholdEnvironment:
        """A second environment (its own engine) reset to this one's task: what "what would this
        action change" is asked of, since the engine's state lives in a C library and cannot be
        copied or restored (`environments/cdwm/planner_worlds.py` replays `played` on it)."""
        if self._task is None:
            raise RuntimeError("call reset(task) before twin()")
        other = HouseholdEnvironment(max_steps=self.max_steps)
        other.reset(self._task.model_dump())
        return other

    def expert_plan(self) -> list[str]:
        """ALFWorld's planner expert from the current state: fast-downward's plan to the goal as
        commands, [] when the goal can no longer be reached."""
        with ENGINE_LOCK:
            return list(self._engine._pddl_state.replan(self._engine._entity_infos))

    def render(self, command: str) -> str:
        """A gold-plan command with `{entity-id}` placeholders in the engine's names."""
        return re.sub(r"\{([^{}]+)\}", lambda m: self._names.get(m.group(1).lower(), m.group(0)), command)

    # -- internals -------------------------------------------------------------------------------
    def _demangle(self) -> dict[str, str]:
        """ALFWorld's names for the game's entities ("apple 1", "sinkbasin 2"), as its
        AlfredDemangler gives them; returns id -> name for the entities the game declares."""
        from alfworld.agents.utils.misc import Demangler

        infos = self._engine._entity_infos
        demangler = Demangler(game_infos=infos)
        names = {}
        for info in infos.values():
            info.name = demangler.demangle_alfred_name(info.id).strip()
            names[info.id] = info.name
        return {k.lower(): v for k, v in names.items()}

    def _read_facts(self) -> list[hf.Fact]:
        return [(f.name.lower(), tuple(v.name.strip() for v in f.arguments)) for f in self._state["facts"]]

    def _observe(self, feedback: str) -> Observation:
        admissible = [c for c in self._state["admissible_commands"] if c != "help"] if self._state else []
        # `status`: where the agent is and what it carries (reader.py), kept beside the reply for the
        # generative world model; the policy reads the reply only, as ALFWorld's agent does.
        return Observation(text=str(feedback).strip(), action_classes=ACTION_CLASSES, admissible=admissible,
                           info={"action_help": ACTION_HELP, "steps": self._steps,
                                 "status": status_text(self._facts, self._static)})
