"""`SCIENCE_MASK`: which delta dimensions each ScienceWorld action class can touch.

Measured, not assumed: in ScienceWorld almost every action advances the simulation by one tick
(`wait` by ten), and a tick lets running processes go on -- a pot on a lit stove heats and boils,
a tap fills the container under it, plants grow and drink, animals age, fires burn. So even
`look at`, `read` and `focus on` can be followed by any kind of change, irreversible ones included
(a plant dying while the agent reads). Only `look around`, `inventory` and `task` take no time and
change nothing (the simulator's move counter stays put, checked in tests/environments/science/test_cdwm_science.py);
`stop` is the environment's own and never reaches the simulator. Every other class keeps every
dimension. The policy's action help is `env.ACTION_HELP`, sent with every observation.
"""

from __future__ import annotations

from environments.science.env import ACTION_CLASSES
from harness.environment import ALL, NONE, ActionMask

FREE_CLASSES = ("look around", "inventory", "task", "stop")

SCIENCE_MASK = ActionMask({cls: (NONE if cls in FREE_CLASSES else ALL) for cls in ACTION_CLASSES}, name="science")
