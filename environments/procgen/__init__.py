"""CDWM on procedurally generated levels: MiniGrid in place of Procgen (see README.md for why)."""
