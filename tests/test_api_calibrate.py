"""``edgetwin.calibrate``: the fit ``edgetwin calibrate`` makes, from Python (the tutorial
used the fitting module's internals), the same bytes for the same command, and bad input
as an InputError naming the argument or the file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import edgetwin
from edgetwin.calibration.fit_check import AtBoundWarning
from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.phone_profile import PhoneProfile
from edgetwin.profile import DeviceProfile, load_profile
from tests.conftest import PipedRun

SPECS = Path(__file__).resolve().parents[1] / "edgetwin" / "calibration" / "specs"
JETSON_SPEC = SPECS / "jetson_orin_nano.yaml"


@pytest.mark.timeout(120)
def test_calibrate_fits_and_writes_what_the_command_writes(
    tmp_path: Path, jetson_table_calibration: PipedRun
) -> None:
    """The command's profile is the session's ``edgetwin calibrate`` of the Jetson table
    spec (a copy with its paths made absolute: the same spec; a profile names its sources
    by file name and hash)."""
    cli_out = jetson_table_calibration.folder / "loud.yaml"
    api_out = tmp_path / "api.yaml"
    command = "edgetwin calibrate spec.yaml --out loud.yaml"  # as the session ran it
    with pytest.warns(AtBoundWarning) as warned:  # as the command warns
        profile = edgetwin.calibrate(JETSON_SPEC, out=api_out, command=command)
    at_zero = [str(w.message).split(" = ")[0] for w in warned]
    assert at_zero == ["power.idle_w", "power.staging_w"]
    assert isinstance(profile, DeviceProfile)
    assert api_out.read_bytes() == cli_out.read_bytes()
    with pytest.warns(AtBoundWarning):  # no out: nothing written, same fit
        unwritten = edgetwin.calibrate(str(JETSON_SPEC))
    assert isinstance(unwritten, DeviceProfile)
    assert unwritten.compute == profile.compute and unwritten.power == profile.power
    assert unwritten.fit["command"] == f"edgetwin.calibrate({str(JETSON_SPEC)!r}, out=None)"


@pytest.mark.timeout(120)
def test_an_android_spec_gives_a_profile_per_phone_class(tmp_path: Path) -> None:
    phones = edgetwin.calibrate(SPECS / "android_crowdio.yaml", out=tmp_path / "phones")
    assert isinstance(phones, list) and all(isinstance(p, PhoneProfile) for p in phones)
    written = sorted(p.name for p in (tmp_path / "phones").iterdir())
    assert written == sorted(f"{p.name}.yaml" for p in phones)


@pytest.mark.timeout(60)
def test_bad_calibrate_arguments_name_the_argument_or_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        edgetwin.calibrate(3)  # type: ignore[arg-type]
    assert raised.value.field == "spec"
    with pytest.raises(InputError) as raised:
        edgetwin.calibrate(JETSON_SPEC, command=["edgetwin"])  # type: ignore[arg-type]
    assert raised.value.field == "command"
    spec = tmp_path / "spec.yaml"
    spec.write_text("kind: guesswork\n")
    with pytest.raises(InputError) as raised:
        edgetwin.calibrate(spec, out=tmp_path / "p.yaml")
    assert (raised.value.path, raised.value.field) == (str(spec), "kind")
    assert not (tmp_path / "p.yaml").exists()
    before = JETSON_SPEC.read_bytes()
    with pytest.raises(InputError, match="a file this command read") as raised:
        edgetwin.calibrate(JETSON_SPEC, out=JETSON_SPEC)  # the spec is never overwritten
    assert raised.value.field == "--out (out= in Python)"
    assert JETSON_SPEC.read_bytes() == before


def test_an_out_with_a_nul_byte_is_an_input_error(tmp_path: Path) -> None:
    """Resolving it against the files read was a ValueError traceback (embedded null
    byte), before the fit."""
    with pytest.raises(InputError, match="cannot be an output: embedded null byte") as raised:
        edgetwin.calibrate(JETSON_SPEC, out=f"{tmp_path}/a\0b.yaml")
    assert raised.value.path == f"{tmp_path}/a\0b.yaml"


def test_a_progress_that_takes_a_name_is_told_each_step_of_a_fit() -> None:
    """calibrate and validate counted their steps with no name: a step function that takes
    one (list.append) was a TypeError."""
    named: list[tuple[str, str]] = []

    @contextmanager
    def progress(label: str, total: int) -> Iterator[Callable[[str], None]]:
        yield lambda done: named.append((label, done))

    with pytest.warns(AtBoundWarning):
        edgetwin.calibrate(JETSON_SPEC, progress=progress)
    assert named[0] == ("fit", "timing and power")
    held_out = [done for label, done in named if label == "held-out refits (by batch)"]
    assert held_out and all(done.startswith("batch ") for done in held_out), named
    assert held_out[0].endswith(" held out")


LOOPBACK = SPECS.parents[2] / "data" / "traces" / "h200-loopback-2026-11"


@pytest.mark.timeout(60)
def test_a_fit_from_one_batch_size_warns_that_its_intervals_are_not_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held-out errors come from refits that leave each batch size out: ViT latencies of
    batch 1 alone give compute none, so a twin run with intervals gives compute_ms the
    not-known band; the only notice was the validation's line about batch 1."""
    traces = tmp_path / "traces"
    traces.mkdir()
    header, *rows = (LOOPBACK / "vit_latency.csv").read_text().splitlines()
    batch = header.split(",").index("batch")
    kept = [row for row in rows if row.split(",")[batch] == "1"]
    (traces / "vit_latency.csv").write_text("\n".join([header, *kept]) + "\n")
    spec = tmp_path / "spec.yaml"
    base = SPECS.parent / "profiles" / "h200_loopback.yaml"
    spec.write_text(
        f"kind: traces\nprofile: {{name: b1, ram_mb: 1000}}\ntraces: traces\nbase: {base}\n"
        "model: {preset: vit_b16}\nfit: [compute]\nbootstrap: 0\n"
    )
    assert main(["calibrate", str(spec), "--out", str(tmp_path / "cli.yaml"), "--quiet"]) == 0
    said = capsys.readouterr().err.splitlines()
    warned = [line for line in said if "no held-out errors" in line]
    assert len(warned) == 1
    assert warned[0].startswith(
        "edgetwin: warning: the profile has no held-out errors for compute_ms"
    )
    assert "[m / 10, m x 10]" in warned[0] and "measure a second batch size" in warned[0]
    # both: pytest.warns gives back, as a stray warning, any other it caught
    with pytest.warns((edgetwin.SkippedRefitWarning, edgetwin.NoHeldOutWarning)) as caught:
        profile = edgetwin.calibrate(spec)
    # after the refit's warning of batch 1, as the command says them
    assert [str(w.message) for w in caught] == [x.removeprefix("edgetwin: warning: ") for x in said]
    assert [w.category for w in caught] == [edgetwin.SkippedRefitWarning, edgetwin.NoHeldOutWarning]
    assert isinstance(profile, DeviceProfile)
    assert edgetwin.not_held_out(profile) == ["compute_ms"]  # staging and comm: the base's


@pytest.mark.parametrize("name", ["h200_loopback", "h200_netns", "jetson_orin_nano"])
def test_every_shipped_fit_has_held_out_errors_for_what_it_fitted(name: str) -> None:
    assert edgetwin.not_held_out(load_profile(name)) == []
