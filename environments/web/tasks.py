"""Task configs in WebArena's format: loading, validation and site-placeholder substitution.

Our own tasks use __SHOP__, __TRAVEL__ and __MAIL__, filled from the running web world. Real
WebArena configs use __SHOPPING__, __REDDIT__, ... , filled from the environment variables
WebArena itself uses (SHOPPING, REDDIT, ...), so its task files run unchanged against a real
deployment. The project's CDWM fields live under the key "cdwm" and WebArena's code ignores them.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

from environments.web.ledger import check_predicate

TASK_DIR = Path(__file__).parent / "tasks"
# WebArena's placeholder -> the environment variable that holds that site's base URL.
WEBARENA_SITES = {"__SHOPPING__": "SHOPPING", "__SHOPPING_ADMIN__": "SHOPPING_ADMIN", "__REDDIT__": "REDDIT",
                  "__GITLAB__": "GITLAB", "__WIKIPEDIA__": "WIKIPEDIA", "__MAP__": "MAP", "__HOMEPAGE__": "HOMEPAGE"}
EVAL_TYPES = ("string_match", "url_match", "program_html")
STRING_KEYS = ("exact_match", "must_include", "fuzzy_match")
PLACEHOLDER_RE = re.compile(r"__[A-Z][A-Z_]*[A-Z]__")
CDWM_KEYS = {"site", "trap", "trap_kind", "forbidden", "required_irreversible", "reference_actions", "wrong_actions",
             "note"}


class TaskError(ValueError):
    """A bad task config; the message names the file, the task and the fix."""


def load_tasks(path: Path | str | None = None) -> list[dict[str, Any]]:
    """Every task in a JSON file (one config or a list, like WebArena's test.raw.json) or in every
    *.json file of a folder (default: the project's own tasks), validated, sorted by task_id."""
    root = Path(path) if path is not None else TASK_DIR
    files = sorted(root.glob("*.json")) if root.is_dir() else [root]
    if not files or not all(f.is_file() for f in files):
        raise TaskError(f"{root}: no task files found; pass a WebArena config (.json) or a folder of them")
    tasks: list[dict[str, Any]] = []
    for f in files:
        try:
            data = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            raise TaskError(f"{f}: not valid JSON ({e}); fix the file or remove it") from e
        for i, task in enumerate(data if isinstance(data, list) else [data]):
            tasks.append(validate(task, f"{f.name}[{i}]"))
    ids = [t["task_id"] for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1}, key=str)
    if dupes:
        raise TaskError(f"{root}: duplicate task_id {dupes}; give every task its own id")
    return sorted(tasks, key=lambda t: (str(type(t["task_id"])), t["task_id"]))


def validate(task: Any, where: str) -> dict[str, Any]:
    if not isinstance(task, dict):
        raise TaskError(f"{where}: a task must be a JSON object with intent, start_url and eval")
    where = f"{where} (task_id {task.get('task_id', '?')})"
    for key in ("task_id", "intent", "start_url", "eval"):
        if key not in task:
            raise TaskError(f"{where}: missing {key!r}; WebArena configs need task_id, intent, start_url and eval")
    ev = task["eval"]
    types = ev.get("eval_types") if isinstance(ev, dict) else None
    if not types or not isinstance(types, list) or any(t not in EVAL_TYPES for t in types):
        raise TaskError(f"{where}: eval.eval_types must be a non-empty list of {list(EVAL_TYPES)}, got {types!r}")
    if "string_match" in types:
        ref = ev.get("reference_answers")
        if not isinstance(ref, dict) or not ref or any(k not in STRING_KEYS for k in ref):
            raise TaskError(f"{where}: string_match needs eval.reference_answers with keys from {list(STRING_KEYS)}")
        if "must_include" in ref and not isinstance(ref["must_include"], list):
            raise TaskError(f"{where}: reference_answers.must_include must be a list of phrases")
        fuzzy = ref.get("fuzzy_match")
        if fuzzy is not None and fuzzy != "N/A" and not isinstance(fuzzy, list):
            raise TaskError(f"{where}: reference_answers.fuzzy_match must be a list or \"N/A\"")
    if "url_match" in types and not ev.get("reference_url"):
        raise TaskError(f"{where}: url_match needs eval.reference_url (alternatives joined by ' |OR| ')")
    if "url_match" in types and ev.get("url_note", "GOLD in PRED") != "GOLD in PRED":
        raise TaskError(f"{where}: url_note {ev.get('url_note')!r} is not supported; WebArena uses \"GOLD in PRED\"")
    if "program_html" in types:
        targets = ev.get("program_html")
        if not isinstance(targets, list) or not targets:
            raise TaskError(f"{where}: program_html needs a non-empty eval.program_html list of {{url, locator, required_contents}}")
        for j, target in enumerate(targets):
            req = target.get("required_contents") if isinstance(target, dict) else None
            if not isinstance(req, dict) or not ({"exact_match", "must_include"} & set(req)) or "url" not in target:
                raise TaskError(f"{where}: program_html[{j}] needs url, locator and required_contents "
                                "with exact_match or must_include")
    cdwm = task.get("cdwm", {})
    if not isinstance(cdwm, dict) or set(cdwm) - CDWM_KEYS:
        raise TaskError(f"{where}: cdwm must be an object with keys from {sorted(CDWM_KEYS)}")
    for key in ("forbidden", "required_irreversible"):
        for j, pred in enumerate(cdwm.get(key, [])):
            try:
                check_predicate(pred, f"{where}: cdwm.{key}[{j}]")
            except ValueError as e:
                raise TaskError(str(e)) from e
    return task


def webarena_urls(environ: dict[str, str] | None = None) -> dict[str, str]:
    """WebArena placeholders whose environment variable is set (trailing slash dropped)."""
    env = os.environ if environ is None else environ
    return {ph: env[var].rstrip("/") for ph, var in WEBARENA_SITES.items() if env.get(var)}


def substitute(task: dict[str, Any], urls: dict[str, str]) -> dict[str, Any]:
    """A copy of the task with every site placeholder replaced; an unknown or unset one is an
    error naming it and how to set it."""

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            for ph in set(PLACEHOLDER_RE.findall(value)):
                if ph not in urls:
                    var = WEBARENA_SITES.get(ph)
                    fix = (f"set ${var} to the deployment's base URL" if var else
                           f"use one of {sorted(set(urls) | set(WEBARENA_SITES))}")
                    raise TaskError(f"task {task.get('task_id')}: placeholder {ph} has no URL; {fix}")
                value = value.replace(ph, urls[ph])
            return value
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    filled: dict[str, Any] = fill(copy.deepcopy(task))
    return filled


def uses_world(task: dict[str, Any]) -> bool:
    """True when the task runs on this project's sites (so the world is reset for it)."""
    return any(ph in json.dumps(task) for ph in ("__SHOP__", "__TRAVEL__", "__MAIL__"))
