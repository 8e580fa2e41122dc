"""How every CDWM suite departs from the CDWM paper (Causal Delta World Models), as data.

CDWM's claims and their own departures are `claims.py`'s (checked through suite `cdwm-planner`); the
other suites measure a stand-in for the paper's system, and a reader of their numbers must know where. `DEPARTURES` lists what the suites
share; `describe_departures()` is the text every CDWM suite's description ends with (appended by
`CdwmSuite.__init_subclass__`, so `harness describe cdwm-web` prints it). Environment-specific
substitutions (local sites for WebArena, MiniGrid for Procgen) stay in each suite's own description.
The trained world model, its learned mask and post-training exist as commands and as the suites'
`trained_world_model` option (docs/cdwm.md); these entries say what a suite run by default measures,
and what the option changes.
"""

from __future__ import annotations

from harness.claims import Departure

DEPARTURES: list[Departure] = [
    Departure(paper="predicts each action's typed delta (entities, attributes, relations, reversibility, "
                    "irreversible cost, confidence) with a world model of its own",
              ours="by default ask a prompted chat model for the delta (agents/world_model.py): whichever model the "
                   "run names for the role world_model, by default the model under test, given a JSON schema and the "
                   "environment's help text, re-asked on invalid JSON; with --suite-option trained_world_model=DIR "
                   "(MiniGrid and household only) a 135M model with a LoRA adapter trained by `harness cdwm train` "
                   "on under one epoch of 1,500 transitions (delta F1 0.62-0.73 on 20 rows per split, docs/cdwm.md)",
              why="the harness evaluates agents built on served models; the trained model exists for two worlds at "
                  "the size two CPU cores can train",
              effect="delta accuracy, calibration and everything the planner derives from predictions (pruning, "
                     "abstention, irreversible failures, success, tokens) reflect how well a general model guesses "
                     "deltas from a prompt; a prompted model can predict worse deltas than a trained one, so gains "
                     "over the ReAct baseline can be smaller than the paper's, and any gain measured is not evidence "
                     "about a trained world model"),
    Departure(paper="post-trains the world model on a verifiable composite reward",
              ours="compute the composite reward (environments/cdwm/reward.py) as a score; `harness cdwm posttrain` "
                   "post-trains an adapter on its per-transition parts (delta accuracy, calibration, action "
                   "following; task success only measured, not trained on), but no suite uses a post-trained model "
                   "by default and no run long enough to matter has been made",
              why="a useful post-training run needs more CPU time than this machine has given it so far",
              effect="whatever the paper's gains owe to post-training is absent here, so these suites can neither "
                     "reproduce nor refute its figures (+6.0 to 11.7 points of task success, 47-71% fewer "
                     "irreversible failures, 27-45% fewer tokens per successful trajectory)"),
    Departure(paper="limits which delta dimensions an action class may touch by the world model's causal "
                    "sparsity mask (one per action class)",
              ours="use a hand-written mask table per environment (WEB_MASK, HOUSEHOLD_MASK, SCIENCE_MASK, "
                   "MIND2WEB_MASK, MINDACT_MASK, ATARI_MASK, GRID_MASK) by default; with trained_world_model=DIR the "
                   "gates learned jointly with that model (environments/cdwm/causal_mask.py) act in its grammar",
              why="a table written from each action space's semantics is exact where the semantics are known, and "
                  "needs no recorded runs",
              effect="the mask is prior knowledge handed to the agent, not learned: where it is right it is an upper "
                     "bound on what masking buys, where it misses a dimension an action touches it deletes true "
                     "predicted facts; the token saving of mask-determined actions (no world-model call) is our "
                     "tables' doing"),
]


def describe_departures(departures: list[Departure] | None = None) -> str:
    """The text a CDWM suite's description ends with: every departure, numbered."""
    deps = DEPARTURES if departures is None else departures
    return "".join(f" | DEPARTURE {i} from the CDWM paper: the paper {d.paper}; we {d.ours} ({d.why}); "
                   f"effect on the results: {d.effect}" for i, d in enumerate(deps, 1))
