"""``calibrate --out`` onto a profile that is already there: refused (exit 2, the file and
``--force`` named) before the fit, the old file untouched; with ``--force`` replaced, whole.
``init`` refuses an existing file and ``run`` a non-empty folder the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "edgetwin" / "calibration" / "specs"
EMU_MACHINE = REPO / "data" / "traces" / "emu-vit-loop-2026-12" / "machine"
OLD_PROFILES = REPO / "edgetwin" / "calibration" / "profiles"
OLD_PROFILE = OLD_PROFILES / "jetson_orin_nano.yaml"


def _emu_spec(tmp_path: Path) -> Path:
    """The emulator loop's machine spec (a fit of about a second), its run folder absolute."""
    raw = yaml.safe_load((EMU_MACHINE / "spec.yaml").read_text())
    raw["run"] = str((EMU_MACHINE / raw["run"]).resolve())
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    return spec


@pytest.mark.timeout(120)
def test_an_existing_profile_is_replaced_only_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``calibrate --out`` wrote over an existing profile without asking (a trace fit of
    minutes, or a profile edited since, lost)."""
    spec, out = _emu_spec(tmp_path), tmp_path / "profile.yaml"
    out.write_bytes(OLD_PROFILE.read_bytes())
    argv = ["calibrate", str(spec), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"edgetwin: error: {out}" in err and "--force" in err, err
    assert out.read_bytes() == OLD_PROFILE.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.yaml", "spec.yaml"]
    assert main([*argv, "--force"]) == 0
    assert yaml.safe_load(out.read_text())["name"] == "machine_emu_vm"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.yaml", "spec.yaml"]


@pytest.mark.timeout(120)
def test_force_does_not_replace_a_file_that_is_no_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--force`` replaces a profile, as it replaces only an edgetwin output folder."""
    spec, table = _emu_spec(tmp_path), tmp_path / "results.csv"
    table.write_text("scenario,mode\nx,twin\n")
    assert main(["calibrate", str(spec), "--out", str(table), "--force"]) == 2
    assert "exists and is not a profile" in capsys.readouterr().err
    assert table.read_text() == "scenario,mode\nx,twin\n"


@pytest.mark.timeout(120)
def test_an_android_spec_replaces_its_class_files_only_with_force(tmp_path: Path) -> None:
    """An Android spec writes a profile per phone class into a folder: one there already is
    refused (every file of the folder untouched), and replaced with ``force=True``."""
    spec, folder = SPECS / "android_crowdio.yaml", tmp_path / "profiles"
    folder.mkdir()
    old = b"# an old class profile\n" + (OLD_PROFILES / "android_mid.yaml").read_bytes()
    (folder / "android_mid.yaml").write_bytes(old)
    (folder / "notes.txt").write_text("mine\n")
    with pytest.raises(InputError) as raised:
        edgetwin.calibrate(spec, out=folder)
    assert raised.value.path == str(folder / "android_mid.yaml")
    assert "force=True" in raised.value.message
    assert sorted(p.name for p in folder.iterdir()) == ["android_mid.yaml", "notes.txt"]
    assert (folder / "android_mid.yaml").read_bytes() == old
    with pytest.raises(InputError) as raised:
        edgetwin.calibrate(spec, out=folder, force="yes")  # type: ignore[arg-type]
    assert raised.value.field == "force"
    edgetwin.calibrate(spec, out=folder, force=True)
    names = ["android_high.yaml", "android_low.yaml", "android_mid.yaml", "notes.txt"]
    assert sorted(p.name for p in folder.iterdir()) == names
    assert yaml.safe_load((folder / "android_mid.yaml").read_text())["name"] == "android_mid"
    assert (folder / "notes.txt").read_text() == "mine\n"
