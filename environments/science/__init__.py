"""The CDWM science world: ScienceWorld's 30 tasks behind the CDWM protocol, with ground-truth
deltas diffed from the simulator's object tree (README.md)."""
