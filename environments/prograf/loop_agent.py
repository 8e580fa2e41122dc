"""The ProGraf loop as a LangGraph graph: draw a structured diagram one verified step at a time.

    START -> plan -> generate -> verify -> (commit | rollback) -> (generate | replan | finalize) -> END

`plan` groups the loop's checks into steps by component. Guided by a profile (component failure
rates), the weakest components each get a step of their own, weakest first; without one, the
first components in the prompt's order do. Both plans have the same shape (so an ablation changes
only *which* components are isolated, not how many steps there are). `generate` asks for the next
version of the whole diagram, focused on the step's checks and told to keep the accepted ones;
`verify` runs the step's checks and every accepted one (a regression guard); `commit` keeps the new
code and accepts the step, `rollback` keeps the old code (both record the step's draw and its check
results in the trace, so every step can be pictured); `replan` splits a failed step into one step
per component (failed ones first) or, for a one-component step, retries it with the failures as
feedback. Every generator call counts against `LoopConfig.budget`; `finalize` returns the last
committed code (or, if nothing was committed, the draw that passed most checks).

The graph knows no environment type: the suite passes in `draw` (one generator call for a
`StepRequest`, returning code or None), `check` (code, check ids -> pass per id) and the profile's
component rates as a plain mapping. Where the checks come from (the prompt, or an oracle as a
labelled upper bound) is the suite's business. The baselines at equal budget live here too, as
plain functions over the same callables: `single_shot`, `best_of`, `reflexion`; `fixed-step` is the
graph without profile and without replanning.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import Required, TypedDict  # pydantic validates a typing.TypedDict only from Python 3.12


@dataclass(frozen=True)
class CheckItem:
    """One check the loop may run: its id, the component it is about, the fact in words."""

    id: str
    component: str
    text: str


@dataclass(frozen=True)
class StepRequest:
    """What one generator call is asked: the committed code, the step's checks, what to keep."""

    call: int  # 0-based index of this call in the sample (the generator's seed offset)
    code: str | None
    focus: tuple[CheckItem, ...]
    keep: tuple[CheckItem, ...] = ()
    feedback: tuple[str, ...] = ()
    whole: bool = False  # a whole-diagram request (baselines): every check matters at once


Draw = Callable[[StepRequest], Awaitable[str | None]]
Check = Callable[[str, list[str]], Awaitable[Mapping[str, bool]]]


@dataclass
class LoopConfig:
    budget: int = 8  # generator calls per task
    steps: int = 3  # planned steps: steps-1 isolated components, then the rest together
    use_profile: bool = True
    verify: bool = True
    rollback: bool = True
    replan: bool = True


class TraceEntry(TypedDict, total=False):
    """One node's line in the loop's trace; which keys it has depends on the node."""

    node: Required[str]  # plan, commit, rollback, replan, finalize
    steps: list[list[str]]  # plan, replan: the components of each planned step
    call: int  # commit, rollback: the generator call it judged
    accepted: int  # commit: checks accepted so far
    failed: int  # rollback: checks that failed
    code: str | None  # commit, rollback: what the step drew
    checks: dict[str, bool]  # commit, rollback: how each check came out
    calls: int  # finalize: calls spent
    open_steps: int  # finalize: steps left unplanned


class LoopState(TypedDict, total=False):
    plan: list[list[CheckItem]]
    accepted: list[CheckItem]
    code: str | None
    candidate: str | None
    results: dict[str, bool]
    calls: int
    feedback: list[str]
    best: tuple[int, str | None]
    trace: list[TraceEntry]


def components_in_order(checks: list[CheckItem]) -> list[str]:
    seen: list[str] = []
    for c in checks:
        if c.component not in seen:
            seen.append(c.component)
    return seen


