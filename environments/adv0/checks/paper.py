"""What the ADV-0 paper says that each check tests, and every way our check departs from the
paper's own experiment (`harness.claims.Departure`: what the paper does, what we do, why, and what
it can do to the verdict). Printed with each check (`verdicts.render`) and saved in its verdict.

Only the abstract is public (arXiv 2603.15221; no code): the sentences are the abstract's claims
as ../shared/PAPERS.md and ADV0_DESIGN.md record them, and whatever the paper does beyond them
is marked "not public".

May import: `harness`.
"""

from __future__ import annotations

from harness.claims import Departure

# The abstract's sentence each check tests.
EXPOSES = "it exposes diverse safety-critical failures"
ITERATES = "the attacker evolves by iterative preference learning, approximating the optimal adversary distribution"
GENERALISES = "[it] improves generalisation of learned policies and of motion planners to unseen long-tail risks"

SENTENCES: dict[str, str] = {
    "C1": ITERATES,
    "C2": (
        "a defender and an attacker play a zero-sum Markov game; the attacker's utility is the defender's own "
        "objective; the defender trains on what the attacker finds"
    ),
    "C3": EXPOSES,
    "C4": EXPOSES,
    "C5": "the attacker's utility is the defender's own objective (and with it, it exposes safety-critical failures)",
    "C6": GENERALISES + " (motion planners)",
    "C7": GENERALISES + " (learned policies)",
    "C8": (
        "the attacker evolves by iterative preference learning ... the defender trains on what the attacker "
        "finds (a closed loop)"
    ),
    "C9": GENERALISES + " (learned policies; here an LLM driver whose learning is its reflection memory)",
}

ATTACKER = Departure(
    paper="the attacker is an adversarial traffic agent playing a zero-sum Markov game with the defender (a "
    "closed-loop agent acting at every step)",
    ours="a factorised categorical policy (one softmax head per factor, given the initial state) over a scripted "
    "manoeuvre's parameters -- which vehicle, manoeuvre, trigger time, intensity, hold, firing gap -- drawn "
    "once per episode and then played by a script; it does not react within the episode",
    why="only the abstract is public; a per-episode draw keeps every log-probability exact for DPO and lets the "
    "toy world enumerate the whole space for q*",
    effect="an attacker that cannot react finds fewer and other failures than a closed-loop one, so a 'not "
    "reproduced' may come from this restriction rather than from the method; q* is not factorised, so the "
    "learned q cannot reach it exactly (C1's KL floor)",
)

SIZES = Departure(
    paper="the claims are population effects (the paper's sizes are not public)",
    ours="each check's size comes from a power calculation fixed before its run (power.py: alpha 0.05, power 0.8, "
    "a smallest effect of 5 points, the base rate planned at the least favourable value the earlier looks "
    "allow): 331 episodes per arm (C3-C5), 1,074-1,566 held-out episodes per arm (C6, C7), 1,099 (C8), 1,561 "
    "(C9), 34 and 541 contexts (C1, C2); only 1-3 training seeds and 2-3 min-max rounds",
    why="the earlier quick sizes (30-48 episodes per arm) could not decide; the training budget stays small because a "
    "highway-env episode costs ~0.4 CPU-s, a DQN fine-tune ~46 CPU-s per 1k steps and an LLM driver step one "
    "model call",
    effect="a powered check decides an effect of 5 points either way with probability ~0.8 at the planned base rate; "
    "the episodes are conditional on 1-3 trained defenders and attackers, so a verdict is about those, not "
    "about the spread between training runs",
)

WORLD = Departure(
    paper="(not public) the simulator and scenarios; the closest code (SAGE, CAT) uses MetaDrive with real-world logs",
    ours="highway-env (highway-fast, 12 vehicles, 3 lanes; held out: a dense 4-lane highway, merge, roundabout, "
    "intersection, aggressive traffic, unseen manoeuvres) and a numpy toy world; crash fault from lane-frame "
    "geometry, attacker-at-fault crashes infeasible (never a defender failure)",
    why="MetaDrive/ScenarioNet data cannot be downloaded here; highway-env records no fault",
    effect="fewer interaction types than logged traffic; against the default planner nearly every crash is the "
    "attacker's, so defender failures are rare and the checks that count them need many episodes",
)

SOFT_OPTIMUM = Departure(
    paper="(not public) the form of the optimal adversary distribution and of the value training raises",
    ours="our reconstruction: q*(z) ~ p0(z) exp(-J_gated(z)/tau) (the KL-regularised optimum) and the soft value "
    "V_tau = -tau log E_p0[exp(-J/tau)], computed exactly by enumerating the toy world's whole space",
    why="only the abstract is public; the toy world is the one place J is known for every z",
    effect="if the paper's target differs (another regulariser or tau), the check measures closeness to another "
    "distribution; toy-world results need not carry to highway-env",
)

