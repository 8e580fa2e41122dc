"""Leaderboards: aggregation over run records (reads records only, never runs anything)."""
