"""Every shipped profile is, byte for byte, what the command written in it produces."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from edgetwin import cli
from tests.conftest import REPO

PROFILES = REPO / "edgetwin/calibration/profiles"


def _by_command() -> dict[str, list[Path]]:
    """Shipped profiles grouped by the command each says made it (one fit may write several)."""
    groups: dict[str, list[Path]] = {}
    for profile in sorted(PROFILES.glob("*.yaml")):
        groups.setdefault(yaml.safe_load(profile.read_text())["fit"]["command"], []).append(profile)
    return groups


@pytest.mark.parametrize(
    ("command", "profiles"),
    _by_command().items(),
    ids=[shlex.split(c)[2].split("/")[-1] for c in _by_command()],
)
def test_the_documented_command_writes_the_shipped_bytes(
    command: str, profiles: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = shlex.split(command)
    assert argv[:2] == ["edgetwin", "calibrate"], argv
    # the command runs from the repository root: mirror its inputs, with an empty profiles/
    for inputs in ("data", "scenarios", "edgetwin/calibration/specs"):
        (tmp_path / inputs).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / inputs).symlink_to(REPO / inputs)
    (tmp_path / PROFILES.relative_to(REPO)).mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv[1:]) == 0
    for profile in profiles:
        assert (tmp_path / profile.relative_to(REPO)).read_bytes() == profile.read_bytes(), profile
