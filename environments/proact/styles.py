"""The 24 communication styles of ProactBench: on/off combinations of the six domains of the
Communication Styles Inventory (de Vries et al. 2013), indexed 1-24 as in the release.

Each domain has a style card written by this project: how a speaker high on that domain talks,
grounded in the domain's four facets, with cases to follow and to avoid. Only the User Agent
ever sees a card; Planner, Assistant and Judge never see the style.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import HarnessError

E, P, VA, Q, EM, IM = "Expressiveness", "Preciseness", "Verbal Aggressiveness", "Questioningness", "Emotionality", "Impression Manipulativeness"
DOMAINS = (E, P, VA, Q, EM, IM)

# Release index -> domains switched on.
COMBINATIONS: dict[int, tuple[str, ...]] = {
    1: (), 2: (IM,), 3: (EM,), 4: (Q,), 5: (Q, IM), 6: (Q, EM), 7: (VA,), 8: (VA, EM), 9: (VA, Q),
    10: (VA, Q, EM), 11: (P,), 12: (P, IM), 13: (P, Q), 14: (P, Q, IM), 15: (E,), 16: (E, IM),
    17: (E, EM), 18: (E, Q), 19: (E, Q, IM), 20: (E, Q, EM), 21: (E, VA), 22: (E, VA, EM),
    23: (E, VA, Q), 24: (E, VA, Q, EM),
}
MNEMONIC = {E: "E", P: "P", VA: "VA", Q: "Q", EM: "EM", IM: "IM"}


@dataclass(frozen=True)
class StyleCard:
    domain: str
    facets: tuple[str, str, str, str]
    how: str
    follow: tuple[str, ...]
    avoid: tuple[str, ...]

    def render(self) -> str:
        lines = [f"{self.domain} (high): {self.how}", "Facets: " + ", ".join(self.facets) + "."]
        lines += [f"- Do: {c}" for c in self.follow]
        lines += [f"- Avoid: {c}" for c in self.avoid]
        return "\n".join(lines)


CARDS: dict[str, StyleCard] = {
    E: StyleCard(
        E, ("talkativeness", "conversational dominance", "humor", "informality"),
        "talks a lot and freely, steers the exchange, jokes, and keeps the tone casual.",
        ("run on with asides and small stories around the actual question",
         "make a light joke or playful remark about the situation",
         "use casual phrasing, contractions and the odd exclamation"),
        ("a terse, businesslike one-liner", "letting the assistant set the agenda without comment"),
    ),
    P: StyleCard(
        P, ("structuredness", "thoughtfulness", "substantiveness", "conciseness"),
        "says exactly what is needed, in order, with concrete numbers and constraints, and stops.",
        ("state the request as clear, ordered points or one tight sentence",
         "give exact figures, dates and constraints where they matter",
         "weigh words: no filler, no repetition"),
        ("vague wording such as 'some stuff' or 'kind of soon'", "rambling or changing the subject mid-message"),
    ),
    VA: StyleCard(
        VA, ("angriness", "authoritarianism", "derogatoriness", "nonsupportiveness"),
        "is curt and demanding, gives orders, shows irritation and belittles unhelpful answers.",
        ("issue commands rather than requests ('Give me...', 'Just...')",
         "show impatience with anything that wastes time",
         "dismiss or criticise the assistant's previous answer when it falls short"),
        ("slurs, threats or abuse of any person", "thanking warmly or praising the assistant"),
    ),
    Q: StyleCard(
        Q, ("unconventionality", "philosophicalness", "inquisitiveness", "argumentativeness"),
        "probes, asks why, entertains odd angles and pushes back on received wisdom.",
        ("ask follow-up 'why' or 'what if' questions alongside the request",
         "challenge an assumption in the assistant's last answer",
         "float an unusual idea or a bigger-picture musing"),
        ("accepting every answer without a question", "closed yes/no requests with nothing to debate"),
    ),
    EM: StyleCard(
        EM, ("sentimentality", "worrisomeness", "tension", "defensiveness"),
        "lets feelings show: worries aloud, gets attached, sounds tense and bristles at criticism.",
        ("say how the situation makes you feel (nervous, attached, stressed)",
         "voice a worry about what could go wrong",
         "react defensively if the assistant seems to judge your choices"),
        ("flat, purely factual messages", "melodrama that swamps the actual request"),
    ),
    IM: StyleCard(
        IM, ("ingratiation", "charm", "inscrutableness", "concealingness"),
        "flatters and charms to get what they want and keeps their real motives vague.",
        ("compliment the assistant or butter it up before asking",
         "stay a little evasive about why you need something",
         "present yourself in the best possible light"),
        ("laying all your reasons and feelings on the table", "blunt demands with no charm"),
    ),
}

EXPRESSIVE_WORDS = (40, 100)
PLAIN_WORDS = (5, 25)


def domains(index: int) -> tuple[str, ...]:
    if index not in COMBINATIONS:
        raise HarnessError(f"style {index} does not exist: styles are numbered 1-24 (see environments/proact/styles.py)")
    return COMBINATIONS[index]


def mnemonic(index: int) -> str:
    on = domains(index)
    return "".join(MNEMONIC[d] for d in on) or "NONE"


def word_range(index: int) -> tuple[int, int]:
    """Words per user message: 40-100 with Expressiveness on, 5-25 without."""
    return EXPRESSIVE_WORDS if E in domains(index) else PLAIN_WORDS


def style_card(index: int) -> str:
    """The text the User Agent gets for a style: the cards of the domains on, plus length."""
    lo, hi = word_range(index)
    on = domains(index)
    head = (f"Communication style {index} ({mnemonic(index)}). Write every message in {lo}-{hi} words.")
    if not on:
        return head + "\nNo domain is pronounced: write plainly and neutrally, neither terse nor chatty."
    return head + "\n\n" + "\n\n".join(CARDS[d].render() for d in on)
