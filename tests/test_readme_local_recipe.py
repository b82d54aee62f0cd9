"""The README's recipe for a small real run of one's own model: its commands check as
written, and its twin run is cut down as its local run is (``compare`` warns otherwise)."""

from __future__ import annotations

import shlex
from itertools import pairwise
from pathlib import Path

import pytest

from edgetwin.cli import main

ROOT = Path(__file__).resolve().parent.parent
RECIPE = "### A small real run of your own model\n"


def _recipe_commands() -> list[list[str]]:
    """The recipe's commands, each as the arguments after ``edgetwin``."""
    block = (ROOT / "README.md").read_text().split(RECIPE, 1)[1].split("```")[1]
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(line, comments=True)[1:] for line in lines if line.startswith("edgetwin ")]


def _sets(argv: list[str]) -> list[str]:
    """The values of a command's ``--set`` options, in order."""
    return [value for option, value in pairwise(argv) if option == "--set"]


@pytest.mark.timeout(60)
def test_the_recipe_checks_and_cuts_both_sides_alike(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    commands = _recipe_commands()
    runs = [argv for argv in commands if argv[0] == "run"]
    local = [argv for argv in runs if "--mode" in argv and "local" in argv]
    assert len(local) == 1 and len(runs) == 2, commands
    (twin,) = (argv for argv in runs if argv not in local)
    assert _sets(local[0]) and _sets(local[0]) == _sets(twin)
    assert [argv[0] for argv in commands] == ["init", "run", "run", "compare"]
    for argv in commands[:-1]:
        assert main([*argv, "--check"] if argv[0] == "run" else argv) == 0, capsys.readouterr()
