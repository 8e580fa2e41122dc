"""Rule perturbations of the web world: the real sites with one rule changed, for the held-out
rule split of `harness cdwm collect` (environments/web/explore.py). A reset names at most one
(`WorldServer.reset(rule)`, i.e. `POST /__reset?rule=NAME`; `WebEnvironment.rule`); the handler
whose effect it changes asks `active(NAME)`, and the ledger records what the changed handler
did, in the same transaction, like any other change -- the ground truth stays the server's own."""

from __future__ import annotations

from harness.errors import HarnessError

# name -> the rule it changes (training: the sites as environments/web/README.md describes them).
RULES = {
    "order_keeps_cart": "shop: placing an order no longer empties the cart -- the ordered lines stay in it "
    "(in training they leave it)",
    "cancel_refunds_nothing": "travel: cancelling a booking refunds nothing, whatever the fare -- the whole "
    "fare is lost (in training Standard refunds all but $40 and Flex everything)",
}


def check(rule: str | None) -> str | None:
    """`rule` itself when the web world offers it (None: the sites as trained); else one error."""
    if rule is not None and rule not in RULES:
        raise HarnessError(
            f"rule perturbation {rule!r}: the web world has no such rule; choose from {', '.join(RULES)} (or none)"
        )
    return rule


def active(rule: str) -> bool:
    """Whether this episode's reset switched `rule` on (called inside a request)."""
    from flask import current_app

    return bool(current_app.config.get("RULE") == rule)
