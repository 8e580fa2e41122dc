"""The reference code's judge prompt, used as is, and its generation settings as one preset.

The project writes its own judge prompt (`protocol.judge_messages`). Reproducing published
numbers needs the reference's exact prompt, whose text is not ours to ship, so it is loaded from
a local checkout of boson-ai/ProactBench the user has (`--suite-option judge_prompt=reference
--suite-option reference_repo=PATH`) and called, never rewritten:

- `proactbench/prompts/runtime.py`: `JUDGE_SYSTEM_TEMPLATE` (the system message) and
  `build_judge_eval_message(trigger_point, history)` (the user message; `history` ends with the
  trigger turn's user message and the reply under review);
- `proactbench/types.py`: `TriggerPoint` and `EvaluationRubric`, the pydantic models the builder
  takes (it renders the rubric with the model's own JSON dump, so our dict would not do).

Only those two files run: the package's `__init__.py` files import the API clients (openai,
anthropic, google-genai), which a grading run does not need, so the modules are imported under
a private package name whose search path is the checkout's folder. The answer form is the
reference's structured output, `{"evaluation_result": {status, score, rationale, evidence}}`.

The settings (docs/proact_reference.md) are the reference's offline evaluation's: the model under
test at temperature 0.7, top_p 1.0, 8192 new tokens, no system prompt; the judge at temperature
0.7, top_p 1.0, 32768 new tokens; for OpenAI reasoning models (gpt-5*, o1*, o3*, o4*) and
gemini-2.5-pro, either role at temperature 1.0 and at least 32768 tokens.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from corpora.proact_types import GRADES, Rubric
from environments.proact.judge_prompts import JudgePrompt, JudgeSettings, Messages, prompt_sha256
from environments.proact.protocol import JudgeFormatError, json_objects
from harness.errors import HarnessError
from harness.providers.base import GenerateConfig

RUNTIME = Path("proactbench") / "prompts" / "runtime.py"
TYPES = Path("proactbench") / "types.py"
BUILDERS = {RUNTIME: ("JUDGE_SYSTEM_TEMPLATE", "build_judge_eval_message"), TYPES: ("TriggerPoint", "EvaluationRubric")}
RUBRIC_FIELDS = ("type", "pass_criteria", "partial_criteria", "fail_criteria")

# The reference's generation settings (its offline evaluation's generation configs).
REFERENCE_ASSISTANT_CONFIG = GenerateConfig(temperature=0.7, max_tokens=8192, top_p=1.0)
REFERENCE_JUDGE_CONFIG = GenerateConfig(temperature=0.7, max_tokens=32768, top_p=1.0)
REASONING_PREFIXES = ("gpt-5", "o1", "o3", "o4")
REASONING_MIN_TOKENS = 32768

# The answer form the reference asks for, as a schema for decoding (its judge used structured
# outputs). `status` may be SKIPPED: the reference's type allows it and counts it SKIPPED.
REFERENCE_ANSWER_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "required": ["evaluation_result"],
    "additionalProperties": False,
    "properties": {"evaluation_result": {
        "type": "object",
        "required": ["status", "score", "rationale", "evidence"],
        "additionalProperties": False,
        "properties": {
            "status": {"enum": ["EVALUATED", "SKIPPED"]},
            "score": {"enum": [*GRADES]},
            "rationale": {"type": "string", "minLength": 1},
            "evidence": {"type": "string"},
        },
    }},
}


def reference_model_rule(config: GenerateConfig, model_name: str) -> GenerateConfig:
    """The reference's adjustment for reasoning models: temperature 1.0, at least 32768 tokens.
    It matches the bare model name, so a provider prefix (`openai/`, `litellm/...`) is dropped."""
    bare = model_name.rsplit("/", 1)[-1]
    if bare.startswith(REASONING_PREFIXES) or "gemini-2.5-pro" in bare:
        return config.merged(temperature=1.0, max_tokens=max(config.max_tokens, REASONING_MIN_TOKENS))
    return config


def parse_reference_answer(text: str) -> dict[str, str]:
    """`{"evaluation_result": {...}}` -> status, score, rationale, evidence; JudgeFormatError says why not."""
    last_error = "no JSON object found"
    for obj, problem in json_objects(text):
        if problem:
            last_error = problem
            continue
        result = obj.get("evaluation_result") if isinstance(obj, dict) else None
        if not isinstance(result, dict):
            last_error = "schema: `evaluation_result` is missing or not an object"
            continue
        status = str(result.get("status", "")).strip().upper()
        score = str(result.get("score", "")).strip().upper()
        rationale, evidence = result.get("rationale"), result.get("evidence")
        if status not in ("EVALUATED", "SKIPPED"):
            last_error = f"schema: `evaluation_result.status` is {result.get('status')!r}, not EVALUATED or SKIPPED"
        elif status == "EVALUATED" and score not in GRADES:
            last_error = f"schema: `evaluation_result.score` is {result.get('score')!r}, not one of {', '.join(GRADES)}"
        elif not isinstance(rationale, str) or not rationale.strip() or not isinstance(evidence, str):
            last_error = "schema: `evaluation_result.rationale` and `evidence` must be strings (a rationale not empty)"
        else:
            return {"status": status, "score": score, "rationale": rationale, "evidence": evidence}
    raise JudgeFormatError(last_error)


def _fix(repo: Path) -> str:
    return (f"reference_repo={repo} must be a local checkout of boson-ai/ProactBench whose {RUNTIME} defines "
            f"JUDGE_SYSTEM_TEMPLATE and build_judge_eval_message (the offline judge)")


def _import(repo: Path) -> dict[Path, types.ModuleType]:
    """The two reference modules, imported under a private package name (fresh on every call,
    so an edited checkout is read again)."""
    if not repo.is_dir():
        raise HarnessError(f"reference_repo {repo} is not a folder: {_fix(repo)}")
    for rel in BUILDERS:
        if not (repo / rel).is_file():
            raise HarnessError(f"{repo / rel} not found: {_fix(repo)}")
    root = "_proact_reference_" + hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]
    for name in [m for m in sys.modules if m == root or m.startswith(root + ".")]:
        del sys.modules[name]
    # Empty packages stand in for proactbench/ and proactbench/prompts/ so that their __init__.py
    # files (client imports) never run; relative imports inside the modules still resolve.
    for name, folder in ((root, repo / "proactbench"), (f"{root}.prompts", repo / "proactbench" / "prompts")):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        package.__package__ = name
        sys.modules[name] = package
    modules = {}
    for rel, name in ((TYPES, f"{root}.types"), (RUNTIME, f"{root}.prompts.runtime")):
        try:
            modules[rel] = importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - their code, any failure is one line naming the file
            raise HarnessError(f"{repo / rel} could not be imported ({type(exc).__name__}: {exc}): {_fix(repo)}") from None
    return modules


def load_reference_prompt(repo: Path) -> JudgePrompt:
    """The reference's judge prompt from a checkout; one clear error naming the file and what is
    missing when the checkout lacks the builders or they do not build a prompt."""
    repo = repo.expanduser()
    modules = _import(repo)
    for rel, names in BUILDERS.items():
        for name in names:
            if not hasattr(modules[rel], name):
                raise HarnessError(f"{repo / rel} has no `{name}`: {_fix(repo)}")
    # Their objects, of their types: checked below before use.
    system: object = modules[RUNTIME].JUDGE_SYSTEM_TEMPLATE
    builder: object = modules[RUNTIME].build_judge_eval_message
    if not isinstance(system, str) or not system.strip():
        raise HarnessError(f"{repo / RUNTIME}: `JUDGE_SYSTEM_TEMPLATE` is not a non-empty string: {_fix(repo)}")
    if not callable(builder):
        raise HarnessError(f"{repo / RUNTIME}: `build_judge_eval_message` is not a function: {_fix(repo)}")
    trigger_point: Callable[..., Any] = modules[TYPES].TriggerPoint
    rubric_model: Callable[..., Any] = modules[TYPES].EvaluationRubric

    def build(turn: int, rubric: Rubric, history: Messages, reply: str) -> Messages:
        # Their code reads the rubric's fields as its own pydantic model: the JSON boundary.
        fields = rubric.model_dump()
        tp = trigger_point(turn=turn, evaluation_rubric=rubric_model(**{k: fields[k] for k in RUBRIC_FIELDS}))
        # As the reference calls it: the history through the trigger turn's user message, then the reply.
        user = builder(tp, [*history, {"role": "assistant", "content": reply}])
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    try:
        sha = prompt_sha256(build)
    except Exception as exc:  # noqa: BLE001 - their code: a failed probe is one line naming the file
        raise HarnessError(f"{repo / RUNTIME}: build_judge_eval_message(trigger_point, history) failed on a probe "
                           f"input ({type(exc).__name__}: {exc}): {_fix(repo)}") from None
    probe = build(1, Rubric(type="EMERGENT", pass_criteria="x", partial_criteria="x", fail_criteria="x"),
                  [{"role": "user", "content": "x"}], "x")
    if not isinstance(probe[1]["content"], str):
        raise HarnessError(f"{repo / RUNTIME}: build_judge_eval_message returned a {type(probe[1]['content']).__name__}, "
                           f"not the message text: {_fix(repo)}")
    return JudgePrompt(name="reference", build=build, parse=parse_reference_answer, schema=REFERENCE_ANSWER_SCHEMA,
                       source=str((repo / RUNTIME).resolve()), sha256=sha)


def judge_settings(prompt: JudgePrompt, preset: str, default: JudgeSettings) -> JudgeSettings:
    """The judge's settings for a prompt under a preset (`harness`: the project's, `reference`)."""
    if preset == "reference":
        return JudgeSettings(prompt=prompt, config=REFERENCE_JUDGE_CONFIG, for_model=reference_model_rule)
    return JudgeSettings(prompt=prompt, config=default.config, for_model=default.for_model)

