"""Suite `cdwm-web`: WebArena-format tasks on the project's three local sites (shop, travel, mail)
in a real headless Chromium, run by the ReAct baseline or the CDWM agent (`--agent react|cdwm`),
scored by the task's WebArena evaluator plus the ledger check, and CDWM's metrics.

One sample = one task = one episode in a fresh browser and a freshly seeded database (the
independent unit of every CI). `--corpus` takes a WebArena config file or a folder of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from environments.cdwm.suite_base import CdwmSuite
from environments.web.actions import ACTION_PATTERN, WEB_MASK
from environments.web.tasks import TASK_DIR, TaskError, load_tasks
from harness.environment import Environment
from harness.errors import HarnessError
from harness.suite import Sample

# How the ledger names things (environments/web/ledger.py), so a world model can name what it
# expects to change the way the ground truth does. Knowledge of the world's schema, not of a task.
WEB_WORLD_MODEL_HELP = (
    "Name entities kind:id with the ids the pages show: product:3, cart_item:3 (the cart line of product 3), "
    "order:5, booking:2, flight:4, message:7, account:1. Relations: cart contains product:3, "
    "order:5 contains product:3, booking:2 on_flight flight:4. Cannot be undone: an order holding a "
    "final-sale item, a Saver (non-refundable) booking, any cancellation fee, closing the account, sending "
    "a message, deleting mail forever (environments/web/README.md has the full table)."
)


class CdwmWebSuite(CdwmSuite):
    name = "cdwm-web"
    version = "1.0.0"
    description = "CDWM web: WebArena-format tasks on local shop/travel/mail sites in Chromium (--agent react|cdwm)"
    mask = WEB_MASK
    action_pattern = ACTION_PATTERN
    world_model_help = WEB_WORLD_MODEL_HELP
    uses_judge = True  # fuzzy_match answers and "not achievable" reports are graded by the judge role

    def load_samples(self, corpus: str | None) -> list[Sample]:
        try:
            tasks = load_tasks(corpus)
        except TaskError as exc:
            raise HarnessError(f"--corpus: {exc}") from None
        return [Sample(id=str(t["task_id"]), data=t) for t in tasks]

    def corpus_identity(self, corpus: str | None) -> dict[str, str]:
        root = Path(corpus) if corpus else TASK_DIR
        files = sorted(root.glob("*.json")) if root.is_dir() else [root]
        digest = hashlib.sha256()
        for f in files:
            if f.is_file():
                digest.update(f.name.encode() + b"\0" + f.read_bytes())
        return {"path": str(root), "sha256": digest.hexdigest()}

    def check_ready(self) -> None:
        from environments.web.browser_env import browser_missing

        problem = browser_missing()
        if problem:
            raise HarnessError(f"{self.name}: {problem}")

    def make_env(self, sample: Sample, judge: Callable[[str], str] | None) -> Environment:
        from environments.web.browser_env import WebEnvironment  # Playwright loads only when a task runs

        # One step above the agent's limit: the agent's own limit ends the episode (and says so).
        return WebEnvironment(judge=judge, max_steps=self.config.max_steps + 1)
