"""Capability profiles: what one generator gets wrong, measured from k single-shot samples per task.

A profile is a pydantic model saved as JSON (`CapabilityProfile.save` / `load_profile`), so any run
can name it (`--suite-option profile=FILE`). It holds, with bootstrap CIs over tasks (the
independent unit):
- per-category reliability: share of samples that pass every critical point;
- per-component failure rates: failed / checked points of that component, over readable samples
  (a gated point was not checked; an unreadable sample is a format error, not a component failure);
- recurrent failure patterns: (component, pattern) pairs, with the number of tasks where the pair
  failed in at least two of the k samples (recurrent, not a one-off);
- size sensitivity (pass rate per size band) and format error rates per format;
- the hardest subset, by the rule `HARDEST_RULE` (pass@k = 0), and each task's own counts, which
  make cross-fitting cheap: `component_rates(exclude=task_id)` rebuilds the rates without the
  fold that holds that task, so a task's plan is never guided by its own samples.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from environments.prograf.check.render import Renderer
from environments.prograf.check.verify import Verdict, verify
from environments.prograf.formats import extract_code, user_prompt
from environments.prograf.metrics import UNREADABLE
from environments.prograf.task import CATEGORIES, Task
from harness.errors import HarnessError, invalid
from harness.providers.base import GenerateConfig, ModelError
from harness.records import Metric
from harness.stats import ratio_metric

PROFILE_VERSION = "1"
HARDEST_RULE = "pass@k = 0: none of the generator's k single-shot samples passed every critical point"
SIZE_BANDS = ((0, 6, "small"), (6, 11, "medium"), (11, 10**9, "large"))
SYSTEM = ("You draw structured diagrams as code. Follow the request exactly: every named object, relation,"
          " connection and label it asks for, and nothing else. Reply with the code block only.")


class TaskCounts(BaseModel):
    """One task's k samples, counted (enough to rebuild every rate without it)."""

    task_id: str
    category: str
    size: int
    format: str
    k: int
    passes: int
    format_errors: int = 0
    checked: dict[str, int] = Field(default_factory=dict, description="component -> points checked (readable samples)")
    failed: dict[str, int] = Field(default_factory=dict, description="component -> points failed (not gated)")
    patterns: dict[str, int] = Field(default_factory=dict, description="'component/pattern' -> samples where it failed")


class PatternRow(BaseModel):
    component: str
    pattern: str
    failures: int = Field(description="samples in which a point of this component failed with this pattern")
    recurrent_tasks: int = Field(description="tasks where it happened in >= 2 of the k samples")


class CapabilityProfile(BaseModel):
    version: str = PROFILE_VERSION
    generator: str = Field(description="the model spec profiled")
    synthetic: bool = Field(description="a synthetic mock: for tests only, never a result")
    k: int
    seed: int
    folds: int = Field(5, description="cross-fitting folds (a task's fold = sha256(task id) mod folds)")
    corpus_sha256: str | None = None
    hardest_rule: str = HARDEST_RULE
    category_reliability: dict[str, Metric]
    component_failure: dict[str, Metric]
    patterns: list[PatternRow]
    size_sensitivity: dict[str, Metric]
    format_error_rate: dict[str, Metric]
    hardest: list[str] = Field(description="task ids of the hardest subset, in corpus order")
    tasks: list[TaskCounts]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=1) + "\n", encoding="utf-8")

    def fold_of(self, task_id: str) -> int:
        return int(hashlib.sha256(task_id.encode()).hexdigest(), 16) % self.folds

    def component_rates(self, exclude: str | None = None) -> dict[str, float]:
        """Failure rate per component; with `exclude`, cross-fitted: built without that task's fold."""
        fold = self.fold_of(exclude) if exclude is not None else None
        checked: dict[str, int] = {}
        failed: dict[str, int] = {}
        for t in self.tasks:
            if fold is not None and self.fold_of(t.task_id) == fold:
                continue
            for comp, n in t.checked.items():
                checked[comp] = checked.get(comp, 0) + n
                failed[comp] = failed.get(comp, 0) + t.failed.get(comp, 0)
        return {comp: failed[comp] / n for comp, n in sorted(checked.items()) if n}


def load_profile(path: Path) -> CapabilityProfile:
    if not path.is_file():
        raise HarnessError(f"profile {path}: no such file (build one: harness prograf profile --generator SPEC --out {path})")
    try:
        return CapabilityProfile.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:  # not JSON at all is an error at `(top level)`
        raise HarnessError(invalid(exc, f"profile {path}", "rebuild it: harness prograf profile --generator SPEC "
                                   f"--out {path}")) from None


