"""The web world's exploring policy for `harness cdwm collect` (environments/cdwm/collect.py): the
task's gold plan (`cdwm.reference_actions`), replayed from the task's start page after any detour,
and, when the collector asks for an irreversible action, an irreversible trap's own script
(`cdwm.wrong_actions`: place a final-sale order, cancel a booking, send a mail, ...). No model is
called. Deltas are the server's ledger (`WebEnvironment.step`), never inferred.

Task types are the sites (shop, travel, mail), so holding one out is the issue's held-out website.
Tasks judged by `fuzzy_match` (the ambiguity traps) are not played: their evaluation needs a
judge model.

Rule perturbations (`environments/web/rules.py`, switched on by the episode's reset inside the
server process, so the ledger records the changed effect): `order_keeps_cart` (shop: placing an
order no longer empties the cart) and `cancel_refunds_nothing` (travel: a cancelled booking refunds
nothing). A perturbed episode plays a task of that site whose gold plan presses the button whose
effect changed (`RULE_BUTTONS`), so the changed rule is met, not only possible.

Element ids in the browser's observation are Chromium's DOM node ids, which depend on the
browser's whole history, and URLs carry the server's free port; a collection must not depend on
either (same seed, same rows; a resumed run equals an uninterrupted one). `StableWeb` shows the
same observation with ids renumbered in page order and the host written `PUBLIC`, and maps actions
back before the browser sees them. The same ids make the planner check's replay twin
(environments/cdwm/planner_worlds.py) exact: `StableWeb.played` are the shown actions since reset,
and `StableWeb.twin()` shows `WebEnvironment.twin()` (its own server, database and browser, on the
same task and rule perturbation) the same way, so the shown actions replay there unchanged.

It lives here, not in `cdwm/`, because the CDWM environment folders import `cdwm`, never the
reverse (the acyclic import contract); `cdwm/collect.py` names this module by string.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from typing import Any, TypedDict

from environments.web import rules
from environments.web.browser_env import WebEnvironment
from environments.web.replay import ReplayError, resolve
from environments.web.tasks import load_tasks, substitute
from environments.web.world import PLACEHOLDERS
from harness.environment import Observation, StepResult
from harness.errors import HarnessError

PUBLIC = "http://web.cdwm"  # the host every URL is shown with (the real one has a random port)
ELEMENT_RE = re.compile(r"^(\s*)\[(\d+)\] ", re.M)
ACTION_ID_RE = re.compile(r"^(\w+) \[(\d+)\]")
CLICKABLE = {"link", "button", "checkbox", "radio"}
SITES = tuple(PLACEHOLDERS)  # shop, travel, mail


def playable(task: dict[str, Any]) -> bool:
    """Tasks the collector can play and judge without a model (no `fuzzy_match`)."""
    return "fuzzy_match" not in (task["eval"].get("reference_answers") or {}) and bool(
        task["cdwm"]["reference_actions"]
    )


class StableWeb:
    """A `WebEnvironment` seen through page-order element ids and a fixed host (see the module)."""

    def __init__(self, env: WebEnvironment) -> None:
        self.env = env
        self._ids: dict[int, int] = {}  # shown id -> Chromium's id, for the current observation
        self.text = ""
        self._played: list[str] = []  # the shown actions since reset

    @property
    def base(self) -> str:
        return self.env.world.base_url if self.env.world is not None else ""

    def show(self, text: str) -> str:
        self._ids = {}

        def number(m: re.Match[str]) -> str:
            self._ids[len(self._ids) + 1] = int(m[2])
            return f"{m[1]}[{len(self._ids)}] "

        self.text = ELEMENT_RE.sub(number, text.replace(self.base, PUBLIC) if self.base else text)
        return self.text

    def real(self, action: str) -> str:
        """The action as the browser takes it (Chromium's id, the server's host)."""
        m = ACTION_ID_RE.match(action)
        if m and int(m[2]) in self._ids:
            action = f"{m[1]} [{self._ids[int(m[2])]}]" + action[m.end() :]
        return action.replace(PUBLIC, self.base) if self.base else action

    def _shown(self, obs: Observation) -> Observation:
        return replace(obs, text=self.show(obs.text))

    def reset(self, task: dict[str, Any], rule: str | None = None) -> Observation:
        self.env.rule = rule  # every reset sets it: a rule never leaks into the next episode
        self._played = []
        return self._shown(self.env.reset(task))

    def step(self, action: str) -> StepResult:
        self._played.append(action)
        result = self.env.step(self.real(action))
        return replace(result, observation=self._shown(result.observation))

    @property
    def played(self) -> tuple[str, ...]:
        """The shown actions since reset (page-order ids, the fixed host): what a twin replays."""
        return tuple(self._played)

    def twin(self) -> StableWeb:
        """This episode's replay twin, seen the same way (`WebEnvironment.twin`: one per
        environment, reset again on every call)."""
        env = self.env.twin()
        other = StableWeb(env)
        other.show(env.observe().text)
        return other

    def close(self) -> None:
        pass  # a view: the browser and the server are its environment's (a twin's, its live one's)

    def action_class(self, action: str) -> str:
        return self.env.action_class(action)

    def evaluate(self) -> dict[str, Any]:
        return self.env.evaluate()


class WebSpec(TypedDict):
    """One collection episode: the task's id (its site is the task type) and the rule
    perturbation (or None)."""

    task_id: str
    perturbation: str | None


class WebEpisode:
    def __init__(
        self, spec: WebSpec, web: StableWeb, tasks: dict[str, dict[str, Any]], traps: dict[str, dict[str, Any]]
    ) -> None:
        self.task = tasks[spec["task_id"]]
        self.env = web
        self.intent = str(self.task["intent"])
        self.observation = web.reset(self.task, rules.check(spec.get("perturbation")))
        # What the task requires to be irreversible, read without `evaluate()` (which may navigate).
        self.required_irreversible: list[dict[str, Any]] = list(self.task["cdwm"].get("required_irreversible", []))
        own = self.task["cdwm"].get("trap_kind") == "irreversible"
        self._trap = self.task if own else traps[self.task["cdwm"]["site"]]
        self._plan = self._script(self.task, self.task["cdwm"]["reference_actions"], restart=False)
        self._detour: list[str] = []

    def _script(self, task: dict[str, Any], actions: list[str], *, restart: bool) -> list[str]:
        """`actions` with the site placeholders filled (shown host), after a `goto` to the task's
        start page when the browser may be elsewhere."""
        start = [f"goto [{task['start_url']}]"] if restart else []
        urls = {ph: f"{PUBLIC}/{site}" for site, ph in PLACEHOLDERS.items()}
        filled: list[str] = substitute({"task_id": task["task_id"], "actions": start + list(actions)}, urls)["actions"]
        return filled

    def _next(self, script: list[str]) -> str | None:
        """The script's next action resolved against the page shown now; None when the page does
        not offer it (a detour changed the state) or the script is over."""
        if not script:
            return None
        try:
            return resolve(script.pop(0), self.env.text)
        except ReplayError:
            script.clear()
            return None

    def admissible(self) -> list[str]:
        # Clicks on what the page shows (page order); typing is left to the plans. No `go_back`: the
        # tab's history reaches into the previous episode, which a resumed collection did not play.
        clicks = [
            f"click [{m[1]}]" for m in re.finditer(r"^\s*\[(\d+)\] (\w+) ", self.env.text, re.M) if m[2] in CLICKABLE
        ]
        return clicks or self._script(self.task, [], restart=True)  # a page without links: back to the start

    def detoured(self) -> None:
        """An action off the plan was played: start the gold plan again from the start page."""
        self._plan = self._script(self.task, self.task["cdwm"]["reference_actions"], restart=True)

    def expert(self) -> str | None:
        return self._next(self._plan)

    def toward_irreversible(self) -> str | None:
        """The next step of an irreversible trap's script, from its start page: the task's own when
        it is such a trap, else the site's first."""
        if not self._detour:
            trap = self._trap
            self._detour = self._script(
                trap, [a for a in trap["cdwm"]["wrong_actions"] if not a.startswith("stop")], restart=True
            )
        return self._next(self._detour)

    def won(self, done: bool) -> bool:
        # The evaluator may navigate (program_html): it is asked only once the episode is over.
        return done and self.env.evaluate().get("success", 0.0) >= 1.0

    def close(self) -> None:
        pass  # the browser and the server are the world's, reused by the next episode


