"""The household world's observation read back into a delta, for the generative world-model baseline
(`environments/cdwm/generative_model.py`: it predicts the next observation, and its delta is the diff
of the facts read from the current observation and from the predicted one).

The engine's reply alone is not a state ("You arrive at fridge 1. The fridge 1 is closed."), and
two replies do not determine the delta:
- `go to` removes `agent at <where it was>`, which a reply names only when it happened to locate
  the agent (after `inventory`, `examine`, `use`, `slice` or "Nothing happens." it does not);
- `heat` also removes `cool` (and `cool` removes `hot`) when the object was so, and heating,
  cooling or cleaning an object that already was changes nothing;
- slicing an object that is already sliced is admissible, replies "You sliced the lettuce 1 with
  the knife 2." as the first slice did, and changes nothing.
Those are facts of earlier steps. So the world also keeps a **status** beside each reply
(`Observation.info["status"]`, written by `status_text` from the world facts after the step): where
the agent is, what it carries with that object's conditions, and which objects are sliced -- what
ALFWorld itself answers to `look`, `inventory` and `examine`, which change no world fact. The
policy is not shown it (ALFWorld's agent reads the reply only); the generative model reads and
writes it as the observation's first line (`Status: at fridge 1; carrying apple 1 (clean, hot);
sliced bread 1`), then the reply (`environments/cdwm/generative_model.observe` writes that form).

`observation_delta(before, after)` diffs two such observations using the text only: the statuses
give the agent's place, what it holds, the held object's conditions and the slicing (so `go to`,
`take`, `move`, `heat`, `cool`, `clean`, `slice`); the after-reply gives what a status does not
show (`o in r` from "You pick up the o from the r." / "You move the o to the r.", `open` from
open / close). "You turn on the desklamp 1." is no change, as in the ledger: the engine never
records a lamp as on (its toggle adds `istoggled`, bookkeeping, and `not_ison`; `facts.py` counts
`ison`, which no state holds), so the ledger's delta of `use` is empty. Reversibility is `facts.py`'s rule with the object
type's affordances from `catalog.py` (static knowledge of the domain, as in the generated tasks'
problems). None -- an unreadable observation -- when a status is missing, the reply contradicts the
statuses (a pick-up the after-status does not carry, a heat its conditions do not show), something
is unsliced, or the irreversibility of `hot` / `cool` cannot be judged (an object type the catalog
does not know).

May import: `environments.cdwm`, this folder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from environments.cdwm.deltas import AttributeChange, Delta, Relation
from environments.household import facts as hf
from environments.household.catalog import COOL, HEAT, OBJECTS

PREFIX = "Status: "
_STATUS = re.compile(r"^Status: at (?P<at>.+?); carrying (?P<held>.+?)(?: \((?P<conds>[a-z, ]+)\))?"
                     r"(?:; sliced (?P<sliced>.+))?$")
NOTHING = "nothing"
# the announcements of a reply (`alfred.twl2`'s feedback) that change what a status does not show
_TAKE = re.compile(r"You pick up the (.+?) from the (.+?)\.")
_PUT = re.compile(r"You move the (.+?) to the (.+?)\.")
_OPEN = re.compile(r"You (open|close) the (.+?)\.(?= |$)")  # then what the receptacle shows
_SLICE = re.compile(r"You sliced the (.+?) with the (.+?)\.")
_TREAT = re.compile(r"You (heat|cool|clean) the (.+?) using the (.+?)\.")
_TREATED = {"heat": "hot", "cool": "cool", "clean": "clean"}
# an attribute -> the affordance that undoes it (facts.UNDO's, in catalog terms)
_UNDO_BY = {"hot": COOL, "cool": HEAT}
_TYPES = {name.lower(): o for name, o in OBJECTS.items()}


def status_text(world: set[hf.Fact], static: Mapping[str, set[str]]) -> str:
    """The status line of a state (`facts.world_facts`): the agent's place as the ledger names it,
    what it holds and that object's conditions (sorted attribute names), and the sliced objects."""
    at = next((hf.place_name(args[1], static) for p, args in world if p == "atlocation"), hf.MIDDLE)
    held = sorted(args[1] for p, args in world if p == "holds")
    line = f"{PREFIX}at {at}; carrying {held[0] if held else NOTHING}"
    if held and (conds := sorted(hf.ATTRIBUTES[p] for p, args in world if p in hf.ATTRIBUTES and args[0] == held[0])):
        line += f" ({', '.join(conds)})"
    sliced = sorted(args[0] for p, args in world if p == "issliced")
    return line + (f"; sliced {', '.join(sliced)}" if sliced else "")


