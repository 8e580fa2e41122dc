"""Ground-truth deltas of the household world: the PDDL facts an action changed, as a CDWM
`Delta` over entity / attribute / relation facts named the way the agent reads them.

The engine's state is a set of PDDL facts (`inreceptacle(apple 1, fridge 1)`, ...). The delta of
an action is the difference of the state's *world* facts before and after it:

    atlocation(agent, l)      relation  agent at <receptacle at l>   (locations are not shown to
                                         the agent; "middle of room" where no receptacle is)
    holds(agent, o)           relation  agent holds o
    inreceptacle(o, r)        relation  o in r
    opened(r)                 attribute r open true|false
    isclean / ishot / iscool / ison / issliced (o)
                              attribute o clean|hot|cool|on|sliced true|false

Bookkeeping facts (`checked`, `examined`, `wasinreceptacle`), facts derived from others
(`holdsany`, `objectatlocation`), static facts (types, affordances) and the planner's
axioms are not world changes and are left out.

Reversibility: a change is irreversible when no action of the domain can undo it and some task of
ALFWorld's six types could need it undone. `sliced` has no undo (a sliced object can never again
be the intact object a task asks for); `hot` and `cool` undo each other, so heating is
irreversible only for an object that cannot be cooled (and cooling for one that cannot be heated);
`clean` has no undo but no task needs a dirty object, so it is reversible in this sense.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from environments.cdwm.deltas import AttributeChange, Delta, Relation

AGENT = "agent"
MIDDLE = "middle of room"
RELATIONS = {"holds": "holds", "inreceptacle": "in"}
ATTRIBUTES = {"opened": "open", "isclean": "clean", "ishot": "hot", "iscool": "cool", "ison": "on",
              "issliced": "sliced"}
# attribute -> the affordance that would undo it (None: nothing can)
UNDO = {"sliced": None, "hot": "coolable", "cool": "heatable"}

Fact = tuple[str, tuple[str, ...]]  # (predicate, argument names), predicate lower-case


def world_facts(facts: Iterable[Fact]) -> set[Fact]:
    keep = {"atlocation", *RELATIONS, *ATTRIBUTES}
    return {(p, args) for p, args in facts if p in keep}


def static_index(facts: Iterable[Fact]) -> dict[str, set[str]]:
    """predicate -> names it holds for (one-argument static facts: coolable, heatable, ...), and
    `at:<location>` -> receptacles at that location."""
    index: dict[str, set[str]] = {}
    for p, args in facts:
        if len(args) == 1:
            index.setdefault(p, set()).add(args[0])
        elif p == "receptacleatlocation":
            index.setdefault(f"at:{args[1]}", set()).add(args[0])
    return index


def place_name(location: str, static: Mapping[str, set[str]]) -> str:
    """Where the agent is, in the agent's words: the receptacle at that location (the first by
    name when several share it), or the middle of the room."""
    here = sorted(static.get(f"at:{location}", ()))
    return here[0] if here else MIDDLE


def delta_between(before: set[Fact], after: set[Fact], static: Mapping[str, set[str]]) -> Delta:
    delta = Delta()
    added, removed = after - before, before - after
    for sign, changed in (("+", added), ("-", removed)):
        for pred, args in sorted(changed):
            if pred == "atlocation":
                rel = Relation(subject=AGENT, relation="at", object=place_name(args[1], static))
            elif pred in RELATIONS:
                subject = AGENT if pred == "holds" else args[0]
                obj = args[1]
                rel = Relation(subject=subject, relation=RELATIONS[pred], object=obj)
            else:
                attribute = ATTRIBUTES[pred]
                delta.attributes.append(AttributeChange(entity=args[0], attribute=attribute,
                                                        before=sign == "-", after=sign == "+"))
                if sign == "+" and attribute in UNDO and ((undo := UNDO[attribute]) is None
                                                          or args[0] not in static.get(undo, set())):
                    delta.reversible = False
                    delta.irreversible_cost = 1.0  # the object is lost for tasks needing it as it was
                continue
            (delta.relations_added if sign == "+" else delta.relations_removed).append(rel)
    return delta

