"""CDWM household world: ALFWorld-style tasks (see README.md)."""

import os

# Read before anything imports alfworld: `alfworld.info` sets ALFWORLD_DATA to its own cache folder
# on import, which would make an unset variable look set.
USER_ALFWORLD_DATA = os.environ.get("ALFWORLD_DATA")
