"""The import contracts (pyproject.toml `[tool.importlinter]`: the folder READMEs' "May import"
lines, and no import cycles) hold on this tree, and they bite: each contract is broken on purpose in
a copy of the packages and `lint-imports` must report that contract broken by that very import.
Several of the planted imports sit inside a function: lazy imports count like any other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is in the dev extra: make install")

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
PACKAGES = CONFIG["root_packages"]
# Where a package's source lies when not under its own name (pyproject's packages.find `where`).
SOURCE = {"preft": Path("kernels") / "preft"}
CONTRACTS = [c["id"] for c in CONFIG["contracts"]]

# Contracts the tree does not keep yet (id -> why); their check runs as xfail(strict=False).
NOT_YET: dict[str, str] = {}

# contract id -> (the code planted, as (file in the copy, code appended to it); text the report must name)
BITES: dict[str, tuple[list[tuple[str, str]], str]] = {
    "core": ([("harness/errors.py", "def _lazy():\n    import preft.engine\n")],
             "harness.errors -> preft.engine"),
    "core-below-cli": ([("harness/errors.py", "def _lazy():\n    import harness.cli\n")],
                       "harness.errors -> harness.cli"),
    # The CLI layer may import the packages above the core, but never preft.
    "no-preft": ([("harness/cli/kit.py", "def _lazy():\n    import preft.generate\n")],
                 "harness.cli.kit -> preft.generate"),
    "agents": ([("agents/__init__.py", "import environments\n")], "agents -> environments"),
    "corpora": ([("corpora/__init__.py", "def _lazy():\n    import agents\n")], "corpora -> agents"),
    "preft": ([("preft/__init__.py", "import leaderboards\n")], "preft -> leaderboards"),
    "leaderboards": ([("leaderboards/__init__.py", "def _lazy():\n    import environments\n")],
                     "leaderboards -> environments"),
    "environments": ([("environments/__init__.py", "def _lazy():\n    import preft\n")], "environments -> preft"),
    # A suite reaching a trainer, lazily.
    "suite-no-training": ([("environments/web/suite.py", "def _lazy():\n    import environments.cdwm.wm_train\n")],
                          "environments.web.suite -> environments.cdwm.wm_train"),
    # A ProGraf reader reaching up into the verifier, lazily.
    "prograf-layers": ([("environments/prograf/parse/dot.py",
                         "def _lazy():\n    import environments.prograf.check.findings\n")],
                       "environments.prograf.parse.dot -> environments.prograf.check.findings"),
    # ADV-0's world reaching up into a policy, lazily.
    "adv0-layers": ([("environments/adv0/sim/highway.py", "def _lazy():\n    import environments.adv0.policies.attacker\n")],
                    "environments.adv0.sim.highway -> environments.adv0.policies.attacker"),
    # Two new sibling modules that import each other, one of them lazily.
    "acyclic": ([("leaderboards/_cycle_a.py", "def _lazy():\n    from leaderboards import _cycle_b\n"),
                 ("leaderboards/_cycle_b.py", "from leaderboards import _cycle_a\n")], "._cycle_"),
    # Two sibling subpackages whose modules import each other, lazily.
    "acyclic-environments": ([("environments/web/_cycle.py", "def _lazy():\n    import environments.proact.suite\n"),
                              ("environments/proact/_cycle.py", "def _lazy():\n    import environments.web.suite\n")],
                             "No cycles are allowed in environments"),
}


def lint_imports(tree: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the packages under `tree` (first on the path), limited to `contracts`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    args = [str(LINT_IMPORTS), "--no-cache", "--no-logo", *(f"--contract={c}" for c in contracts)]
    return subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The packages' Python files and pyproject.toml, copied. harness/ gets an empty __init__.py:
    as a namespace package it would merge with the installed tree's portion of `harness`."""
    for package in PACKAGES:
        shutil.copytree(ROOT / SOURCE.get(package, Path(package)), tmp_path / package,
                        ignore=lambda _dir, names: [n for n in names if n == "__pycache__"
                                                    or (not n.endswith(".py") and "." in n)])
    (tmp_path / "harness" / "__init__.py").touch()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _append(tree: Path, rel: str, code: str) -> None:
    path = tree / rel
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(text + "\n\n" + code, encoding="utf-8")


def test_every_contract_has_a_bite():
    assert sorted(BITES) == sorted(CONTRACTS)


@pytest.mark.parametrize("contract", [
    pytest.param(c, marks=pytest.mark.xfail(c in NOT_YET, reason=NOT_YET.get(c, ""), strict=False))
    for c in CONTRACTS])
def test_tree_keeps_contract(contract):
    result = lint_imports(ROOT, contract)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("contract", sorted(BITES))
def test_contract_bites(tree, contract):
    planted, expected = BITES[contract]
    for rel, code in planted:
        _append(tree, rel, code)
    result = lint_imports(tree, contract)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout and expected in result.stdout, result.stdout


def test_cli_layer_may_import_anything(tree):
    """harness.cli is the top of the stack: its imports of the packages above the core are allowed."""
    cli = tree / "harness" / "cli.py"
    if not cli.exists():
        cli = tree / "harness" / "cli" / "__init__.py"
    _append(tree, str(cli.relative_to(tree)), "import agents\nimport environments\nimport leaderboards\n")
    result = lint_imports(tree, "core", "core-below-cli")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(not (ROOT / "harness" / "cli" / "kit.py").exists(), reason="no harness.cli.kit in this tree")
def test_plugin_commands_may_import_only_the_kit(tree):
    """A `commands` module may use harness.cli.kit; any other module below the CLI may not, and a
    commands module may not reach past the kit into the rest of the CLI."""
    (tree / "leaderboards" / "commands.py").write_text("from harness.cli import kit\n", encoding="utf-8")
    assert lint_imports(tree, "leaderboards").returncode == 0
    _append(tree, "leaderboards/aggregate.py", "def _lazy():\n    from harness.cli import kit\n")
    result = lint_imports(tree, "leaderboards")
    assert result.returncode == 1 and "leaderboards.aggregate -> harness.cli.kit" in result.stdout, result.stdout
    (tree / "leaderboards" / "aggregate.py").write_text("", encoding="utf-8")
    (tree / "leaderboards" / "commands.py").write_text("import harness.cli\n", encoding="utf-8")
    result = lint_imports(tree, "leaderboards")
    assert result.returncode == 1 and "leaderboards.commands -> harness.cli" in result.stdout, result.stdout