def read_status(text: str) -> tuple[str, str | None, frozenset[str], frozenset[str]] | None:
    """(the agent's place, the carried object or None, its conditions, the sliced objects) of an
    observation's status line; None when its first line is not a status."""
    first = text.strip().split("\n", 1)[0].strip()
    m = _STATUS.match(first)
    if m is None:
        return None
    held = m.group("held").strip()
    conds, sliced = (frozenset(c.strip() for c in (m.group(g) or "").split(",") if c.strip()) for g in ("conds", "sliced"))
    return m.group("at").strip(), None if held == NOTHING else held, conds, sliced


def _reply(text: str) -> str:
    parts = text.strip().split("\n", 1)
    return parts[1].strip() if len(parts) > 1 else ""


def _lost(name: str, attribute: str) -> bool | None:
    """Whether setting `attribute` on the object loses it for good (facts.py's rule); None when the
    object's type is unknown, so an undo cannot be judged."""
    if attribute == "sliced":
        return True
    undo = _UNDO_BY.get(attribute)
    if undo is None:
        return False
    kind = _TYPES.get(name.rsplit(" ", 1)[0])
    return None if kind is None else undo not in kind.affords


def observation_delta(before: str, after: str) -> Delta | None:
    """The delta between two household observations (status line + reply), irreversible as the
    ledger's is; None when either is unreadable or the reply contradicts the statuses."""
    old, new = read_status(before), read_status(after)
    if old is None or new is None:
        return None
    (at0, held0, conds0, sliced0), (at1, held1, conds1, sliced1) = old, new
    reply = _reply(after)
    delta = Delta()
    changed: list[tuple[str, str, bool]] = []  # (entity, attribute, now)
    if at0 != at1:
        delta.relations_added.append(Relation(subject=hf.AGENT, relation="at", object=at1))
        delta.relations_removed.append(Relation(subject=hf.AGENT, relation="at", object=at0))
    if held0 != held1:
        if held1 is not None:
            delta.relations_added.append(Relation(subject=hf.AGENT, relation="holds", object=held1))
        if held0 is not None:
            delta.relations_removed.append(Relation(subject=hf.AGENT, relation="holds", object=held0))
    elif held1 is not None:  # its slicing, if any, is the sliced list's below (a sliced object is never unsliced)
        changed += [(held1, c, True) for c in sorted(conds1 - conds0 - {"sliced"})]
        changed += [(held1, c, False) for c in sorted(conds0 - conds1 - {"sliced"})]
    if sliced0 - sliced1:
        return None  # nothing unslices
    changed += [(o, "sliced", True) for o in sorted(sliced1 - sliced0)]
    if m := _TAKE.fullmatch(reply):
        if held1 != m.group(1) or held0 is not None:
            return None  # a pick-up the statuses do not show
        delta.relations_removed.append(Relation(subject=m.group(1), relation="in", object=m.group(2)))
    elif m := _PUT.fullmatch(reply):
        if held0 != m.group(1) or held1 is not None:
            return None
        delta.relations_added.append(Relation(subject=m.group(1), relation="in", object=m.group(2)))
    elif m := _OPEN.match(reply):
        changed.append((m.group(2), "open", m.group(1) == "open"))
    elif (m := _SLICE.fullmatch(reply)) and m.group(1) not in sliced1:
        return None  # a slice the status does not show (slicing a sliced object again changes nothing)
    elif (m := _TREAT.fullmatch(reply)) and (held1 != m.group(2) or _TREATED[m.group(1)] not in conds1):
        return None  # a treatment the carried object's conditions do not show
    for entity, attribute, now in changed:
        delta.attributes.append(AttributeChange(entity=entity, attribute=attribute, before=not now, after=now))
        if now and (lost := _lost(entity, attribute)) is None:
            return None
        elif now and lost:
            delta.reversible, delta.irreversible_cost = False, 1.0
    return delta
