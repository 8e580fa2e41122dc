"""One function per check name (`task.CHECKS`): does the scene meet this verification point?

Each returns a `Finding` (`findings.py`): pass, the measured value, a reason in words and, on
failure, a failure pattern (missing_object, extra_element, wrong_relation, broken_connection,
wrong_label, count_mismatch). The checks live per layer: `geometry.py` (up to similarity),
`circuit.py` (parts by the name written on them), `graph.py` (nodes by label).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from environments.prograf.check import circuit as check_circuit
from environments.prograf.check import geometry as check_geometry
from environments.prograf.check import graph as check_graph
from environments.prograf.check.findings import Finding
from environments.prograf.parse.scene import Scene
from environments.prograf.task import CircuitSpec, GeometrySpec, Spec, VerificationPoint

Check = Callable[[Any, VerificationPoint, Any], Finding]
GEOMETRY: Mapping[str, Check] = check_geometry.CHECKS
CIRCUIT: Mapping[str, Check] = check_circuit.CHECKS
GRAPH: Mapping[str, Check] = check_graph.CHECKS


def view_for(scene: Scene, spec: Spec) -> tuple[Any, Mapping[str, Check]]:
    """The view of the scene a spec's checks run on, and those checks."""
    if isinstance(spec, GeometrySpec):
        return check_geometry.GeometryView(scene, list(spec.points)), GEOMETRY
    if isinstance(spec, CircuitSpec):
        return check_circuit.CircuitView(scene), CIRCUIT
    return check_graph.GraphView(scene, spec), GRAPH
