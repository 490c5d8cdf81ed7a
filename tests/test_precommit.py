"""The pre-commit hooks run the lint and type-check commands of CI's script, word for word."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _hooks() -> dict[str, dict]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    return {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}


def _ci_lines() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]


def test_hooks_are_the_lint_commands_of_ci():
    hooks = _hooks()
    assert sorted(hooks) == ["mypy", "ruff"]
    ci = _ci_lines()
    for hook in hooks.values():
        assert hook["entry"] in ci, f"{hook['id']}: {hook['entry']!r} is not a line of .ci/run"


def test_hooks_use_the_pinned_tools_on_the_whole_tree():
    for hook in _hooks().values():
        # the venv's tools (versions pinned by the lint extra), over the files CI checks
        assert hook["language"] == "system"
        assert hook["pass_filenames"] is False


def test_lint_extra_pins_the_hook_tools():
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["lint"]
    pinned = {req.split("==")[0] for req in lint if "==" in req}
    assert {"ruff", "mypy"} <= pinned
