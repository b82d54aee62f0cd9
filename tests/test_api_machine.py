"""``edgetwin.calibrate_machine``: what ``edgetwin calibrate-machine`` does, from Python
(docs/api.md said it had no function: run it from the command line), the same files for
the same arguments, and bad arguments named."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

import edgetwin
from edgetwin.calibration.fit_check import (
    FIT_WARNINGS,
    AtBoundWarning,
    PoorFitWarning,
    median_errors,
)
from edgetwin.cli import main
from edgetwin.cli.console import warnings_recorded
from edgetwin.errors import InputError
from edgetwin.profile import DeviceProfile, load_profile

EMU_RUN = Path(__file__).resolve().parents[1] / "data" / "traces" / "emu-vit-loop-2026-12" / "fit"


@pytest.mark.timeout(120)
def test_calibrate_machine_from_an_emu_run_writes_what_the_command_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_out, api_out = tmp_path / "cli", tmp_path / "api"
    assert main(["calibrate-machine", "--emu", str(EMU_RUN), "--out", str(cli_out)]) == 0
    printed = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        profile = edgetwin.calibrate_machine(api_out, emu=EMU_RUN)
    assert isinstance(profile, DeviceProfile)
    fit_warnings = (PoorFitWarning, AtBoundWarning)
    said = [str(w.message) for w in warned if issubclass(w.category, fit_warnings)]
    assert [f"edgetwin: warning: {line}" for line in said] == printed  # as the command warns
    written = [yaml.safe_load((o / "profile.yaml").read_text()) for o in (cli_out, api_out)]
    fit_command = f"edgetwin calibrate-machine --emu {EMU_RUN} --out {api_out}"
    assert written[1]["fit"]["command"] == fit_command
    for fitted in written:  # the command line names its --out
        del fitted["fit"]["command"]
    assert written[1] == written[0]
    spec = yaml.safe_load((api_out / "spec.yaml").read_text())
    assert (api_out / spec["run"]).resolve() == EMU_RUN.resolve()
    provenance = json.loads((api_out / "provenance.json").read_text())
    assert provenance["command"] == ["edgetwin.calibrate_machine", str(api_out), f"emu={EMU_RUN}"]
    assert str(EMU_RUN / "results.csv") in provenance["inputs"]
    with pytest.raises(InputError) as raised:  # a non-empty out, as the command refuses it
        edgetwin.calibrate_machine(api_out, emu=EMU_RUN)
    assert "force=True" in raised.value.message


@pytest.mark.timeout(120)
def test_calibrate_and_calibrate_machine_say_a_fits_errors_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same fit's errors were said three ways: 'median |error| %: compute 1.23' by
    calibrate, 'in-sample median |error| %: ...' by calibrate-machine --emu and 'median
    |error|: compute 1.2 %' by calibrate-machine. One line says them (fit_check)."""
    machine = tmp_path / "m"
    assert main(["calibrate-machine", "--emu", str(EMU_RUN), "--out", str(machine)]) == 0
    by_machine = capsys.readouterr().out
    refit = tmp_path / "refit.yaml"
    assert main(["calibrate", str(machine / "spec.yaml"), "--out", str(refit)]) == 0
    by_calibrate = capsys.readouterr().out
    said = median_errors(load_profile(str(refit)))
    assert said.startswith("in-sample median |error|: total_ms ") and said.endswith(" %")
    assert by_calibrate == f"wrote {refit}; {said}\n"
    assert by_machine == f"wrote {machine}/profile.yaml ({said}), spec in {machine}/spec.yaml\n"


def test_bad_calibrate_machine_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        edgetwin.calibrate_machine(None)  # type: ignore[arg-type]
    assert raised.value.field == "out"
    with pytest.raises(InputError) as raised:
        edgetwin.calibrate_machine(tmp_path / "m", emu=EMU_RUN, quick=True)
    assert raised.value.field == "--quick (quick=True in Python)"
    with pytest.raises(InputError) as raised:
        edgetwin.calibrate_machine(tmp_path / "m", emu=tmp_path)
    assert "not an emulator run's folder" in raised.value.message
    assert raised.value.field == "--emu (emu= in Python)"  # was '--emu' alone
    assert not (tmp_path / "m").exists()


def test_the_command_prints_the_fits_warnings_and_passes_the_others_on() -> None:
    """``calibrate-machine`` records the fit's warnings to print them as its own lines;
    it recorded every other warning too and dropped it (a numpy RuntimeWarning, a
    FutureWarning raised during the fit were never shown)."""

    def fit() -> None:
        warnings.warn("the fit misses", PoorFitWarning, stacklevel=1)
        np.log(np.zeros(1))  # numpy's own RuntimeWarning: divide by zero
        warnings.warn("a keyword goes", FutureWarning, stacklevel=1)
        warnings.warn("the fit misses", PoorFitWarning, stacklevel=1)  # each time, as said

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with warnings_recorded(FIT_WARNINGS) as recorded:
            fit()
    assert recorded == ["the fit misses", "the fit misses"]
    assert [w.category for w in shown] == [RuntimeWarning, FutureWarning]
    assert "divide by zero" in str(shown[0].message)
    assert shown[0].filename == __file__  # where it was raised, as without the recording
    assert not any(issubclass(w.category, FIT_WARNINGS) for w in shown)


def test_other_warnings_keep_the_callers_filters() -> None:
    """A warning the caller's filters make an error is still one within the recording."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with warnings_recorded(FIT_WARNINGS), pytest.raises(RuntimeWarning):
            np.log(np.zeros(1))
