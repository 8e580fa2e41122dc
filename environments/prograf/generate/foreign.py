"""The foreign-style corpus (issue 39 item 3): correct outputs the references' writer did not write,
each paired with a one-fault variant of a named kind, for the verifier audit (`check/audit.py`).

Two sources. (1) A second writer per format (`foreign_geometry.py`, `foreign_circuit.py`,
`foreign_graph.py`), other layouts and other code conventions than `emit.py`'s, run on every task of
the committed corpus in every format the task accepts: one correct output and one faulty one each,
in a style and with a fault kind that rotate over the tasks. Generated on demand, deterministically
(same corpus file and code, same bytes; `corpus_digest`), so nothing generated is committed: the
generator is the test data's source. (2) Hand-written outputs in `data/foreign/` (listed in its
`manifest.toml`: file, task, format, and for a faulty one its fault kind and target point), typed
by a person in the ways people write these, and read as they are.

A fault is made on the drawing before it is written, so it is the fault named, whatever the writer;
which point it must fail (the target) is decided here, from the task's points, not by the verifier.
"""

from __future__ import annotations

import hashlib
import random
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from environments.prograf.generate import foreign_circuit
from environments.prograf.generate import foreign_geometry
from environments.prograf.generate import foreign_graph
from environments.prograf.generate import foreign_graph_svg
from environments.prograf.generate import foreign_links
from environments.prograf.task import CircuitSpec, GeometrySpec, GraphSpec, Task
from harness.errors import HarnessError

FAULT_KINDS = ("missing_object", "wrong_relation", "broken_connection", "extra_element")
HANDWRITTEN = Path(__file__).parents[1] / "data" / "foreign"


@dataclass(frozen=True)
class Output:
    key: str  # unique: task/format/source/correct|fault kind
    task_id: str
    category: str
    format: str
    source: str  # "second writer (style)" or "hand-written"
    fault: str | None  # None: a correct output; else one of FAULT_KINDS
    target: str | None  # the point a faulty output must fail
    what: str
    code: str


def _style_count(category: str, fmt: str) -> int:
    if category == "geometry":
        return len(foreign_geometry.STYLES)
    if category == "circuit":
        return len(foreign_circuit.STYLES)
    return len(foreign_graph.STYLES)


Drawing = foreign_geometry.Figure | foreign_circuit.Circuit | foreign_graph.Graph
Writer = Callable[[Drawing, int, random.Random], str]
D = TypeVar("D", foreign_geometry.Figure, foreign_circuit.Circuit, foreign_graph.Graph)


def _writing(kind: type[D], write: Callable[[D, int, random.Random], str]) -> Writer:
    """`write` as a writer of any drawing; the category picks the writer, so the drawing is a `kind`."""
    def checked(drawing: Drawing, style: int, rng: random.Random) -> str:
        assert isinstance(drawing, kind)
        return write(drawing, style, rng)
    return checked


def _writer(category: str, fmt: str) -> Writer:
    if category == "geometry":
        return _writing(foreign_geometry.Figure,
                        lambda fig, style, rng: foreign_geometry.write_svg(fig, foreign_geometry.STYLES[style]))
    if category == "circuit":
        return _writing(foreign_circuit.Circuit,
                        foreign_circuit.write_py if fmt == "schemdraw-py" else foreign_circuit.write_json)
    graph_writers = {"dot": foreign_graph.write_dot, "mermaid": foreign_graph.write_mermaid,
                     "svg": foreign_graph_svg.write_svg}
    return _writing(foreign_graph.Graph, graph_writers[fmt])


def _correct_drawing(task: Task) -> Drawing:
    spec = task.spec
    if isinstance(spec, GeometrySpec):
        return foreign_geometry.figure_of(spec, task.points)
    if isinstance(spec, CircuitSpec):
        return foreign_circuit.circuit_of(spec)
    return foreign_graph.graph_of(spec)


def _fault(task: Task, kind: str, rng: random.Random) -> tuple[Drawing, str, str] | None:
    if task.category == "geometry":
        return foreign_geometry.faults(task, kind, rng)
    if task.category == "circuit":
        return foreign_circuit.faults(task, kind, rng)
    return foreign_graph.faults(task, kind, rng)