def make_plan(checks: list[CheckItem], rates: Mapping[str, float], steps: int) -> list[list[CheckItem]]:
    """Steps of checks: `steps - 1` components alone (the weakest by `rates`, else the first in the
    prompt's order), then every other component in one last step."""
    order = components_in_order(checks)
    if rates:
        order = sorted(order, key=lambda c: -rates.get(c, 0.0))  # stable: ties keep the prompt's order
    alone, rest = order[: max(0, steps - 1)], order[max(0, steps - 1):]
    plan = [[c for c in checks if c.component == comp] for comp in alone]
    tail = [c for c in checks if c.component in rest]
    return [step for step in plan + [tail] if step]


class ProGrafLoop:
    """The loop of one task: nodes are methods (callable on a hand-made state), `graph()` wires them."""

    def __init__(self, checks: list[CheckItem], draw: Draw, check: Check, rates: Mapping[str, float],
                 cfg: LoopConfig | None = None):
        self.checks, self.draw, self.check, self.cfg = checks, draw, check, cfg or LoopConfig()
        self.rates = rates if self.cfg.use_profile else {}

    async def plan(self, state: LoopState) -> LoopState:
        plan = make_plan(self.checks, self.rates, self.cfg.steps)
        return {"plan": plan, "accepted": [], "code": None, "calls": 0, "feedback": [], "best": (-1, None),
                "trace": [{"node": "plan", "steps": [components_in_order(s) for s in plan]}]}

    async def generate(self, state: LoopState) -> LoopState:
        step = state["plan"][0]
        request = StepRequest(call=state["calls"], code=state["code"], focus=tuple(step),
                              keep=tuple(state["accepted"]), feedback=tuple(state["feedback"]))
        code = await self.draw(request)
        return {"candidate": code, "calls": state["calls"] + 1}

    async def verify(self, state: LoopState) -> LoopState:
        step, code = state["plan"][0], state["candidate"]
        wanted = [c.id for c in step + state["accepted"]]
        if not self.cfg.verify:
            return {"results": dict.fromkeys(wanted, True)}
        results = dict(await self.check(code, wanted)) if code is not None else dict.fromkeys(wanted, False)
        passed = sum(results.values())
        best = state["best"] if state["best"][0] >= passed else (passed, code)
        return {"results": results, "best": best}

    def step_passed(self, state: LoopState) -> bool:
        return all(state["results"].values())

    def after_verify(self, state: LoopState) -> str:
        return "commit" if self.step_passed(state) or not self.cfg.rollback else "rollback"

    async def commit(self, state: LoopState) -> LoopState:
        step = state["plan"][0]
        ok = [c for c in step if state["results"].get(c.id)]
        accepted = [c for c in state["accepted"] if state["results"].get(c.id)] + ok
        failed = [c for c in step + state["accepted"] if not state["results"].get(c.id)]
        plan = state["plan"][1:] + ([failed] if failed else [])  # no rollback: what failed comes back later
        return {"code": state["candidate"], "accepted": accepted, "plan": plan, "feedback": [],
                "trace": state["trace"] + [self.step_record(state, {"node": "commit", "call": state["calls"],
                                                                    "accepted": len(accepted)})]}

    async def rollback(self, state: LoopState) -> LoopState:
        failed = [c.text for c in state["plan"][0] + state["accepted"] if not state["results"].get(c.id)]
        return {"feedback": failed,
                "trace": state["trace"] + [self.step_record(state, {"node": "rollback", "call": state["calls"],
                                                                    "failed": len(failed)})]}

    def step_record(self, state: LoopState, entry: TraceEntry) -> TraceEntry:
        """`entry` and what the step drew and how its checks came out (for the step-by-step pictures)."""
        entry["code"], entry["checks"] = state["candidate"], dict(state["results"])
        return entry

    async def replan(self, state: LoopState) -> LoopState:
        step = state["plan"][0]
        comps = components_in_order(step)
        if len(comps) == 1:
            return {}
        failed = {c.component for c in step if not state["results"].get(c.id)}
        split = sorted(comps, key=lambda comp: comp not in failed)  # failed components first
        new = [[c for c in step if c.component == comp] for comp in split]
        return {"plan": new + state["plan"][1:],
                "trace": state["trace"] + [{"node": "replan", "steps": [components_in_order(s) for s in new]}]}

    def route(self, state: LoopState) -> str:
        if not state["plan"] or state["calls"] >= self.cfg.budget:
            return "finalize"
        return "generate"

    def after_rollback(self, state: LoopState) -> str:
        if state["calls"] >= self.cfg.budget:
            return "finalize"
        return "replan" if self.cfg.replan else "generate"

    async def finalize(self, state: LoopState) -> LoopState:
        code = state["code"] if state["code"] is not None else state["best"][1]
        return {"code": code, "trace": state["trace"] + [{"node": "finalize", "calls": state["calls"],
                                                          "open_steps": len(state["plan"])}]}

    def graph(self) -> Any:
        graph = StateGraph(LoopState)
        for name in ("plan", "generate", "verify", "commit", "rollback", "replan", "finalize"):
            graph.add_node(name, getattr(self, name))
        graph.add_edge(START, "plan")
        graph.add_conditional_edges("plan", self.route, ["generate", "finalize"])
        graph.add_edge("generate", "verify")
        graph.add_conditional_edges("verify", self.after_verify, ["commit", "rollback"])
        graph.add_conditional_edges("commit", self.route, ["generate", "finalize"])
        graph.add_conditional_edges("rollback", self.after_rollback, ["replan", "generate", "finalize"])
        graph.add_edge("replan", "generate")
        graph.add_edge("finalize", END)
        return graph.compile()

    async def run(self) -> LoopState:
        # each call passes through at most 5 nodes (generate, verify, commit|rollback, replan)
        final: LoopState = await self.graph().ainvoke({}, {"recursion_limit": 6 * self.cfg.budget + 10})
        return final


