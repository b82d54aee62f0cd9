"""``edgetwin.run_plan``: a what-if question answered by its sweep from Python, as
``edgetwin plan`` answers it (the same answer.json and results.csv), resumable, bad
arguments named (``edgetwin.plan`` is the package of the questions)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
QUESTION = ROOT / "scenarios" / "plan_crossover.plan.yaml"
SMALL = ["axes.batch=[8]", "axes.bandwidth_mbps=[100, 900]"]


@pytest.mark.timeout(300)
def test_run_plan_answers_as_the_command_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", str(QUESTION), "--out", str(tmp_path / "cli"), "--workers", "1", "--quiet"]
    assert main([*argv, *(a for item in SMALL for a in ("--set", item))]) == 0
    printed = capsys.readouterr().out.splitlines()
    outcome = edgetwin.run_plan(QUESTION, out=tmp_path / "api", overrides=SMALL, workers=1)
    assert outcome.describe() == printed[: len(outcome.describe())] != []  # the command's lines
    for name in ("answer.json", "results.csv"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    assert json.loads((tmp_path / "api" / "answer.json").read_text()) == outcome.answer
    assert outcome.ran_now == outcome.configurations > 0
    recorded = json.loads((tmp_path / "api" / "provenance.json").read_text())
    assert recorded["command"] == ["edgetwin.run_plan", str(QUESTION), *SMALL]
    # its inputs are the files it was given, not the table it wrote and answered from
    cli_inputs = json.loads((tmp_path / "cli" / "provenance.json").read_text())["inputs"]
    assert cli_inputs == recorded["inputs"] and str(QUESTION) in recorded["inputs"]
    assert not any(name.endswith("results.csv") for name in recorded["inputs"])
    with pytest.raises(InputError):  # a finished plan's folder is not run over
        edgetwin.run_plan(QUESTION, out=tmp_path / "api", overrides=SMALL, workers=1)
    again = edgetwin.run_plan(QUESTION, out=tmp_path / "api", overrides=SMALL, force=True)
    assert again.answer == outcome.answer  # a fresh sweep (a pool now), the same answer


@pytest.mark.timeout(120)
def test_a_plan_outcome_s_rows_are_a_data_frame_as_a_run_s(tmp_path: Path) -> None:
    """A notebook had to wrap the rows: ``edgetwin.Results(tuple(outcome.rows))``."""
    outcome = edgetwin.run_plan(QUESTION, out=tmp_path / "out", overrides=SMALL, workers=1)
    frame = outcome.to_pandas()
    pd.testing.assert_frame_equal(frame, edgetwin.Results(tuple(outcome.rows)).to_pandas())
    header = (tmp_path / "out" / "results.csv").read_text().splitlines()[0]
    assert list(frame.columns) == header.split(",") and len(frame) == len(outcome.rows) > 0
    assert str(frame.dtypes["strategy"]) == "string"


@pytest.mark.timeout(300)
def test_run_plan_s_warnings_name_the_python_argument(tmp_path: Path) -> None:
    """A plan's twin sweeps drop no packets; its warning named only '--mode emu'."""
    lossy = [*SMALL, "set=[devices.0.count=4, network.loss_pct=2]"]
    outcome = edgetwin.run_plan(QUESTION, out=tmp_path / "out", overrides=lossy, workers=1)
    assert outcome.warnings == (
        "network.loss_pct is 2 %, but only --mode emu (mode='emu' in Python) drops packets: "
        "a twin run has no loss",
    )


@pytest.mark.timeout(120)
def test_bad_plan_arguments_name_the_argument(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for kwargs, field in (
        ({"workers": "4"}, "--workers (workers= in Python)"),
        ({"workers": 0}, "--workers (workers= in Python)"),
        ({"workers": 2, "scheduler": "tcp://127.0.0.1:1"}, "--workers (workers= in Python)"),
        ({"scheduler": 5}, "--scheduler (scheduler= in Python)"),  # was an AttributeError
        ({"overrides": "axes.batch=[8]"}, "overrides"),
        ({"force": 1}, "force"),
    ):
        with pytest.raises(InputError) as raised:
            edgetwin.run_plan(QUESTION, out=out, **kwargs)  # type: ignore[arg-type]
        assert raised.value.field == field, kwargs
    with pytest.raises(InputError) as raised:  # the problem names the other argument too
        edgetwin.run_plan(QUESTION, out=out, workers=2, scheduler="tcp://127.0.0.1:1")
    assert raised.value.problem == (
        "sizes a local pool; with --scheduler (scheduler= in Python) the cluster's workers "
        "run the sweep"
    )
    assert not out.exists()


def test_an_out_name_too_long_is_an_input_error(tmp_path: Path) -> None:
    """Looking for an unfinished sweep in it was an OSError traceback (File name too
    long); every other command's out says so as an InputError."""
    out = tmp_path / ("x" * 5000)
    with pytest.raises(InputError, match="cannot be an output: File name too long") as raised:
        edgetwin.run_plan(QUESTION, out=out, overrides=SMALL, workers=1)
    assert raised.value.path == str(out)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers", [1, 2], ids=["this-process", "pool"])
def test_a_profile_edited_between_two_plans_is_read_again(workers: int, tmp_path: Path) -> None:
    """A sweep's fleet was cached per process by the scenario alone: a notebook that refit
    a profile (same path, new bytes) and asked again got the old profile's rows (a pool
    forked the stale cache too, and a Dask worker keeps it between plans)."""
    profile = tmp_path / "refit.yaml"
    shipped = ROOT / "edgetwin" / "calibration" / "profiles" / "jetson_orin_nano.yaml"
    profile.write_text(shipped.read_text())
    items = [*SMALL, f"set=[devices.0.count=4, devices.0.profile={profile}]"]
    before = edgetwin.run_plan(QUESTION, out=tmp_path / "a", overrides=items, workers=workers)
    slower = shipped.read_text().replace("throughput_gflops: 611.671572", "throughput_gflops: 61.2")
    profile.write_text(slower)
    after = edgetwin.run_plan(QUESTION, out=tmp_path / "b", overrides=items, workers=workers)
    assert after.rows[0].strategy == "single"
    assert after.rows[0].compute_ms > 5 * before.rows[0].compute_ms


@pytest.mark.timeout(120)
def test_a_numpy_whole_number_is_a_pool_size(tmp_path: Path) -> None:
    """``workers=np.int64(1)`` was refused ('a number of processes, not np.int64(1)')."""
    outcome = edgetwin.run_plan(
        QUESTION, out=tmp_path / "out", overrides=SMALL, workers=np.int64(1)
    )  # type: ignore[arg-type]
    assert outcome.ran_now == outcome.configurations > 0
