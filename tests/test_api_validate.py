"""``edgetwin.validate``: a calibration's held-out errors from Python, as
``edgetwin validate`` computes and writes them."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import pytest
import yaml

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.profile import load_profile
from edgetwin.table_files import read_table
from tests.conftest import PipedRun, loopback_spec_with_exchanges_at_batch_8_only

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "edgetwin" / "calibration" / "specs"
JETSON_SPEC = SPECS / "jetson_orin_nano.yaml"


@pytest.mark.timeout(300)
def test_validate_returns_what_the_command_writes(
    tmp_path: Path, jetson_table_validation: PipedRun
) -> None:
    """The command's files are those of the session's ``edgetwin validate`` of the Jetson
    table spec (a copy with its paths made absolute: the same spec)."""
    cli = jetson_table_validation.folder / "held_out"
    validation = edgetwin.validate(JETSON_SPEC, out=tmp_path / "api")
    for name in ("validation.csv", "validation.json"):
        assert (tmp_path / "api" / name).read_bytes() == (cli / name).read_bytes()
    written = json.loads((tmp_path / "api" / "validation.json").read_text())
    assert validation.summary == written
    rows = (cli / "validation.csv").read_text().splitlines()[1:]
    assert len(validation.points) == len(rows) > 0  # a point a row of validation.csv
    recorded = json.loads((tmp_path / "api" / "provenance.json").read_text())
    assert recorded["command"] == ["edgetwin.validate", str(JETSON_SPEC), "by=batch"]


@pytest.mark.timeout(120)
def test_bad_validate_arguments_name_the_argument_or_the_spec(tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        edgetwin.validate(JETSON_SPEC, by="colour")  # type: ignore[arg-type]
    assert raised.value.field == "by"
    with pytest.raises(InputError) as raised:
        edgetwin.validate(JETSON_SPEC, by="bandwidth", out=tmp_path / "v")
    assert (raised.value.path, raised.value.field) == (str(JETSON_SPEC), "--by (by= in Python)")
    with pytest.raises(InputError) as raised:
        edgetwin.validate(SPECS / "android_crowdio.yaml")
    assert raised.value.field == "kind"
    assert not (tmp_path / "v").exists()


@pytest.mark.timeout(300)
def test_a_trace_validation_names_each_point_by_what_was_measured(
    netns_bandwidth_validation: PipedRun,
) -> None:
    """A trace fit's held-out points were labelled by their internal group keys: ``8 98
    2408448`` behind a nominal ``100000.0`` Mbit/s for a loopback exchange, ``vit_full 8
    197`` for a ViT timing. Each says what its trace row measured, in that file's columns
    (the table fit's already read ``prism, 2 dev, 10 seg, batch 32, 400 Mbit/s``). The
    shaped link's points by bandwidth are the session's ``edgetwin validate`` of it (its
    validation.csv: a row a point, as the API returns them)."""
    loopback = edgetwin.validate(SPECS / "h200_loopback.yaml")
    labels = {(p["metric"], p["point"]) for p in loopback.points if p["held_out"] == 8}
    assert {
        ("vit_full_ms", "vit_full, batch 8, 197 tokens"),
        ("compute_ms", "encoder_tokens, batch 8, 99 tokens"),
        ("exchange_total_ms", "batch 8, 98 rows a rank (2408448 bytes), loopback"),
        ("staging_ms", "batch 8, 10 rows a rank (245760 bytes), loopback"),
    } <= labels
    netns = read_table(netns_bandwidth_validation.folder / "v" / "validation.csv")
    assert netns
    labels = {p["point"] for p in netns if float(p["held_out"]) == 200}
    assert "batch 1, 10 rows a rank (30720 bytes), 200 Mbit/s" in labels
    assert all(p["point"].count(", ") >= 2 for p in [*loopback.points, *netns])


@pytest.mark.timeout(300)
def test_a_validations_warnings_and_lines_are_the_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A held-out value that gives a section no points was a notice on the logger alone,
    and the lines edgetwin validate prints were the command's: in Python they are
    ``warnings`` (counted in the one line) and ``describe()``, and the command prints
    them from there, each warning once."""
    spec = loopback_spec_with_exchanges_at_batch_8_only(tmp_path)
    validation = edgetwin.validate(spec)
    notice = (
        "validation: batch 8 gives no held-out exchange points: without it,"
        " gloo_staged_allgather.csv holds no record to refit"
        " staging from"
    )
    assert validation.warnings == (notice,)
    assert repr(validation).endswith("; 1 warning in .warnings)")
    capsys.readouterr()
    assert main(["validate", str(spec), "--out", str(tmp_path / "v"), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"edgetwin: warning: {notice}"]
    assert out.splitlines()[:-1] == validation.describe()
    assert validation.describe()[0].startswith("vit_full_ms: ")


def _fittable_with_exchanges_at_batch_8_only(tmp_path: Path) -> Path:
    """``loopback_spec_with_exchanges_at_batch_8_only`` with no bootstrap and two staging
    and two network parameters fixed at the shipped profile's values (its four exchange
    shapes are too few for five), so that it can be fitted as well as validated."""
    spec = loopback_spec_with_exchanges_at_batch_8_only(tmp_path)
    shipped = load_profile("h200_loopback")
    kept = {
        "staging": ("size_exponent", "gathered_factor"),
        "network": ("loss_window_kb", "loss_goodput"),
    }
    read = yaml.safe_load(spec.read_text())
    fixed = read["fixed"] | {
        f"{section}.{name}": getattr(getattr(shipped, section), name)
        for section, names in kept.items()
        for name in names
    }
    spec.write_text(yaml.safe_dump(read | {"bootstrap": 0, "fixed": fixed}))
    return spec


@pytest.mark.timeout(300)
def test_calibrate_says_the_refit_warnings_as_validate_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The refits of a profile's fit.held_out are validate's: a held-out value that gives a
    section no points was logged on edgetwin.calibration, which validate took over for its
    warnings and calibrate printed as 'edgetwin: validation: ...'. Both commands print it
    as a warning, once (calibrate before the warning it explains); edgetwin.calibrate warns
    it (SkippedRefitWarning), logs nothing, and the profile keeps it in
    fit.held_out.warnings."""
    spec = _fittable_with_exchanges_at_batch_8_only(tmp_path)
    notices = edgetwin.validate(spec).warnings
    assert len(notices) == 1 and notices[0].startswith("validation: batch 8 gives no held-out")
    said = f"edgetwin: warning: {notices[0]}"
    capsys.readouterr()
    assert main(["validate", str(spec), "--out", str(tmp_path / "v"), "--quiet"]) == 0
    assert capsys.readouterr().err.splitlines() == [said]
    assert main(["calibrate", str(spec), "--out", str(tmp_path / "p.yaml"), "--quiet"]) == 0
    first, then = capsys.readouterr().err.splitlines()
    assert first == said
    assert then.startswith("edgetwin: warning: the profile has no held-out errors for staging_ms")
    assert load_profile(str(tmp_path / "p.yaml")).fit["held_out"]["warnings"] == list(notices)
    with (
        caplog.at_level(logging.DEBUG, logger="edgetwin"),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        profile = edgetwin.calibrate(spec)
    assert [r.getMessage() for r in caplog.records] == []
    skipped = [w for w in caught if issubclass(w.category, edgetwin.SkippedRefitWarning)]
    assert [str(w.message) for w in skipped] == list(notices)
    assert isinstance(profile, edgetwin.DeviceProfile)
    assert profile.fit["held_out"]["warnings"] == list(notices)


@pytest.mark.timeout(300)
def test_to_pandas_gives_the_points_as_validation_csv_holds_them(tmp_path: Path) -> None:
    """A Validation's points were dicts to wrap in a DataFrame (with each point's list of
    repetitions): ``to_pandas()`` gives validation.csv's columns, typed."""
    spec = loopback_spec_with_exchanges_at_batch_8_only(tmp_path)
    validation = edgetwin.validate(spec, out=tmp_path / "v")
    frame = validation.to_pandas()
    header = (tmp_path / "v" / "validation.csv").read_text().splitlines()[0]
    assert list(frame.columns) == header.split(",")
    assert [str(t) for t in frame.dtypes] == ["string", "string", *["float64"] * 4]
    assert len(frame) == len(validation.points)
    assert list(frame.error_pct) == [p["error_pct"] for p in validation.points]
    assert set(frame.held_out) == {p["held_out"] for p in validation.points}
