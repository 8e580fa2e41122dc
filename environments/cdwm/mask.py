"""CDWM's per-action-class sparsity mask: which delta dimensions an action class can touch.

A world model (especially a small one) predicts changes an action cannot make -- a `scroll` that
"creates an order". The mask is prior knowledge about the action space: applying it removes every
predicted fact in a dimension the action's class cannot produce, and forces a prediction
reversible when the class can do nothing irreversible. A class the mask does not know keeps every
dimension (the mask only removes what is known to be impossible).

When a class may touch nothing at all, its delta is known without asking a model (`determined`):
the CDWM agent skips the world-model call for it, which is where part of its token saving comes
from. `ActionMask.from_transitions` derives a mask from ground-truth transitions (what each class
was seen to change), so a new environment can check or learn its table from recorded runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from environments.cdwm.deltas import Delta

DIMENSIONS = ("created", "deleted", "attributes", "relations_added", "relations_removed", "irreversible")
ALL = frozenset(DIMENSIONS)
NONE: frozenset[str] = frozenset()


class ActionMask:
    def __init__(self, table: Mapping[str, Iterable[str]], name: str = "custom"):
        bad = {d for dims in table.values() for d in dims} - ALL
        if bad:
            raise ValueError(f"action mask {name!r}: unknown dimensions {sorted(bad)}; use {', '.join(DIMENSIONS)}")
        self.table = {cls.lower(): frozenset(dims) for cls, dims in table.items()}
        self.name = name

    def allowed(self, action_class: str) -> frozenset[str]:
        return self.table.get(action_class.lower(), ALL)

    def determined(self, action_class: str) -> bool:
        """True when the class can change nothing, so its delta is the empty, reversible one."""
        return not self.allowed(action_class)

    def apply(self, action_class: str, delta: Delta) -> Delta:
        """The prediction with every fact the class cannot produce removed (confidence kept)."""
        dims = self.allowed(action_class)
        out = delta.model_copy(deep=True)
        for dim in ("created", "deleted", "attributes", "relations_added", "relations_removed"):
            if dim not in dims:
                setattr(out, dim, [])
        if "irreversible" not in dims:
            out.reversible, out.irreversible_cost = True, 0.0
        return out

    def to_dict(self) -> dict[str, list[str]]:
        return {cls: sorted(dims) for cls, dims in sorted(self.table.items())}

    @classmethod
    def from_transitions(cls, rows: Iterable[tuple[str, Delta]], name: str = "learned") -> "ActionMask":
        """The dimensions each action class was seen to touch in (action_class, ground-truth delta)
        pairs. Classes never seen are absent, hence unmasked."""
        table: dict[str, set[str]] = {}
        for action_class, delta in rows:
            table.setdefault(action_class.lower(), set()).update(touched(delta))
        return cls(table, name=name)


def touched(delta: Delta) -> set[str]:
    """The dimensions a delta changes."""
    dims = {d for d in DIMENSIONS[:5] if getattr(delta, d)}
    if not delta.reversible:
        dims.add("irreversible")
    return dims


# The web world's action space (WebArena's). Navigation and reading happen through GET requests,
# which change no server state on these sites, so they touch nothing persistent; `click`, `type`
# (with Enter it submits a form) and `press` (Enter, shortcuts) can submit anything.
WEB_MASK = ActionMask({
    "click": ALL, "type": ALL, "press": ALL,
    "hover": NONE, "scroll": NONE, "goto": NONE, "go_back": NONE, "go_forward": NONE,
    "new_tab": NONE, "tab_focus": NONE, "close_tab": NONE, "stop": NONE, "noop": NONE,
}, name="web")
