"""`ScienceEnvironment`: ScienceWorld (the `scienceworld` package's simulator, a JVM behind py4j)
behind the CDWM protocol (`environments.cdwm.env`).

One environment owns one JVM, started by the first `reset()` on the environment's own thread and
stopped by `close()` -- also after an error (use it as a context manager; `close()` kills the Java
process if it does not exit). Episodes in one environment reuse its JVM: `load()` builds a new world,
so nothing of an earlier episode survives; the suite still makes one environment per episode.

Each step sends the action to the simulator; when it advanced the clock (the move counter), the
object tree, the free `look` and the referent table (none of which take time) are read and diffed
against the previous state (`environments.science.deltas`); without a tick nothing changed. The
focus and a failed or completed task are added from the simulator's answer. The observation is the answer,
the room (`look`) and the inventory; `admissible` is the simulator's list of valid action-object
combinations (see `admissible_actions`). An ambiguous action is answered by a numbered question;
the next action must then be one of the numbers (anything else is refused without reaching the
simulator, which would otherwise read it as the answer and lose a tick).

`evaluate()` ends the episode: it reports the simulator's score and then replays the task's gold
path in the same JVM; its irreversible facts and the focuses the simulator accepted are what the
task requires (`required_irreversible`).

Rule perturbations (`RULES`; `reset({..., "perturbation": NAME})`): the simulator with one rule
changed for the episode, inside the JVM, so the diff records the changed effect like any other.
`put_closes`: a closable container that something is moved into closes (the simulator's own
`isOpen` of the container, set in the same step, before the state is read); in training it stays open.

Seed-reproducible: the simulator iterates hash sets of its objects, and an object's hash is the
JVM's identity hash, random per JVM run, so two runs of one task variation could differ (gold
paths, the tree's order, what a seeded choice among objects picks). The JVM runs with a constant
identity hash (`JVM_OPTIONS`): a set's order is then its insertion order, the same in every JVM
whatever ran in it before (the simulator reseeds its random generator with the variation on load).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

import psutil

from environments.cdwm.deltas import AttributeChange, Delta, Relation
from environments.science.deltas import FOCUS, WorldState, as_predicate, diff, irreversible_facts, parse_state, settle
from harness.environment import STOP, EnvironmentClosed, Observation, StepResult  # EnvironmentClosed: re-exported
from harness.errors import HarnessError
from harness.processes import kill_trees

# ScienceWorld's action verbs (its templates, `get_possible_actions()`), as an agent writes them.
ACTION_CLASSES = (
    "look around", "look at", "look in", "read", "inventory", "task", "go to", "teleport to", "open", "close",
    "activate", "deactivate", "pick up", "put down", "move", "pour", "dunk", "mix", "eat", "flush", "use",
    "connect", "disconnect", "focus on", "wait", "wait1", STOP,
)
ALIASES = {"examine": "look at"}  # the simulator's own synonyms that gold paths use
RESET_TASK = "reset task"  # would restart the episode inside the episode: refused
# The order of `admissible`: agents show the first entries in their prompt, so the few actions
# that move, open and pick up come before the hundreds of `move X to Y` / `pour X into Y`.
ADMISSIBLE_ORDER = ("look around", "inventory", "task", "go to", "teleport to", "open", "close", "activate",
                    "deactivate", "pick up", "put down", "look at", "look in", "read", "use", "connect",
                    "disconnect", "focus on", "eat", "flush", "mix", "dunk", "wait1", "wait", "move", "pour")
ACTION_HELP = "\n".join([
    "  look around | inventory | task (these take no time)",
    "  look at OBJ | look in OBJ | read OBJ",
    "  go to ROOM | teleport to ROOM | open OBJ | close OBJ | activate OBJ | deactivate OBJ",
    "  pick up OBJ | put down OBJ | move OBJ to OBJ | pour OBJ into OBJ | dunk OBJ in OBJ | mix OBJ",
    "  use OBJ on OBJ | connect OBJ to OBJ | disconnect OBJ | eat OBJ | flush OBJ",
    "  focus on OBJ (final: focusing on the wrong thing fails the task)",
    "  wait (10 ticks) | wait1 (1 tick)",
    "  a number, to answer a question about which object you meant",
])
UNPARSED = ("No known action matches that input.", "Unknown action.")
AMBIGUOUS = "Ambiguous request"
_CHOICE = re.compile(r"^(\d+):\s*(.+?)\s*$", re.M)
_FOCUSED = re.compile(r"^You focus on the (.+?)\.\s*$", re.S)
FEEDBACK_CHARS = 2000
JVM_EXIT_S = 5.0
# HotSpot's identity hash mode 2: every object hashes alike (module docstring: reproducibility).
JVM_OPTIONS = "-XX:+UnlockExperimentalVMOptions -XX:hashCode=2"
# Rule perturbations: name -> the rule it changes (training: the simulator's own rules).
RULES = {
    "put_closes": "a closable container that something is moved into closes (freezer, fridge, oven, blast furnace, "
    "cupboard, drawer, ...; in training it stays open)",
}

_START_LOCK = threading.Lock()  # JVM starts one at a time, so a failed start knows its own process
_GOLD_CACHE: dict[tuple[str, int, str], tuple[frozenset[tuple[str, ...]], int | None]] = {}
_GOLD_LOCK = threading.Lock()


class _TaskKey(TypedDict):
    """The loaded task, as ScienceWorld names it (also the gold-path cache's key)."""

    task_name: str
    variation: int
    simplification: str


class _Move(TypedDict):
    """One step of the episode, as the evaluation reads it back."""

    action: str
    delta: Delta
    failed: bool


class ScienceEnvironment:
    def __init__(self, *, simplification: str = "easy", env_step_limit: int = 100, max_steps: int = 100,
                 max_admissible: int = 2000):
        self.simplification, self.env_step_limit = simplification, env_step_limit
        self.max_steps, self.max_admissible = max_steps, max_admissible
        self._sw: Any = None  # scienceworld.ScienceWorldEnv
        self._java: psutil.Process | None = None
        self._closed = False
        self._task: _TaskKey | None = None
        self._evaluation: dict[str, Any] | None = None
        self.gold_path: list[str] | None = None
        self._rule: str | None = None  # this episode's rule perturbation (RULES)
        atexit.register(self.close)

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> ScienceEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def java_pid(self) -> int | None:
        return self._java.pid if self._java else None

    def start(self) -> None:
        if self._closed:
            raise EnvironmentClosed("this ScienceEnvironment was closed; create a new one")
        if self._sw is not None:
            return
        from scienceworld import ScienceWorldEnv

        if shutil.which("java") is None:  # py4j runs `java` from PATH; failing later leaves a half-built env
            raise FileNotFoundError("java not found on PATH: ScienceWorld needs Java 17+")
        with _START_LOCK, _java_tool_options(JVM_OPTIONS):
            before = {p.pid for p in _children()}
            try:
                self._sw = ScienceWorldEnv("", envStepLimit=self.env_step_limit)
                self._java = psutil.Process(self._sw._gateway.java_process.pid)
            except BaseException:
                # A start that failed half way may have left its JVM: every Java child that is new is ours.
                kill_trees([p for p in _children() if p.pid not in before and "java" in _name(p)], JVM_EXIT_S)
                self._sw = None
                self.close()
                raise

    def close(self) -> None:
        """Idempotent; never raises. The JVM is asked to exit, then killed if it has not."""
        if self._closed:
            return
        self._closed = True
        sw, self._sw = self._sw, None
        if sw is not None:
            try:
                sw.close()  # py4j shutdown, then a newline on the JVM's stdin (how the package stops it)
            except BaseException:
                pass
            sw.close = lambda: None  # the package's __del__ would close the dead gateway again
            try:
                sw._obj_tree_tempdir.cleanup()
            except BaseException:
                pass
        if self._java is not None:
            try:
                self._java.wait(timeout=JVM_EXIT_S)
            except (psutil.TimeoutExpired, psutil.Error):
                kill_trees([self._java], JVM_EXIT_S)
            proc = getattr(getattr(sw, "_gateway", None), "java_process", None)
            if proc is not None:  # reap the Popen and close its pipes
                for pipe in (proc.stdin, proc.stdout, proc.stderr):
                    try:
                        pipe and pipe.close()
                    except BaseException:
                        pass
                try:
                    proc.wait(timeout=JVM_EXIT_S)
                except BaseException:
                    pass
        atexit.unregister(self.close)

    # -- the task catalogue (the suite's samples) ----------------------------------------------
    def split_variations(self, task_name: str, split: str) -> tuple[list[int], int]:
        """The variations of `task_name` in ScienceWorld's own `split` (train, dev or test), and
        how many variations the task has in all."""
        self.start()
        self._sw.load(task_name, 0, "")
        listing = {"train": self._sw.get_variations_train, "dev": self._sw.get_variations_dev,
                   "test": self._sw.get_variations_test}[split]
        return sorted(int(v) for v in listing()), int(self._sw.get_max_variations(task_name))

    def task_description(self, task_name: str, variation: int, simplification: str) -> str:
        self.start()
        self._sw.load(task_name, variation, simplification)
        return str(self._sw.get_task_description()).strip()

    # -- episode -----------------------------------------------------------------------------
    def reset(self, task: dict[str, Any]) -> Observation:
        """Load `task` ({"task_name": "boil" or "1-1", "variation": 14, optional "simplification",
        optional "gold_path": true to keep the gold action sequence in `self.gold_path`})."""
        self.start()
        name, variation = task.get("task_name"), task.get("variation")
        if not name or not isinstance(variation, int):
            raise ValueError(f"reset(task): needs task_name and an int variation, got {task!r}")
        simplification = task.get("simplification", self.simplification)
        self._rule = check_rule(task.get("perturbation"))
        try:
            self._sw.load(name, variation, simplification, generateGoldPath=bool(task.get("gold_path")))
        except ValueError as exc:  # the package's own message names the valid tasks / simplifications
            raise ValueError(f"reset(task): {exc}") from None
        self.gold_path = self._sw.get_gold_action_sequence() if task.get("gold_path") else None
        self._sw.reset()
        self._task = {"task_name": self._sw.taskName, "variation": variation, "simplification": simplification}
        self.description = str(self._sw.get_task_description()).strip()
        self._server = self._sw.server
        self._state, look = self._snapshot()
        self._score, self._completed, self._moves = 0, False, int(self._server.getNumMoves())
        self._steps, self._done = 0, False
        self._ended_by: str | None = None
        self._question: dict[str, str] = {}  # the latest question's numbered choices
        self._pending = False  # the question waits for its answer
        self._history: list[_Move] = []
        self._admissible: list[str] | None = None
        self._evaluation = None
        return self._observe(f"{self.description}\n\n{look}")

    def step(self, action: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("call reset(task) before step(action)")
        if self._done:  # the world may be the gold replay's by now: no look at it
            obs = Observation(text="The episode is over.", action_classes=ACTION_CLASSES, admissible=[])
            return StepResult(observation=obs, delta=Delta(), done=True, valid=False,
                              info={"error": "the episode is over; call reset(task) for a new one"})
        if self._closed:
            raise EnvironmentClosed("this ScienceEnvironment was closed")
        self._steps += 1
        text = " ".join(str(action).split())
        cls = self.action_class(text)
        if cls == STOP:
            self._done, self._ended_by = True, "stop"
            return self._result(Delta(), "You stop.", valid=True)
        refusal = None
        if cls == RESET_TASK:
            refusal = "reset task is not allowed: an episode cannot restart itself"
        elif self._pending and text not in self._question:
            refusal = f"answer the question first: send one of {', '.join(self._question)}"
        if refusal:  # refused here, so the simulator neither sees it nor advances the clock
            return self._result(Delta(), f"Not done: {refusal}.", valid=False, error=refusal)
        before, moves = self._state, self._moves
        feedback = str(self._server.step(text)).strip()
        score, completed = int(round(100 * self._server.getScore())), bool(self._server.getCompleted())
        self._moves = int(self._server.getNumMoves())
        if self._moves != moves:
            self._state, look = self._snapshot()
            self._admissible = None
            if self._rule == "put_closes" and self._close_filled(before, self._state):
                self._state, look = self._snapshot()  # the changed rule's effect is part of this step
        else:  # no tick, no change (checked over 420 mixed steps); saves the tree and the action list
            look = str(self._server.freeActionLook())
        delta = diff(before, self._state)
        focused = _FOCUSED.match(feedback)
        if focused:
            delta.relations_added.append(Relation(subject="agent", relation=FOCUS, object=focused.group(1)))
        failed = score < 0 <= self._score
        if failed:
            delta.attributes.append(AttributeChange(entity="task", attribute="status", before="running", after="failed"))
        elif completed and not self._completed:
            delta.attributes.append(AttributeChange(entity="task", attribute="status", before="running", after="completed"))
        settle(delta)
        self._pending = feedback.startswith(AMBIGUOUS)
        if self._pending:
            self._question = dict(_CHOICE.findall(feedback))
        valid = not feedback.startswith(UNPARSED + (AMBIGUOUS,))
        self._score, self._completed = score, completed
        self._history.append({"action": text, "delta": delta, "failed": failed})
        if completed or score < 0:
            self._done, self._ended_by = True, "failed" if score < 0 else "completed"
        elif self._moves > self.env_step_limit or self._steps >= self.max_steps:
            self._done, self._ended_by = True, "step_limit"
        error = None if valid else ("ambiguous: answer with a number" if self._pending else feedback.splitlines()[0])
        return self._result(delta, feedback, valid=valid, error=error, look=look)

    def action_class(self, action: str) -> str:
        text = " ".join(str(action).lower().split())
        question = getattr(self, "_question", {})
        if text in question:  # a number answering a question: the class of the action it picks
            text = " ".join(question[text].lower().split())
        for cls in sorted(ACTION_CLASSES + (RESET_TASK,) + tuple(ALIASES), key=len, reverse=True):
            if text == cls or text.startswith(cls + " "):
                return ALIASES.get(cls, cls)
        return text.split(" ", 1)[0] if text else ""

    def evaluate(self) -> dict[str, Any]:
        """The simulator's score (success = max(score, 0) / 100) and the irreversible changes:
        `required_irreversible` are the irreversible facts of the task's gold path and the focuses
        the simulator accepted (as predicates); `unrequired_irreversible` the agent's actions with
        an irreversible fact outside those, or that failed the task. Ends the episode (the gold
        path is replayed in this JVM)."""
        if self._task is None:
            raise RuntimeError("call reset(task) and run the episode before evaluate()")
        if self._evaluation is not None:
            return self._evaluation
        score, completed = self._score, self._completed
        goal_progress = str(self._server.getGoalProgressStr())
        self._done = True
        replay_error = None
        try:
            gold, gold_score = self.gold_requirements()
        except Exception as exc:  # the score stands; the requirements fall back to the accepted focuses
            gold, gold_score, replay_error = set(), None, f"{type(exc).__name__}: {str(exc)[:200]}"
        # A focus the simulator accepted is the task's own requirement: tasks with several right
        # answers (find a living thing) accept more than the one the gold path happens to pick.
        accepted = {f for h in self._history if not h["failed"] for f in irreversible_facts(h["delta"])
                    if f[0] == "rel+" and f[2] == FOCUS}
        required = gold | accepted
        unrequired = [h["action"] for h in self._history
                      if h["failed"] or not irreversible_facts(h["delta"]) <= required]
        self._evaluation = {
            "success": max(score, 0) / 100.0, "score": score, "completed": completed,
            "required_irreversible": [as_predicate(f) for f in sorted(required)],
            "unrequired_irreversible": unrequired,
            "task_name": self._task["task_name"], "variation": self._task["variation"],
            "simplification": self._task["simplification"], "steps": self._steps, "moves": self._moves,
            "ended_by": self._ended_by, "gold_replay_score": gold_score, "goal_progress": goal_progress,
        }
        if replay_error:
            self._evaluation["gold_replay_error"] = replay_error
        return self._evaluation

    def gold_requirements(self) -> tuple[set[tuple[str, ...]], int | None]:
        """The irreversible facts of the task's gold path and the score the replay reached (None
        without a gold path). Replays in this JVM, so the current world is lost; cached per task."""
        if self._task is None:
            raise RuntimeError("call reset(task) before gold_requirements()")
        key = (self._task["task_name"], self._task["variation"], self._task["simplification"])
        with _GOLD_LOCK:
            cached = _GOLD_CACHE.get(key)
        if cached is None:
            self._done = True
            self._sw.load(key[0], key[1], key[2], generateGoldPath=True)
            gold = [a for a in self._sw.get_gold_action_sequence() if not a.startswith("ERROR")]
            self._sw.reset()
            facts: set[tuple[str, ...]] = set()
            state, _ = self._snapshot()
            score = None
            moves = int(self._server.getNumMoves())
            for action in gold:
                feedback = str(self._server.step(action)).strip()
                after = state if int(self._server.getNumMoves()) == moves else self._snapshot()[0]
                moves = int(self._server.getNumMoves())
                delta = diff(state, after)
                focused = _FOCUSED.match(feedback)
                if focused:
                    delta.relations_added.append(Relation(subject="agent", relation=FOCUS, object=focused.group(1)))
                facts |= irreversible_facts(delta)
                state, score = after, int(round(100 * self._server.getScore()))
                if self._server.getCompleted() or score < 0:
                    break
            cached = (frozenset(facts), score)
            with _GOLD_LOCK:
                _GOLD_CACHE[key] = cached
        return set(cached[0]), cached[1]

    # -- internals -----------------------------------------------------------------------------
    def _close_filled(self, before: WorldState, after: WorldState) -> bool:
        """`put_closes`: close, in the JVM, every open closable container something moved into in
        this step; whether any was closed."""
        filled = {t.parent for uuid, t in after.things.items()
                  if uuid in before.things and before.things[uuid].parent != t.parent and t.parent is not None}
        closed = False
        for uuid in sorted(filled):
            if uuid in after.things and _true(after.things[uuid].attrs.get("is open")):
                props = self._jvm_object(uuid, after).propContainer().get()
                if props.isClosable():
                    getattr(props, "isOpen_$eq")(False)
                    closed = True
        return closed

    def _jvm_object(self, uuid: str, state: WorldState) -> Any:
        """The simulator's object `uuid`, found down its chain of containers from the universe."""
        chain = []
        node: str | None = uuid
        while node is not None and node in state.things:
            chain.append(node)
            node = state.things[node].parent
        obj = self._server.agentInterface().get().universe()
        for step in reversed(chain):
            found = obj.getContainedObjects(True).iterator()
            while found.hasNext():
                child = found.next()
                if str(child.uuid()) == step:
                    obj = child
                    break
            else:
                raise RuntimeError(f"object {uuid} ({state.name(uuid)}) is not in the simulator's tree")
        return obj

    def _snapshot(self) -> tuple[WorldState, str]:
        look = str(self._server.freeActionLook())
        referents = self._sw.get_all_object_ids_types_referents_LUTJSON()
        return parse_state(self._sw.getObjectTree(), look, referents), look

    def _result(self, delta: Delta, feedback: str, *, valid: bool, error: str | None = None,
                look: str | None = None) -> StepResult:
        look = look if look is not None else (str(self._server.freeActionLook()) if self._sw else "")
        info: dict[str, Any] = {"score": self._score, "moves": self._moves}
        if error:
            info["error"] = error
        obs = self._observe(feedback, look)
        return StepResult(observation=obs, delta=delta, done=self._done, valid=valid, info=info)

    def _observe(self, feedback: str, look: str | None = None) -> Observation:
        """The simulator's answer, then the room and the inventory (both free actions)."""
        inventory = str(self._server.freeActionInventory()).strip() if self._sw else ""
        parts = [_tidy(feedback, FEEDBACK_CHARS)]
        for extra in (look, inventory):
            if extra and extra.strip() not in feedback:  # `look around` / `inventory` answer with the same text
                parts.append(_tidy(extra))
        return Observation(text="\n\n".join(p for p in parts if p), action_classes=ACTION_CLASSES,
                           admissible=self.admissible_actions(),
                           info={"action_help": ACTION_HELP, "score": self._score, "moves": self._moves,
                                 "task_name": self._task["task_name"] if self._task else None})

    def admissible_actions(self) -> list[str]:
        """The simulator's valid action-object combinations now (hundreds to a few thousand; most
        are `move X to Y` and `pour X into Y`), without `reset task`, in `ADMISSIBLE_ORDER` (then
        alphabetically), capped at `max_admissible`. While a question waits: its numbers only."""
        if self._pending:
            return list(self._question)
        if self._done or self._sw is None:
            return []
        if self._admissible is not None:
            return list(self._admissible)
        rank = {cls: i for i, cls in enumerate(ADMISSIBLE_ORDER)}
        combos = {" ".join(a.split()) for a in self._sw.get_valid_action_object_combinations()}
        valid = [a for a in combos if self.action_class(a) != RESET_TASK]
        valid.sort(key=lambda a: (rank.get(self.action_class(a), len(rank)), a))
        self._admissible = valid[: self.max_admissible]
        return list(self._admissible)


def check_rule(rule: str | None) -> str | None:
    """`rule` itself when the science world offers it (None: the simulator's own rules); else one error."""
    if rule is not None and rule not in RULES:
        raise HarnessError(f"rule perturbation {rule!r}: the science world has no such rule; "
                           f"choose from {', '.join(RULES)} (or none)")
    return rule


def _true(value: Any) -> bool:
    return str(value).lower() == "true"


@contextmanager
def _java_tool_options(options: str) -> Iterator[None]:
    """`options` added to $JAVA_TOOL_OPTIONS while a JVM starts (the package starts it with none of
    ours); the environment variable is restored after."""
    old = os.environ.get("JAVA_TOOL_OPTIONS")
    os.environ["JAVA_TOOL_OPTIONS"] = f"{old or ''} {options}".strip()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("JAVA_TOOL_OPTIONS", None)
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = old


def _tidy(text: str, limit: int | None = None) -> str:
    """Tabs to two spaces, no trailing blanks or blank-line runs, and a cap on very long answers."""
    lines = [line.replace("\t", "  ").rstrip() for line in str(text).strip().splitlines()]
    out = "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1]))
    if limit and len(out) > limit:
        out = out[:limit] + " [...]"
    return out


def _children() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name().lower()
    except psutil.Error:
        return ""