BASELINES = Departure(
    paper="(not public) the baselines' exact form",
    ours="our random, scripted cut-in + brake, CAT-like (open-loop collision surrogate, no learning) and SAGE-like "
    "(the same learner on the surrogate) attackers, against one fixed, under-cautious default IDM/MOBIL "
    "planner; 'equal rollouts' = the same evaluation episodes per attacker (ADV-0's training rollouts are "
    "printed beside it)",
    why="no code; the design's baselines",
    effect="stronger or weaker baselines than the paper's move the comparison either way",
)

PER_CHECK: dict[str, list[Departure]] = {
    "C1": [
        SOFT_OPTIMUM,
        Departure(
            paper="(not public) the preference learner's details",
            ours="DPO on group-wise pairs with soft Bradley-Terry targets (beta = tau), ties kept, small SGD steps, 60 "
            "rounds against a fixed default IDM defender on 34 contexts (8 before the power plan); changed after a first run (Adam, ties "
            "dropped) that random-walked",
            why="the first configuration did not learn (diagnosed on separate dev seeds)",
            effect="a learner tuned after a look: the verdict is on new contexts, but the tuning is a researcher "
            "degree of freedom",
        ),
    ],
    "C2": [
        SOFT_OPTIMUM,
        Departure(
            paper="(not public) the defender's training",
            ours="two rounds on the toy world: the attacker 15 DPO rounds, then CEM over the IDM parameters against its "
            "draws mixed with normal traffic; V_tau's rise measured on 541 held-out contexts (16 before the power plan)",
            why="V_tau needs J over the whole space, which only the toy world can enumerate",
            effect="a small box of IDM parameters may buy little robustness, so a fall of V_tau may be the defender "
            "class's limit, not the method's",
        ),
    ],
    "C3": [BASELINES],
    "C4": [
        BASELINES,
        Departure(
            paper="(not public) how diversity is measured",
            ours="the number of distinct defender-failure clusters (manoeuvre | slot | impact rule | impact-speed bin), "
            "judged by a percentile bootstrap over episodes only at >= 30 episodes per arm and >= 5 adv0 failures",
            why="a count of distinct clusters has no t interval; the bootstrap of a handful of failures has no width",
            effect="distinct counts are biased low in resamples (singletons drop out), so the interval is conservative",
        ),
    ],
    "C5": [BASELINES],
    "C6": [
        Departure(
            paper="(not public) the motion planner and the size of 'no loss' on normal traffic",
            ours="IDM/MOBIL parameters in a box tuned by CEM (2 rounds, small populations) against adv0's scenarios vs "
            "tuned the same way on normal traffic; 'without losing normal return by more than 5%' is ours",
            why="the design's planner; the abstract names no tolerance",
            effect="a tighter or looser tolerance changes the second part's verdict",
        )
    ],
    "C7": [
        Departure(
            paper="(not public) the learned policy and its training budget",
            ours="an SB3 DQN pretrained once on normal traffic (cached), fine-tuned 3 rounds x 3000 steps with half its "
            "episodes attacked, 3 seeds pooled; reduced sizes print as such",
            why="about 1.5 CPU-hours at the default size already",
            effect="a far shorter training than a paper's may show no generalisation gain that longer training would",
        )
    ],
    "C8": [
        Departure(
            paper="(not public) whether the paper ablates iteration",
            ours="our ablation: the same loop with the attacker frozen after round 1, each attacker drawn against its "
            "own loop's final defender",
            why="the abstract's 'evolves by iterative preference learning' implies iteration matters; no code",
            effect="with the attacker's default step budget q moves little in 3 rounds, so the two arms draw nearly the "
            "same scenarios and the check can only be inconclusive at this size",
        )
    ],
    "C9": [
        Departure(
            paper="(not public) whether the paper trains an LLM driver",
            ours="an LLM driver (a LangGraph loop through the harness's providers, local/smollm2-135m by default) whose "
            "only training is its reflection memory, written after its own crashes on ADV-0's draws",
            why="the design's third defender: a policy that learns without gradients",
            effect="a 135M model barely follows its lessons; no lesson means identical arms (the note says so)",
        )
    ],
}


def sentence_for(check: str) -> str:
    return SENTENCES.get(check, "")


def departures_for(check: str) -> list[Departure]:
    """The departures every check shares, then the check's own."""
    return [ATTACKER, SIZES, WORLD, *PER_CHECK.get(check, [])]
