"""The CDWM web world: three sites served by one local process, a ledger of typed deltas,
WebArena-format tasks and evaluators, and a Playwright/Chromium environment (README.md)."""
