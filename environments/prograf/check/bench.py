"""`harness bench prograf`: the verifier's own cost, no model.

Every reference and every mutant of the corpus is verified: structurally (parse + checks), then,
with `render`, again with SVG renders (a fresh renderer: every render is a miss) and a third time
(the same renderer: every render a cache hit). Reported per category: outputs verified, mean and
p95 milliseconds per output, seconds per task (all its outputs), and the correctness of the
verifier on its own corpus (references passed, mutants that failed their target).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Required, TypedDict

from environments.prograf.check.render import Renderer
from environments.prograf.check.verify import verify
from environments.prograf.generate.build import CORPUS
from environments.prograf.task import Task, load_tasks
from harness.stats import nearest_rank


class CategoryCost(TypedDict):
    outputs: int
    ms_mean: float
    ms_p95: float
    s_per_task: float


class Pass(TypedDict, total=False):
    """One pass over the corpus's outputs."""

    categories: Required[dict[str, CategoryCost]]
    references_passed: Required[str]  # "passed/all"
    mutants_caught: Required[str]  # "caught/all"
    seconds: Required[float]
    renders: int  # the cold pass: renders made, and their seconds
    render_s: float
    cache_hit_rate: float  # the warm pass


class BenchResult(TypedDict, total=False):
    tasks: Required[int]
    structural: Required[Pass]
    rendered_cold: Pass
    rendered_warm: Pass


def verify_all(tasks: list[Task], renderer: Renderer | None) -> Pass:
    times: dict[str, list[float]] = defaultdict(list)
    per_task: dict[str, list[float]] = defaultdict(list)
    refs_ok = refs = caught = mutants = 0
    for task in tasks:
        start = time.perf_counter()
        for ref in task.reference:
            v = verify(task, ref.format, ref.code, renderer)
            times[task.category].append(v.seconds)
            refs += 1
            refs_ok += v.passed
        for m in task.mutants:
            if m.needs_render and renderer is None:
                continue
            v = verify(task, m.format, m.code, renderer)
            times[task.category].append(v.seconds)
            mutants += 1
            caught += not next(p for p in v.points if p.id == m.target).passed
        per_task[task.category].append(time.perf_counter() - start)
    return {"categories": {c: {"outputs": len(t), "ms_mean": 1000 * sum(t) / len(t), "ms_p95": 1000 * nearest_rank(t, 0.95),
                               "s_per_task": sum(per_task[c]) / len(per_task[c])} for c, t in times.items()},
            "references_passed": f"{refs_ok}/{refs}", "mutants_caught": f"{caught}/{mutants}",
            "seconds": sum(sum(t) for t in times.values())}


def run_bench(render: bool = True, limit: int | None = None) -> BenchResult:
    tasks = load_tasks(CORPUS)[:limit] if limit else load_tasks(CORPUS)
    result: BenchResult = {"tasks": len(tasks), "structural": verify_all(tasks, None)}
    if render:
        renderer = Renderer()
        try:
            cold = verify_all(tasks, renderer)
            cold["renders"], cold["render_s"] = renderer.stats.renders, renderer.stats.seconds
            result["rendered_cold"] = cold
            before = renderer.stats.cache_hits
            warm = verify_all(tasks, renderer)
            svg = sum(1 for t in tasks for s in t.reference + t.mutants if s.format == "svg")
            warm["cache_hit_rate"] = (renderer.stats.cache_hits - before) / max(1, svg)
            result["rendered_warm"] = warm
        finally:
            renderer.close()
    return result


def format_table(result: BenchResult) -> str:
    lines = [f"ProGraf verifier over {result['tasks']} tasks (references + mutants)"]
    passes = (("structural", result["structural"]), ("rendered_cold", result.get("rendered_cold")),
              ("rendered_warm", result.get("rendered_warm")))
    for mode, r in passes:
        if r is None:
            continue
        extra = f", {r['renders']} renders in {r['render_s']:.1f} s" if "renders" in r else ""
        extra += f", cache hit rate {r['cache_hit_rate']:.0%}" if "cache_hit_rate" in r else ""
        lines.append(f"{mode}: {r['seconds']:.1f} s; references passed {r['references_passed']}, "
                     f"mutants caught {r['mutants_caught']}{extra}")
        for cat, c in r["categories"].items():
            lines.append(f"  {cat:<10} {c['outputs']:>5} outputs  {c['ms_mean']:7.2f} ms mean  {c['ms_p95']:7.2f} ms p95"
                         f"  {c['s_per_task']:.3f} s/task")
    return "\n".join(lines)
