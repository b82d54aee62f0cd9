"""``edgetwin.init`` (``edgetwin init`` is a thin layer over it): the same files, the same
refusals, and its arguments checked as the other API functions' are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.workbench.starting import KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_init_writes_what_the_command_writes(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written = edgetwin.init(kind, f"{tmp_path / 'api'}/")
    assert main(["init", kind, f"{tmp_path / 'cli'}/"]) == 0
    (from_command,) = (tmp_path / "cli").iterdir()
    assert capsys.readouterr().out == f"wrote {from_command}\n"
    assert written == tmp_path / "api" / from_command.name
    assert written.read_bytes() == from_command.read_bytes()


def test_init_into_a_folder_or_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert edgetwin.init("scenario") == Path("scenario.yaml")
    (tmp_path / "new").mkdir()
    assert edgetwin.init("plan", tmp_path / "new") == tmp_path / "new" / "question.plan.yaml"
    assert edgetwin.init("eval", "mine.yaml") == Path("mine.yaml")
    assert edgetwin.load_scenario("scenario.yaml").name == "my_scenario"


def test_init_refuses_an_existing_file_as_the_command_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\n")
    with pytest.raises(InputError) as raised:
        edgetwin.init("scenario", path)
    assert raised.value.path == str(path)
    assert "--force (force=True in Python)" in raised.value.problem
    assert main(["init", "scenario", str(path)]) == 2
    assert capsys.readouterr().err == f"edgetwin: error: {raised.value.message}\n"
    assert path.read_text() == "name: mine\n"
    assert edgetwin.init("scenario", path, force=True) == path
    assert edgetwin.load_scenario(path).name == "my_scenario"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"kind": "bogus"}, "kind"),
        ({"kind": "scenario", "path": 5}, "path"),
        ({"kind": "scenario", "path": ""}, "path"),
        ({"kind": "scenario", "force": "no"}, "force"),
    ],
    ids=["kind", "path", "empty-path", "force"],
)
def test_a_bad_init_argument_is_named(
    arguments: dict[str, Any], field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as raised:
        edgetwin.init(**arguments)
    assert (raised.value.path, raised.value.field) == (None, field)
    assert list(tmp_path.iterdir()) == []
