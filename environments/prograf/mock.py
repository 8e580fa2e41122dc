"""A deterministic, fault-injecting mock generator, for tests only -- SYNTHETIC, never a result.

It reads the task out of the prompt, and answers in the format asked with the task's reference
or with one of its mutants: a mutant is chosen when a seeded draw falls under the failure rate of
the component its target point is about (`weakness`, else `base`). It can also answer with
unreadable code (`format_error`) or a hostile payload (`hostile`). Every name it carries starts
with `synthetic/`, so that a report or a leaderboard can tell (and refuse) it.

Profiles: `perfect` (references only), `uniform` (the negative control: one rate for every
component), `weak-circuits` (the positive control: wires and grounds fail often, little else) and
`weak-parts` (resistors and capacitors fail often: the "another generator" of the other-profile
ablation).
As a provider (entry point `synthetic`): `synthetic/prograf-uniform`, `synthetic/prograf-perfect`...

`StepMock` is the same mock made step-aware (what the provider hands out; a whole-diagram request
gets the plain mock's answer, so profiles are unchanged): it reads a ProGraf-loop step request's
focus and keep lists from the prompt; a focused component fails at
`rate x (ATTENTION_FLOOR + (1 - ATTENTION_FLOOR) x share)` (share = focused / all components: the
fewer things a step asks for, the better each is drawn), a kept one at `rate x KEEP_FACTOR` (a
step may regress what was accepted), any other at its plain rate. These knobs were set before any
control was run.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from environments.prograf.formats import FENCES
from environments.prograf.generate.build import CORPUS
from environments.prograf.task import Task, load_tasks
from harness.errors import HarnessError
from harness.messages import ChatMessage, text_of
from harness.providers.base import GenerateConfig, ModelError, ModelOutput, Usage
from harness.spec import ModelSpec

ATTENTION_FLOOR = 0.25
KEEP_FACTOR = 0.1

HOSTILE = {
    "svg": '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg">&x;<script>alert(1)</script></svg>',
    "dot": 'digraph G { a [image="/etc/passwd", label="a"]; a -> b [URL="file:///etc/shadow"]; }',
    "mermaid": 'flowchart TD\n  A["x"] --> B["y"]\n  click A "javascript:alert(1)"',
    "schemdraw-json": '{"elements": [{"type": "Resistor", "at": "__import__(\'os\').system(\'id\')"}]}',
    "schemdraw-py": "import os\nos.system('touch /tmp/prograf-pwned')\n",
}


@dataclass(frozen=True)
class FaultProfile:
    name: str
    base: float = 0.0
    weakness: dict[str, float] = field(default_factory=dict)
    format_error: float = 0.0
    hostile: float = 0.0

    def rate(self, component: str) -> float:
        return self.weakness.get(component, self.base)


PROFILES = {
    "perfect": FaultProfile("perfect"),
    "uniform": FaultProfile("uniform", base=0.08, format_error=0.05),
    "weak-circuits": FaultProfile("weak-circuits", base=0.01,
                                  weakness={"wire": 0.35, "ground": 0.5}, format_error=0.02),
    "hostile": FaultProfile("hostile", hostile=1.0),
    # another generator for the other-profile ablation: weak where weak-circuits is strong
    "weak-parts": FaultProfile("weak-parts", base=0.01, weakness={"resistor": 0.35, "capacitor": 0.35}, format_error=0.02),
}


class SyntheticGenerator:
    """A model (the provider protocol's `generate`) that draws from the corpus, with faults."""

    def __init__(self, profile: FaultProfile, tasks: list[Task]):
        self.profile = profile
        self.name = f"synthetic/prograf-{profile.name}"
        self.tasks = tasks
        self.calls = 0

    def find(self, text: str) -> Task:
        for t in self.tasks:
            if t.prompt in text:
                return t
        raise ModelError(f"{self.name}: the prompt is not one of the corpus's tasks")

    def answer(self, task: Task, fmt: str, seed: int) -> tuple[str, str]:
        """(the code, what was injected), a pure function of task, format, seed and profile."""
        key = f"{self.profile.name}/{task.id}/{fmt}/{seed}"
        rng = random.Random(hashlib.sha256(key.encode()).hexdigest())
        if rng.random() < self.profile.hostile:
            return HOSTILE[fmt], "hostile"
        if rng.random() < self.profile.format_error:
            whole = next((s for s in task.reference if s.format == fmt), task.reference[0])
            return whole.code[: len(whole.code) // 3], "format_error"
        mutants = [m for m in task.mutants if m.format == fmt and not m.needs_render]
        rng.shuffle(mutants)
        for m in mutants:
            if rng.random() < self.profile.rate(task.point(m.target or "").component):
                return m.code, f"mutant:{m.target}"
        ref = next((s for s in task.reference if s.format == fmt), None)
        if ref is None:
            raise ModelError(f"{self.name}: task {task.id} has no reference in {fmt}")
        return ref.code, "reference"

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        self.calls += 1
        text = text_of(messages[-1])
        task = self.find(text)
        m = re.search(r"Answer format: ([\w-]+)\.", text)
        fmt = m.group(1) if m else task.formats[0]
        code, _ = self.answer(task, fmt, config.seed or 0)
        reply = f"```{FENCES[fmt][0]}\n{code}\n```"
        return ModelOutput(text=reply, usage=Usage(prompt_tokens=len(text) // 4, completion_tokens=len(reply) // 4, calls=1))

    async def aclose(self) -> None:
        pass


class StepMock(SyntheticGenerator):
    """The synthetic mock made step-aware (see the module docstring); SYNTHETIC, never a result."""

    def __init__(self, profile_name: str, tasks: list[Task]):
        if profile_name not in PROFILES:
            raise HarnessError(f"StepMock: unknown profile {profile_name!r} (choose {', '.join(PROFILES)})")
        super().__init__(PROFILES[profile_name], tasks)

    def step_answer(self, task: Task, fmt: str, seed: int, focus: set[str], keep: set[str]) -> str:
        key = f"step/{self.profile.name}/{task.id}/{fmt}/{seed}"
        rng = random.Random(hashlib.sha256(key.encode()).hexdigest())
        if rng.random() < self.profile.format_error:
            ref = next(s for s in task.reference if s.format == fmt)
            return ref.code[: len(ref.code) // 3]
        share = len(focus) / max(1, len({vp.component for vp in task.points}))
        mutants = [m for m in task.mutants if m.format == fmt and not m.needs_render]
        rng.shuffle(mutants)
        for m in mutants:
            comp = task.point(m.target or "").component
            rate = self.profile.rate(comp)
            if comp in focus:
                rate *= ATTENTION_FLOOR + (1 - ATTENTION_FLOOR) * share
            elif comp in keep:
                rate *= KEEP_FACTOR
            if rng.random() < rate:
                return m.code
        return next(s.code for s in task.reference if s.format == fmt)

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        text = text_of(messages[-1])
        focus = re.search(r"^Focus components: (.*)\.$", text, re.M)
        if focus is None:  # a whole-diagram request: the plain mock
            return await super().generate(messages, config)
        self.calls += 1
        task = self.find(text)
        m = re.search(r"Answer format: ([\w-]+)\.", text)
        fmt = m.group(1) if m else task.formats[0]
        keep = re.search(r"^Keep components: (.*)\.$", text, re.M)
        code = self.step_answer(task, fmt, config.seed or 0, set(focus.group(1).split(", ")),
                                set(keep.group(1).split(", ")) if keep else set())
        reply = f"```{FENCES[fmt][0]}\n{code}\n```"
        return ModelOutput(text=reply, usage=Usage(prompt_tokens=len(text) // 4, completion_tokens=len(reply) // 4, calls=1))


def generator(name: str, corpus: Path = CORPUS) -> SyntheticGenerator:
    """`prograf-uniform` -> the (step-aware) mock with the `uniform` profile over the corpus."""
    profile = name.removeprefix("prograf-")
    if profile not in PROFILES:
        raise HarnessError(f"synthetic/{name}: unknown profile (choose prograf-{', prograf-'.join(PROFILES)})")
    return StepMock(profile, load_tasks(corpus))


class SyntheticProvider:
    """`synthetic/prograf-PROFILE`: the mock generator as a provider (tests only; labelled synthetic)."""

    name = "synthetic"
    synthetic = True  # leaderboard export refuses its runs (harness.providers.is_synthetic)

    def validate(self, spec: ModelSpec) -> None:
        if spec.name.removeprefix("prograf-") not in PROFILES:
            raise HarnessError(f"synthetic/{spec.name}: unknown profile (choose prograf-{', prograf-'.join(PROFILES)})")

    def create(self, spec: ModelSpec) -> SyntheticGenerator:
        return generator(spec.name)


PROVIDER = SyntheticProvider()