# ---------------------------------------------------------------------- sampling
async def sample_task(model: Any, task: Task, fmt: str, k: int, seed: int, renderer: Renderer | None,
                      max_tokens: int = 2048) -> list[Verdict | None]:
    """k single-shot verdicts (None: no code came back)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_prompt(task.prompt, fmt)}]
    verdicts: list[Verdict | None] = []
    for i in range(k):
        try:
            out = await model.generate(messages, GenerateConfig(max_tokens=max_tokens, seed=seed + i))
        except ModelError:
            verdicts.append(None)
            continue
        code, _ = extract_code(out.text, fmt)
        verdicts.append(None if code is None else await asyncio.to_thread(verify, task, fmt, code, renderer))
    return verdicts


def count_task(task: Task, fmt: str, verdicts: list[Verdict | None]) -> TaskCounts:
    counts = TaskCounts(task_id=task.id, category=task.category, size=task.size, format=fmt, k=len(verdicts),
                        passes=sum(bool(v and v.passed) for v in verdicts))
    for v in verdicts:
        if v is None or v.error is not None or any(p.pattern in UNREADABLE for p in v.points):
            counts.format_errors += 1
            continue
        seen: set[str] = set()
        for p in v.points:
            if p.gated:
                continue
            counts.checked[p.component] = counts.checked.get(p.component, 0) + 1
            if not p.passed:
                counts.failed[p.component] = counts.failed.get(p.component, 0) + 1
                seen.add(f"{p.component}/{p.pattern}")
        for key in seen:
            counts.patterns[key] = counts.patterns.get(key, 0) + 1
    return counts


def summarise(tasks: list[TaskCounts], *, generator: str, k: int, seed: int, corpus_sha256: str | None = None,
              folds: int = 5) -> CapabilityProfile:
    """The profile of these task counts (bootstrap CIs over tasks, seeded)."""

    def share(rows: list[list[float]]) -> Metric:
        arr = np.asarray(rows, dtype=float).reshape(-1, 2)
        return ratio_metric(arr, lambda c: c[0], lambda c: c[1], seed=seed)

    categories = {c: share([[t.passes, t.k] for t in tasks if t.category == c]) for c in CATEGORIES
                  if any(t.category == c for t in tasks)}
    components = sorted({c for t in tasks for c in t.checked})
    component_failure = {c: share([[t.failed.get(c, 0), t.checked[c]] for t in tasks if c in t.checked])
                         for c in components}
    pairs = sorted({key for t in tasks for key in t.patterns})
    patterns = [PatternRow(component=key.split("/")[0], pattern=key.split("/", 1)[1],
                           failures=sum(t.patterns.get(key, 0) for t in tasks),
                           recurrent_tasks=sum(t.patterns.get(key, 0) >= 2 for t in tasks)) for key in pairs]
    patterns.sort(key=lambda r: (-r.recurrent_tasks, -r.failures, r.component, r.pattern))
    sizes = {name: share([[t.passes, t.k] for t in tasks if lo <= t.size < hi]) for lo, hi, name in SIZE_BANDS
             if any(lo <= t.size < hi for t in tasks)}
    formats = {f: share([[t.format_errors, t.k] for t in tasks if t.format == f]) for f in sorted({t.format for t in tasks})}
    return CapabilityProfile(generator=generator, synthetic=generator.startswith("synthetic/"), k=k, seed=seed,
                             folds=folds, corpus_sha256=corpus_sha256, category_reliability=categories,
                             component_failure=component_failure, patterns=patterns, size_sensitivity=sizes,
                             format_error_rate=formats, hardest=[t.task_id for t in tasks if t.passes == 0], tasks=tasks)


async def build_profile(model: Any, tasks: list[Task], *, generator: str, k: int = 5, seed: int = 0,
                        fmt: str = "auto", renderer: Renderer | None = None, concurrency: int = 8,
                        corpus_sha256: str | None = None) -> CapabilityProfile:
    """Sample every task k times (seeds seed..seed+k-1), verify, and summarise."""
    if k < 1:
        raise HarnessError(f"profile: --k {k}: take at least one sample per task")
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> TaskCounts:
        chosen = fmt if fmt in task.formats else task.formats[0]
        async with gate:
            return count_task(task, chosen, await sample_task(model, task, chosen, k, seed, renderer))

    counts = await asyncio.gather(*(one(t) for t in tasks))
    return summarise(list(counts), generator=generator, k=k, seed=seed, corpus_sha256=corpus_sha256)
