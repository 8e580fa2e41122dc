"""The `harness` command: a package of small command modules on one typer app.

Thin by design: parse flags, call the runner / leaderboards, print results. Other packages add
commands through the entry-point group `harness.commands` (a typer app, or a command function for a
top-level command such as PreFT's `generate`) and benchmarks through `harness.bench` (a command
function each); they import `harness.cli.kit` (consoles, `fail`, `RUN_DIR`, `run_config`,
`print_summary`) and nothing else from here.

Every declared option can also come from the environment: `HARNESS_<COMMAND>_<OPTION>`, e.g.
`HARNESS_EVAL_MODEL=openai/gpt-4o-mini` or `HARNESS_LEADERBOARD_EXPORT_FORMAT=md`; the role
shorthands of `eval` and `score` (`harness.roles`) are not declared options: set their general form,
e.g. `HARNESS_EVAL_ROLE="judge=openai/gpt-4o"`.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

import typer

from harness.cli import bench, claims_cmds, info_cmds, model_cmds, run_cmds

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Evaluate LLM agents on benchmark suites.")
for _module in (run_cmds, info_cmds, model_cmds):
    app.registered_commands += _module.app.registered_commands
app.add_typer(bench.bench_app, name="bench")
app.add_typer(claims_cmds.claims_app, name="claims")

ENV_PREFIX = "HARNESS"


def _add_plugin_commands() -> None:
    """Commands of other packages (`harness.commands`: a typer app is a group, a command function a
    top-level command such as PreFT's `generate`) and benchmarks (`harness.bench`), so the core CLI
    knows no specific suite or engine."""
    for ep in entry_points(group="harness.commands"):
        found = ep.load()
        if isinstance(found, typer.Typer):
            app.add_typer(found, name=ep.name)
        else:
            app.command(ep.name)(found)
    for ep in entry_points(group="harness.bench"):
        bench.bench_app.command(ep.name)(ep.load())


def _envvars(command: Any, prefix: str) -> None:
    """`HARNESS_<COMMAND>_<OPTION>` for every option that names no variable of its own."""
    for param in command.params:
        if getattr(param, "param_type_name", "") == "option" and not param.envvar:
            flag = max((o for o in param.opts if o.startswith("--")), key=len, default=f"--{param.name}")
            param.envvar = f"{prefix}_{flag.lstrip('-').upper().replace('-', '_')}"
    for name, sub in getattr(command, "commands", {}).items():
        _envvars(sub, f"{prefix}_{name.upper().replace('-', '_')}")


def main() -> None:
    _add_plugin_commands()
    command = typer.main.get_command(app)
    _envvars(command, ENV_PREFIX)
    command(prog_name="harness")
