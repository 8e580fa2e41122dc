"""What the generator under test is told about each format, and how its code is found in a reply.

The reply is data: the code block is cut out as text and handed to the verifier, never run.
"""

from __future__ import annotations

import re

FENCES = {"svg": ("svg", "xml", "html"), "dot": ("dot", "graphviz", "gv"), "mermaid": ("mermaid",),
          "schemdraw-json": ("json",), "schemdraw-py": ("python", "py")}

GUIDES = {
    "svg": ("Answer with one SVG document in a ```svg code block. Draw with <line>, <polyline>, <polygon>, <rect>,"
            " <circle>, <ellipse>, <path> and <text>; give every line a stroke colour. For arrows use a marker on"
            " marker-end. Put the text of a box inside the box and an arrow's label next to the arrow. No scripts,"
            " no images, no external references."),
    "dot": ("Answer with one Graphviz DOT graph in a ```dot code block. Give each node its text with label=\"...\""
            " and its shape with shape=... (box, ellipse, diamond, parallelogram, circle); label an edge with"
            " label=\"...\"; draw a group as subgraph cluster_NAME { label=\"Title\"; ... }."),
    "mermaid": ("Answer with one Mermaid flowchart in a ```mermaid code block starting with `flowchart TD`."
                " Shapes: A[\"rectangle\"], A([\"oval\"]), A{\"diamond\"}, A[/\"parallelogram\"/], A((\"circle\"));"
                " arrows A --> B, labelled A -->|yes| B, plain lines A --- B; groups: subgraph g [\"Title\"] ... end."),
    "schemdraw-json": (
        "Answer with the schematic as schemdraw elements in JSON, in a ```json code block:"
        " {\"elements\": [{\"type\": \"SourceV\", \"label\": \"V1\", \"value\": \"9V\", \"d\": \"up\"},"
        " {\"type\": \"Resistor\", \"label\": \"R1\", \"value\": \"1kΩ\", \"d\": \"right\"}, {\"type\": \"Line\", \"d\": \"down\"}, ...]}."
        " Types: Resistor, Capacitor, Inductor, SourceV, SourceI, Battery, Diode, LED, Lamp, Switch, Fuse, Line (a"
        " wire), Ground, Dot. Each element starts where the previous one ended, or \"at\": [x, y] or \"at\": \"R1.end\";"
        " it runs \"d\" (right, left, up, down) for \"l\" units (default 3), or ends exactly \"to\": [x, y] or"
        " \"to\": \"R1.start\". Parts connect only where their ends meet (or an end touches a Line)."),
    "schemdraw-py": (
        "Answer with Python in a ```python code block that uses only schemdraw: `import schemdraw`, `import"
        " schemdraw.elements as elm`, `with schemdraw.Drawing() as d:` and lines like"
        " `d += elm.Resistor().right().label('R1 1kΩ')`. The code is never run, only read: use only element calls"
        " and .right()/.left()/.up()/.down()/.length(l)/.at((x, y))/.to((x, y))/.label(text); name an element"
        " (R1 = d.add(...)) to use R1.start or R1.end."),
}


def user_prompt(task_prompt: str, fmt: str) -> str:
    return f"{task_prompt}\n\nAnswer format: {fmt}. {GUIDES[fmt]}"


BLOCK = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(reply: str, fmt: str) -> tuple[str | None, str]:
    """(code, how it was found): a fenced block tagged for the format, else any fenced block, else the
    format's own start in the bare text; (None, why) when there is nothing to read."""
    blocks = BLOCK.findall(reply or "")
    tagged = [code for tag, code in blocks if tag.lower() in FENCES[fmt]]
    if tagged:
        return tagged[0].strip(), "tagged block"
    if blocks:
        return blocks[0][1].strip(), "untagged block"
    patterns = {"svg": r"<svg\b.*?</svg>", "dot": r"(?:strict\s+)?(?:di)?graph\b[^{]*\{.*\}",
                "mermaid": r"(?:flowchart|graph)\s+(?:TB|TD|BT|RL|LR)\b.*", "schemdraw-json": r"[\[{].*[\]}]",
                "schemdraw-py": r"(?:import schemdraw|from schemdraw).*"}
    m = re.search(patterns[fmt], reply or "", re.S | re.I)
    if m:
        return m.group().strip(), "bare text"
    return None, "no code block"
