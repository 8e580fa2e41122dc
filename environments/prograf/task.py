"""The ProGraf task format: a prompt, the formats it may be answered in, a hidden structured spec,
typed verification points (VPs), a reference solution and mutants.

A VP names a `check` (the predicate the verifier runs, `check/registry.py`), its `kind` (exists / count /
relation / connection / label / absent), the `component` it is about (what per-component metrics
group by), the spec entities it is about (`args`), an expected `value`, a `tolerance` and the VPs it
`depends_on`: a failed parent gates its children (DSG), so one missing point is not also five
failed relations. `CHECKS` says which kind and how many arguments each check takes; a task file
that breaks it is one error naming the task id and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import HarnessError, invalid

Category = Literal["geometry", "circuit", "flowchart", "diagram"]
Format = Literal["svg", "dot", "mermaid", "schemdraw-json", "schemdraw-py"]
Kind = Literal["exists", "count", "relation", "connection", "label", "absent"]
CATEGORIES: tuple[Category, ...] = ("geometry", "circuit", "flowchart", "diagram")
FORMATS: tuple[Format, ...] = ("svg", "dot", "mermaid", "schemdraw-json", "schemdraw-py")

# The geometry checks that relate points to one another (kind "relation" below), in one list for
# the writers and readers that treat them alike (generate/foreign_geometry.py, image/geometry.py).
GEOMETRY_RELATIONS: tuple[str, ...] = ("midpoint", "perpendicular", "parallel", "on_circle", "angle", "equal_angle",
                                       "equal_length", "collinear", "on_segment")

# check name -> (kind, number of args): the contract between the task file and the verifier.
CHECKS: dict[str, tuple[Kind, int]] = {
    # geometry (an SVG scene: labelled points, segments, circles, texts)
    "point": ("exists", 1), "segment": ("exists", 2), "circle": ("exists", 2),
    "midpoint": ("relation", 3), "perpendicular": ("relation", 4), "parallel": ("relation", 4),
    "on_circle": ("relation", 2), "angle": ("relation", 3), "equal_angle": ("relation", 6), "equal_length": ("relation", 4),
    "collinear": ("relation", 3), "on_segment": ("relation", 3),
    "point_count": ("count", 0), "circle_count": ("count", 0), "no_segment": ("absent", 2),
    "length_label": ("label", 2),
    # circuits (components and nets)
    "component": ("exists", 1), "kind_count": ("count", 1), "component_count": ("count", 0),
    "connected": ("connection", 2), "grounded": ("connection", 1), "series": ("relation", 2),
    "parallel_parts": ("relation", 2), "topology": ("relation", 0), "value": ("label", 1),
    "no_short": ("absent", 0), "no_open": ("absent", 0),
    # graphs (flowcharts and diagrams: nodes, edges, clusters)
    "node": ("exists", 1), "cluster": ("exists", 1), "shape": ("relation", 1), "inside": ("relation", 2),
    "edge": ("connection", 2), "edge_label": ("label", 2), "node_count": ("count", 0),
    "edge_count": ("count", 0), "no_edge": ("absent", 2), "no_out_edges": ("absent", 1),
}


class VerificationPoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="unique in its task, e.g. vp3")
    kind: Kind = Field(description="what sort of fact: exists | count | relation | connection | label | absent")
    check: str = Field(description="the verifier's predicate (a key of CHECKS)")
    component: str = Field(description="what it is about, for per-component metrics: point, segment, resistor, edge ...")
    args: list[str] = Field(default_factory=list, description="spec entities the check is about (point names, node ids)")
    value: float | int | str | list[str] | None = Field(None, description="expected value (a count, an angle, a label, shapes)")
    tolerance: float | None = Field(None, description="relative or in degrees, as the check says; None: the check's default")
    depends_on: list[str] = Field(default_factory=list, description="VPs that must pass for this one to be checked")
    critical: bool = Field(True, description="part of the task's pass rule (all critical VPs pass)")
    text: str = Field(description="the fact in words")

    @model_validator(mode="after")
    def _check_signature(self) -> "VerificationPoint":
        if self.check not in CHECKS:
            raise ValueError(f"unknown check {self.check!r} (known: {', '.join(sorted(CHECKS))})")
        kind, nargs = CHECKS[self.check]
        if self.kind != kind:
            raise ValueError(f"check {self.check!r} is of kind {kind!r}, not {self.kind!r}")
        if len(self.args) != nargs:
            raise ValueError(f"check {self.check!r} takes {nargs} args, got {len(self.args)}")
        return self

    def number(self) -> float:
        """The expected value of a count or angle check (none: 0)."""
        if isinstance(self.value, str | list):
            raise ValueError(f"point {self.id} ({self.check}): value {self.value!r} is not a number; give one")
        return float(self.value or 0)

    def count(self) -> int:
        return int(self.number())


class Solution(BaseModel):
    """Code in one format: the reference (passes every VP) or a mutant (fails its `target`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Format
    code: str
    target: str | None = Field(None, description="mutants: the VP this mutant must fail")
    fault: str | None = Field(None, description="mutants: what was changed, in words")
    needs_render: bool = Field(False, description="mutants: only the rendered check can catch it (e.g. white on white)")


class GeometrySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["geometry"] = "geometry"
    points: dict[str, tuple[float, float]] = Field(description="the reference coordinates (hidden)")
    segments: list[tuple[str, str]] = Field(default_factory=list)
    circles: list[tuple[str, str]] = Field(default_factory=list, description="(centre, a point it passes through)")
    length_labels: dict[str, str] = Field(default_factory=dict, description="'AB' -> the text written beside AB")


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    kind: str
    value: str | None = None
    nets: tuple[str, str]


class CircuitSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["circuit"] = "circuit"
    parts: list[Part]
    ground: str | None = Field(None, description="the grounded net")


class GraphNode(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    label: str
    shape: str | None = Field(None, description="a shape role: terminator, process, decision, io, state, box ...")


class GraphEdge(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    src: str
    dst: str
    label: str | None = None


class GraphCluster(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    label: str
    members: list[str]


class GraphSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["graph"] = "graph"
    title: str
    directed: bool = True
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    clusters: list[GraphCluster] = Field(default_factory=list)
    forbidden: list[tuple[str, str]] = Field(default_factory=list, description="edges the prompt rules out")


Spec = Annotated[GeometrySpec | CircuitSpec | GraphSpec, Field(discriminator="type")]


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    category: Category
    source: Literal["generated", "handwritten"]
    size: int = Field(description="how many objects the prompt asks for (for size sensitivity)")
    prompt: str
    formats: list[Format] = Field(min_length=1, description="allowed formats, the preferred first")
    spec: Spec
    points: list[VerificationPoint] = Field(min_length=1)
    reference: list[Solution] = Field(min_length=1)
    mutants: list[Solution] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_links(self) -> "Task":
        seen: set[str] = set()
        for vp in self.points:
            if vp.id in seen:
                raise ValueError(f"points: duplicate id {vp.id!r}")
            missing = [d for d in vp.depends_on if d not in seen]
            if missing:  # parents come first: the dependency graph is acyclic by construction
                raise ValueError(f"points: {vp.id} depends on {missing[0]!r}, which is not an earlier point")
            seen.add(vp.id)
        for sol in self.reference + self.mutants:
            if sol.format not in self.formats:
                raise ValueError(f"solution in {sol.format!r}, which is not one of the task's formats")
        for m in self.mutants:
            if m.target not in seen:
                raise ValueError(f"mutants: target {m.target!r} is not a point of this task")
        return self

    def point(self, vp_id: str) -> VerificationPoint:
        return next(vp for vp in self.points if vp.id == vp_id)


# What to do about a malformed task file: every error loading one says it.
FIX = "fix that line, or regenerate the corpus (harness prograf build-tasks --seed 0)"


def parse_task(raw: Any, where: str) -> Task:
    """One task from its JSON object; a bad one is one HarnessError naming the line, the task and
    the field, and the fix."""
    task_id = raw.get("id", "?") if isinstance(raw, dict) else "?"
    try:
        return Task.model_validate(raw)
    except ValidationError as exc:
        raise HarnessError(invalid(exc, f"{where}: task {task_id}", FIX)) from None


def load_tasks(path: Path) -> list[Task]:
    """Every task of a JSONL corpus file, in order; ids must be unique."""
    if not path.is_file():
        raise HarnessError(f"ProGraf corpus {path}: no such file (regenerate it: harness prograf build-tasks --seed 0)")
    tasks: list[Task] = []
    ids: set[str] = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HarnessError(f"{where}: not valid JSON ({exc.msg}); {FIX}") from None
        task = parse_task(raw, where)
        if task.id in ids:
            raise HarnessError(f"{where}: task {task.id}: field `id` is invalid: an earlier task has this id; "
                               "give each task its own id")
        ids.add(task.id)
        tasks.append(task)
    return tasks
