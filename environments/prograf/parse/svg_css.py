"""An SVG's `<style>` sheets, read with CSS's meaning so a rule is never silently dropped.

Read: selector lists (`a, b`), compounds of a tag or `*` with classes and ids (`g.edge#e1`), the
descendant (`g.edge path`) and child (`g > text`) combinators, `:root`, and `!important`. The
cascade is CSS's: presentation attributes lose to every rule, rules are ordered by specificity and
then by source order, `style=` beats them, and `!important` beats all. Dynamic pseudo-classes
(`:hover`, `:focus`, ...) never match a still picture, and `@font-face` / `@keyframes` paint no
geometry, so both are read as drawing nothing. Anything else -- sibling combinators, attribute
selectors, structural pseudo-classes, `@media`, nested blocks -- is refused as "unsupported
construct X in <style> at line N" rather than dropped, since a dropped rule can turn a white label
box or an edge colour into something else.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from environments.prograf.parse.scene import InputRejected

MAX_RULES = 2_000  # selectors over all sheets; generated sheets (Mermaid's) hold ~100
MAX_PARTS = 16  # compounds in one selector; real ones have 1-4
MAX_TESTS = 300_000  # element-against-compound tests over the drawing: bounded time on a hostile sheet
DYNAMIC = frozenset(("hover", "active", "focus", "focus-visible", "focus-within", "visited", "target"))
IGNORED_AT = frozenset(("font-face", "keyframes", "-webkit-keyframes", "charset", "import", "namespace"))
COMPOUND = re.compile(r"(\*|[a-zA-Z][\w-]*)?((?:[.#][\w-]+|:[\w-]+)*)")
PART = re.compile(r"([.#:])([\w-]+)")


Facts = tuple[str, str, frozenset[str]]  # what a selector can test of an element: its name, id and classes


@dataclass(frozen=True)
class Compound:
    tag: str  # "" for any
    classes: tuple[str, ...]
    ident: str
    root: bool
    never: bool  # a dynamic pseudo-class: matches nothing in a still picture

    def matches(self, el: Facts, is_root: bool) -> bool:
        if self.never or (self.root and not is_root):
            return False
        if self.tag and el[0] != self.tag:
            return False
        if self.ident and el[1] != self.ident:
            return False
        return not self.classes or el[2].issuperset(self.classes)


@dataclass(frozen=True)
class Rule:
    compounds: tuple[Compound, ...]  # left to right
    child: tuple[bool, ...]  # child[i]: compounds[i] is the parent (not just an ancestor) of compounds[i + 1]
    rank: tuple[int, int, int, int]  # (ids, classes, tags, source order): the cascade's order
    normal: dict[str, str]
    important: dict[str, str]


def _name(el: ET.Element) -> str:
    # the local name; svg_sanitise.local is not imported, as the sanitiser imports this module
    return el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""


def _refuse(what: str, line: int) -> InputRejected:
    return InputRejected(f"unsupported construct {what!r} in <style> at line {line}")


def read_sheet(text: str, line: int, start: int = 0) -> list[Rule]:
    """The rules of one `<style>` element whose text begins on `line`; source order numbered from
    `start`. InputRejected names the first construct not read, with its line."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
    rules: list[Rule] = []
    pos = 0
    while True:
        while pos < len(text) and (text[pos].isspace() or text[pos] == ";"):
            pos += 1
        if pos >= len(text):
            return rules
        at = line + text.count("\n", 0, pos)
        brace = text.find("{", pos)
        if text[pos] == "@":
            name = re.match(r"@([\w-]*)", text[pos:])
            word = name.group(1).lower() if name else ""
            semi = text.find(";", pos)
            if semi != -1 and (brace == -1 or semi < brace):  # a statement: @charset, @import (local ones only)
                if word not in IGNORED_AT:
                    raise _refuse("@" + word, at)
                pos = semi + 1
                continue
            if word not in IGNORED_AT or brace == -1:
                raise _refuse("@" + word, at)
            pos = _block_end(text, brace)
            continue
        if brace == -1:
            raise _refuse(text[pos:pos + 40].strip(), at)
        close = text.find("}", brace)
        close = len(text) if close == -1 else close  # an unclosed last block ends with the sheet
        body = text[brace + 1:close]
        if "{" in body:
            raise _refuse("a block nested in " + text[pos:brace].strip(), at)
        normal, important = split_declarations(body)
        for sel in text[pos:brace].split(","):
            rules.append(_rule(sel.strip(), at, start + len(rules), normal, important))
        pos = close + 1


def _block_end(text: str, brace: int) -> int:
    depth = 0
    for i in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    return len(text)


def split_declarations(body: str) -> tuple[dict[str, str], dict[str, str]]:
    """`fill: red; stroke: blue !important` -> ({fill: red}, {stroke: blue}): a rule's or a `style=`'s."""
    normal: dict[str, str] = {}
    important: dict[str, str] = {}
    for part in body.split(";"):
        key, sep, value = part.partition(":")
        if sep:
            value, flagged = re.subn(r"\s*!\s*important\s*$", "", value.strip(), flags=re.I)
            (important if flagged else normal)[key.strip().lower()] = value.strip()
    return normal, important