def generated(tasks: list[Task]) -> list[Output]:
    """A correct and a faulty output per task and accepted format, from the second writer."""
    out: list[Output] = []
    index: dict[str, int] = {}
    for task in tasks:
        i = index[task.category] = index.get(task.category, -1) + 1
        for j, fmt in enumerate(task.formats):
            style = (i + j) % _style_count(task.category, fmt)
            write = _writer(task.category, fmt)
            name = (
                f"second writer ({foreign_geometry.STYLES[style] if task.category == 'geometry' else f'style {style}'})"
            )
            code = write(_correct_drawing(task), style, random.Random(f"{task.id}/{fmt}/write"))
            out.append(
                Output(
                    f"{task.id}/{fmt}/{style}/correct", task.id, task.category, fmt, name, None, None, "correct", code
                )
            )
            first = (i + 2 * j + i // 4) % len(FAULT_KINDS)
            for kind in FAULT_KINDS[first:] + FAULT_KINDS[:first]:  # the next kind when the task has none of this one
                made = _fault(task, kind, random.Random(f"{task.id}/{fmt}/{kind}"))
                if made is None:
                    continue
                drawing, target, what = made
                code = write(drawing, style, random.Random(f"{task.id}/{fmt}/write"))
                out.append(
                    Output(
                        f"{task.id}/{fmt}/{style}/{kind}", task.id, task.category, fmt, name, kind, target, what, code
                    )
                )
                break
    return out


def _links_wanted(task: Task, i: int) -> bool:
    """The tasks the link writer draws: a spread over each category, and in a diagram category every
    undirected one and some with arrows both ways (where `<-->` and `dir=both` belong)."""
    if task.category == "circuit":
        return i % 4 == 1
    if task.category == "geometry" or not isinstance(task.spec, GraphSpec):
        return False
    two_way = bool(foreign_links._pairs(foreign_graph.graph_of(task.spec)))
    return i % 5 == 2 or not task.spec.directed or (two_way and i % 3 == 0)


def links(tasks: list[Task]) -> list[Output]:
    """A correct and a one-fault output per chosen task and format from the link writer (`foreign_links.py`):
    Mermaid and DOT link kinds, schemdraw Wire bends, Annotate names and marks. Added beside the second
    writer's outputs, so the second writer's rotation (and its outputs) stay as they were."""
    out: list[Output] = []
    index: dict[str, int] = {}
    for task in tasks:
        i = index[task.category] = index.get(task.category, -1) + 1
        if not _links_wanted(task, i):
            continue
        for j, fmt in enumerate(f for f in task.formats if f in ("mermaid", "dot", "schemdraw-py")):
            rng = random.Random(f"{task.id}/{fmt}/links")
            made: list[tuple[str, str | None, str | None, str, str]] = []  # kind, fault, target, what, code
            if isinstance(task.spec, CircuitSpec):
                made.append(("correct", None, None, "correct", foreign_links.write_py(foreign_circuit.circuit_of(task.spec), rng)))
                ckinds = foreign_links.CIRCUIT_FAULTS
                first = (i // 4) % len(ckinds)  # i // 4: the chosen circuits are every fourth
                for kind in ckinds[first:] + ckinds[:first]:
                    c = foreign_circuit.faults(task, kind, random.Random(f"{task.id}/{fmt}/links/{kind}"))
                    if c is not None:
                        made.append((kind, kind, c[1], c[2], foreign_links.write_py(c[0], random.Random(f"{task.id}/{fmt}/links"))))
                        break
            else:
                assert isinstance(task.spec, GraphSpec)
                write = foreign_links.write_mermaid if fmt == "mermaid" else foreign_links.write_dot
                made.append(("correct", None, None, "correct", write(foreign_graph.graph_of(task.spec), {}, rng)))
                gkinds = foreign_links.GRAPH_FAULTS
                first = (i + j) % len(gkinds)
                for kind in gkinds[first:] + gkinds[:first]:
                    g = foreign_links.graph_faults(task, kind, random.Random(f"{task.id}/{fmt}/links/{kind}"))
                    if g is not None:
                        named = foreign_links.NAMED.get(kind, kind)
                        made.append((named, named, g[1], g[2], write(g[0], g[3], random.Random(f"{task.id}/{fmt}/links"))))
                        break
            for kind, fault, target, what, code in made:
                out.append(Output(f"{task.id}/{fmt}/links/{kind}", task.id, task.category, fmt, "link writer",
                                  fault, target, what, code))
    return out


def handwritten(tasks: list[Task], folder: Path = HANDWRITTEN) -> list[Output]:
    """The hand-written outputs listed in `folder/manifest.toml`; a bad entry is one error naming it."""
    manifest = folder / "manifest.toml"
    by_id = {t.id: t for t in tasks}
    try:
        entries = tomllib.loads(manifest.read_text(encoding="utf-8")).get("output", [])
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise HarnessError(f"{manifest}: cannot read the hand-written corpus list ({exc})") from None
    out = []
    for k, e in enumerate(entries, start=1):
        where = f"{manifest}: output {k} ({e.get('file', '?')})"
        task = by_id.get(e.get("task", ""))
        if task is None:
            raise HarnessError(
                f"{where}: task {e.get('task')!r} is not in the corpus; name a task id of data/tasks.jsonl"
            )
        if e.get("format") not in task.formats:
            raise HarnessError(
                f"{where}: format {e.get('format')!r} is not one the task accepts ({', '.join(task.formats)})"
            )
        fault = e.get("fault")
        if fault is not None and fault not in FAULT_KINDS:
            raise HarnessError(f"{where}: fault {fault!r}: use one of {', '.join(FAULT_KINDS)}")
        if fault is not None and e.get("target") not in {vp.id for vp in task.points}:
            raise HarnessError(f"{where}: target {e.get('target')!r} is not a point of {task.id}")
        path = folder / str(e["file"])
        if not path.is_file():
            raise HarnessError(f"{where}: no such file {path}")
        out.append(
            Output(
                f"{task.id}/{e['format']}/hand/{e['file']}",
                task.id,
                task.category,
                e["format"],
                "hand-written",
                fault,
                e.get("target") if fault else None,
                e.get("what", fault or "correct"),
                path.read_text(encoding="utf-8"),
            )
        )
    return out


def corpus(tasks: list[Task]) -> list[Output]:
    return generated(tasks) + links(tasks) + handwritten(tasks)


def corpus_digest(outputs: list[Output]) -> str:
    h = hashlib.sha256()
    for o in outputs:
        h.update(f"{o.key}\0{o.fault}\0{o.target}\0{o.code}\0".encode())
    return h.hexdigest()
