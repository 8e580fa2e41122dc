"""`HOUSEHOLD_MASK`: which delta dimensions each household command can touch (`facts.py`).

Reading changes nothing; moving changes where the agent is; open/close an attribute; take/move
relations; use/heat/cool/clean/slice attributes, and only heat, cool and slice can be
irreversible. The policy's action help is `env.ACTION_HELP`, sent with every observation.
"""

from __future__ import annotations

from harness.environment import NONE, ActionMask

HOUSEHOLD_MASK = ActionMask({
    "look": NONE, "inventory": NONE, "examine": NONE, "help": NONE, "stop": NONE,
    "go to": {"relations_added", "relations_removed"},
    "open": {"attributes"}, "close": {"attributes"}, "use": {"attributes"}, "clean": {"attributes"},
    "take": {"relations_added", "relations_removed"}, "move": {"relations_added", "relations_removed"},
    "heat": {"attributes", "irreversible"}, "cool": {"attributes", "irreversible"},
    "slice": {"attributes", "irreversible"},
}, name="household")