def _rule(sel: str, line: int, order: int, normal: dict[str, str], important: dict[str, str]) -> Rule:
    if not sel or re.search(r"[^\w\s.#:*>-]", sel):  # [attr], +, ~, (...), quotes
        raise _refuse(sel, line)
    tokens = re.sub(r"\s*>\s*", " > ", sel).split()
    compounds: list[Compound] = []
    child: list[bool] = []
    ids = classes = tags = 0
    if len(tokens) > 2 * MAX_PARTS:
        raise InputRejected(f"a <style> selector of more than {MAX_PARTS} parts at line {line}")
    for k, token in enumerate(tokens):
        if token == ">":
            if not compounds or k + 1 == len(tokens) or tokens[k + 1] == ">":
                raise _refuse(sel, line)
            child[-1] = True
            continue
        m = COMPOUND.fullmatch(token)
        if not m or "::" in token:
            raise _refuse(sel, line)
        names: list[str] = []
        idents: list[str] = []
        pseudo: list[str] = []
        for kind, word in PART.findall(m.group(2)):
            {".": names, "#": idents, ":": pseudo}[kind].append(word.lower() if kind == ":" else word)
        if any(p not in DYNAMIC and p != "root" for p in pseudo):
            raise _refuse(sel, line)
        tag = m.group(1) or ""
        ids += len(idents)
        classes += len(names) + len(pseudo)
        tags += tag not in ("", "*")
        never = any(p in DYNAMIC for p in pseudo) or len(set(idents)) > 1  # one element has one id
        compounds.append(Compound("" if tag == "*" else tag, tuple(names), idents[0] if idents else "",
                                  "root" in pseudo, never))
        child.append(False)
    return Rule(tuple(compounds), tuple(child[:-1]), (ids, classes, tags, order), normal, important)


class Stylesheet:
    """Every `<style>` of a drawing, resolved once per element: `props(el)` is what the sheet sets
    on it, as (normal, important) declarations in cascade order."""

    def __init__(self, root: ET.Element) -> None:
        rules: list[Rule] = []
        for el in root.iter():
            if _name(el) == "style":
                rules += read_sheet(el.text or "", 0, len(rules))
        if len(rules) > MAX_RULES:
            raise InputRejected(f"<style> sheets with {len(rules)} rules (at most {MAX_RULES})")
        # each rule filed under its last compound's id, a class, or tag (or "*"), so an element tries
        # only the rules that can select it: a long sheet over a large drawing stays fast
        self._index: dict[str, list[Rule]] = {}
        for rule in rules:
            last = rule.compounds[-1]
            key = "#" + last.ident if last.ident else "." + last.classes[0] if last.classes else last.tag or "*"
            self._index.setdefault(key, []).append(rule)
        self._props: dict[int, tuple[dict[str, str], dict[str, str]]] = {}
        self._budget = [MAX_TESTS]
        if rules:
            self._resolve(root)

    def props(self, el: ET.Element) -> tuple[dict[str, str], dict[str, str]]:
        return self._props.get(id(el), ({}, {}))

    def _resolve(self, root: ET.Element) -> None:
        stack: list[tuple[ET.Element, tuple[Facts, ...]]] = [(root, ())]
        while stack:  # iterative; the tree's depth was bounded by the sanitiser
            el, ancestors = stack.pop()
            normal: dict[str, str] = {}
            important: dict[str, str] = {}
            facts = (_name(el), el.get("id") or "", frozenset((el.get("class") or "").split()))
            keys = {"*", facts[0], "#" + facts[1]} | {"." + c for c in facts[2]}
            candidates = [r for k in keys for r in self._index.get(k, ())]
            for rule in sorted(candidates, key=lambda r: r.rank):  # the cascade's order
                if _selects(rule, facts, ancestors, self._budget):
                    normal.update(rule.normal)
                    important.update(rule.important)
            if normal or important:
                self._props[id(el)] = (normal, important)
            below = (*ancestors, facts)
            stack.extend((c, below) for c in el if isinstance(c.tag, str))


def _spend(budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise InputRejected(f"<style> selectors needing more than {MAX_TESTS} tests to match the drawing")


def _selects(rule: Rule, el: Facts, ancestors: tuple[Facts, ...], budget: list[int]) -> bool:
    last = len(rule.compounds) - 1
    _spend(budget)
    if not rule.compounds[last].matches(el, not ancestors):
        return False
    # compounds[:i + 1] failed within ancestors[:limit]: under a descendant combinator any smaller limit
    # fails too (fewer places to try), so one number per compound; under a child one, that limit only
    failed_below: dict[int, int] = {}
    failed_at: set[tuple[int, int]] = set()

    def up(i: int, limit: int) -> bool:
        """compounds[:i + 1] match in ancestors[:limit], compounds[i] bound to compounds[i + 1]'s place."""
        if i < 0:
            return True
        if limit <= failed_below.get(i, -1) or (i, limit) in failed_at:
            return False
        found = False
        for j in range(limit - 1, -1, -1):
            _spend(budget)
            if rule.compounds[i].matches(ancestors[j], j == 0):
                if up(i - 1, j):
                    found = True
                    break
                if i > 0 and not rule.child[i - 1]:
                    break  # the rest above fails within ancestors[:j], so within any smaller part too
            if rule.child[i]:
                break  # a child combinator: only the parent may match
        if not found and rule.child[i]:
            failed_at.add((i, limit))
        elif not found:
            failed_below[i] = max(limit, failed_below.get(i, -1))
        return found

    return up(last - 1, len(ancestors))
