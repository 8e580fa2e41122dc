"""CDWM's per-action-class sparsity mask: which delta dimensions an action class can touch.

A world model (especially a small one) predicts changes an action cannot make -- a `scroll` that
"creates an order". The mask is prior knowledge about the action space; the CDWM agent skips the
world-model call for a class that can change nothing, which is where part of its token saving
comes from.

`ActionMask` is part of the agent/environment protocol (`harness.environment`); each environment
family defines its own table next to its action space (`environments.web.actions.WEB_MASK`,
`environments.household.mask.HOUSEHOLD_MASK`, `environments.science.mask.SCIENCE_MASK`). This
module keeps the names the families and tests import.
"""

from __future__ import annotations

from harness.environment import ALL, DIMENSIONS, NONE, ActionMask, touched

__all__ = ["ALL", "DIMENSIONS", "NONE", "ActionMask", "touched"]
