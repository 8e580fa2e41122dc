"""CDWM: typed deltas shared by the web, household and science environments."""