class WebWorld:
    name = "web"
    task_types = SITES
    default_heldout = ("mail",)  # the held-out website: a site never seen in training
    # rule perturbation -> (its site, the button whose effect it changes)
    RULE_BUTTONS = {
        "order_keeps_cart": ("shop", "Place order"),
        "cancel_refunds_nothing": ("travel", "Confirm cancellation"),
    }
    perturbations = {name: (site,) for name, (site, _) in RULE_BUTTONS.items()}
    rule_changes = rules.RULES  # what each changes (the dataset card says it)
    max_steps = 15

    def __init__(self) -> None:
        # Per thread: a browser answers only the thread that started it (Playwright's sync API), so a
        # collection on the main thread and the planner on its world thread each have their own.
        self._webs: dict[int, StableWeb] = {}
        self._tasks: dict[str, dict[str, Any]] | None = None

    @property
    def tasks(self) -> dict[str, dict[str, Any]]:
        if self._tasks is None:
            self._tasks = {t["task_id"]: t for t in load_tasks() if playable(t)}
        return self._tasks

    def traps(self) -> dict[str, dict[str, Any]]:
        """Per site, the first irreversible trap (by task id)."""
        found: dict[str, dict[str, Any]] = {}
        for _, t in sorted(self.tasks.items()):
            c = t["cdwm"]
            if c.get("trap_kind") == "irreversible" and c["site"] not in found:
                found[c["site"]] = t
        return found

    def spec(self, task_type: str, index: int, seed: int, perturbation: str | None) -> WebSpec:
        pool = sorted(i for i, t in self.tasks.items() if t["cdwm"]["site"] == task_type)
        if perturbation is not None and rules.check(perturbation):
            # The held-out rule split: tasks whose gold plan presses the button whose effect changed.
            button = f"'{self.RULE_BUTTONS[perturbation][1]}'"
            pool = [i for i in pool if any(button in a for a in self.tasks[i]["cdwm"]["reference_actions"])]
            if not pool:
                raise HarnessError(
                    f"rule perturbation {perturbation!r} changes nothing a {task_type} task's gold "
                    f"plan does; it applies to {', '.join(self.perturbations[perturbation])}"
                )
            return {"task_id": pool[(index // 2 + seed) % len(pool)], "perturbation": perturbation}
        # Train plays even task indices, validation odd ones: alternate tasks of a site go to each.
        half = pool[index % 2 :: 2] or pool
        return {"task_id": half[(index // 2 + seed) % len(half)], "perturbation": None}

    @property
    def _web(self) -> StableWeb | None:
        """This thread's browser and server, kept for its next episode."""
        return self._webs.get(threading.get_ident())

    def open(self, spec: WebSpec) -> WebEpisode:
        web = self._web
        if web is None or web.env._closed:
            web = self._webs[threading.get_ident()] = StableWeb(WebEnvironment(max_steps=self.max_steps + 10))
        return WebEpisode(spec, web, self.tasks, self.traps())

    def shutdown(self) -> None:
        """Stop this thread's browser and server (they also stop at exit)."""
        web = self._webs.pop(threading.get_ident(), None)
        if web is not None:
            web.env.close()


WORLD = WebWorld()
