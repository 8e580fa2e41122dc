"""One function per check name (`task.CHECKS`): does the scene meet this verification point?

Each returns a `Finding` (`findings.py`): pass, the measured value, a reason in words and, on
failure, a failure pattern (missing_object, extra_element, wrong_relation, broken_connection,
wrong_label, count_mismatch). The checks live per layer: `check_geometry.py` (up to similarity),
`check_circuit.py` (parts by the name written on them), `check_graph.py` (nodes by label).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from environments.prograf import check_circuit, check_geometry, check_graph
from environments.prograf.findings import Finding
from environments.prograf.scene import Scene
from environments.prograf.task import CircuitSpec, GeometrySpec, Spec, VerificationPoint

Check = Callable[[Any, VerificationPoint, Any], Finding]
GEOMETRY: dict[str, Check] = check_geometry.CHECKS
CIRCUIT: dict[str, Check] = check_circuit.CHECKS
GRAPH: dict[str, Check] = check_graph.CHECKS


def view_for(scene: Scene, spec: Spec) -> tuple[Any, dict[str, Check]]:
    """The view of the scene a spec's checks run on, and those checks."""
    if isinstance(spec, GeometrySpec):
        return check_geometry.GeometryView(scene, list(spec.points)), GEOMETRY
    if isinstance(spec, CircuitSpec):
        return check_circuit.CircuitView(scene), CIRCUIT
    return check_graph.GraphView(scene, spec), GRAPH
