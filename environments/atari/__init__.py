"""CDWM on Atari 100k (ale-py): object deltas from RAM, human-normalised score."""