def build(checks: list[CheckItem], draw: Draw, check: Check, rates: Mapping[str, float],
          cfg: LoopConfig | None = None) -> Any:
    """The compiled loop graph of one task."""
    return ProGrafLoop(checks, draw, check, rates, cfg).graph()


# ---------------------------------------------------------------------- baselines at equal budget
@dataclass
class Outcome:
    code: str | None
    calls: int
    trace: list[TraceEntry] = field(default_factory=list)


async def single_shot(checks: list[CheckItem], draw: Draw) -> Outcome:
    code = await draw(StepRequest(call=0, code=None, focus=tuple(checks), whole=True))
    return Outcome(code, 1)


async def best_of(checks: list[CheckItem], draw: Draw, check: Check, budget: int) -> Outcome:
    """B independent whole drafts; keep the one passing most of the loop's checks (stop at a full pass)."""
    best: tuple[int, str | None] = (-1, None)
    ids = [c.id for c in checks]
    for call in range(budget):
        code = await draw(StepRequest(call=call, code=None, focus=tuple(checks), whole=True))
        if code is None:
            continue
        passed = sum((await check(code, ids)).values())
        if passed > best[0]:
            best = (passed, code)
        if passed == len(ids):
            return Outcome(code, call + 1)
    return Outcome(best[1], budget)


async def reflexion(checks: list[CheckItem], draw: Draw, check: Check, budget: int) -> Outcome:
    """Whole drafts; after a failure the failed checks become a reflection the next draft attends to."""
    best: tuple[int, str | None] = (-1, None)
    ids = [c.id for c in checks]
    focus: tuple[CheckItem, ...] = tuple(checks)
    feedback: tuple[str, ...] = ()
    for call in range(budget):
        code = await draw(StepRequest(call=call, code=None, focus=focus, feedback=feedback, whole=not feedback))
        results = dict(await check(code, ids)) if code is not None else dict.fromkeys(ids, False)
        passed = sum(results.values())
        if passed > best[0]:
            best = (passed, code)
        if passed == len(ids):
            return Outcome(code, call + 1)
        failed = tuple(c for c in checks if not results.get(c.id))
        focus, feedback = failed, tuple(f"last draft failed: {c.text}" for c in failed)
    return Outcome(best[1], budget)
