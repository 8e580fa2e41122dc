"""The household engine is deterministic given the task: a twin that replays the live environment's
actions reaches its state, so the planner check's ledger (environments/cdwm/planner_worlds.py) can
ask "what would this action change" of the twin, exactly, without touching the live episode."""

from __future__ import annotations

from environments.cdwm.planner_worlds import ReplayLedger
from environments.household.explore import WORLD


def test_a_twin_replaying_the_actions_reaches_the_same_state_and_its_delta_is_the_live_ones() -> None:
    ep = WORLD.open(WORLD.spec("place", 1, 0, None))
    ledger = ReplayLedger(ep.env)
    try:
        plan = [ep.env.render(c) for c in ep.task.gold_plan]
        off = next(a for a in ep.admissible() if a != plan[0] and not a.startswith(("look", "inventory")))
        for action in (plan[0], "dance wildly", off):  # a plan step, an inadmissible command, an off-plan step
            ep.env.step(action)
        assert ep.env.played == (plan[0], "dance wildly", off)
        twin = ep.env.twin()
        try:
            for action in ep.env.played:
                twin.step(action)
            assert twin.world_facts == ep.env.world_facts and twin.admissible == ep.env.admissible
        finally:
            twin.close()
        before = ep.env.world_facts
        for a in ep.admissible()[:3]:  # branches: the twin restarts for each
            predicted = ledger([a])
            assert ep.env.world_facts == before  # the live episode is untouched
        target = next(a for a in ep.admissible() if a.startswith("go to"))  # it moves the agent: a delta
        predicted = ledger([target])
        assert predicted == ep.env.step(target).delta and predicted.facts()
        assert ledger.restarts >= 2
    finally:
        ledger.close()
        ep.close()
