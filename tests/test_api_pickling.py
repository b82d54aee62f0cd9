"""The API's exceptions cross processes: a call run in a process pool (``multiprocessing``,
``concurrent.futures``, Dask) raises in the caller what it raised in the worker, with its
attributes, and not an error of the pool's unpickling."""

from __future__ import annotations

import pickle
import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import edgetwin
from edgetwin.reports.static import DEADLINE_ENV
from tests.conftest import REPO

JETSON = REPO / "scenarios" / "prism_jetson.yaml"
ONE_BATCH = ["sweeps=[{batch: [1]}]"]


def _examples() -> dict[str, BaseException]:
    """One of each exception the API exports, with every argument its own."""
    results = edgetwin.run(JETSON, overrides=ONE_BATCH)
    return {
        "AtBoundWarning": edgetwin.AtBoundWarning("x = 1 is at its lower bound"),
        "EmulatorNotCleaned": edgetwin.EmulatorNotCleaned(
            "emu-cleanup", "needs root", (Path("/tmp/a"), Path("/tmp/b"))
        ),
        "FiguresNotDrawn": edgetwin.FiguresNotDrawn(Path("out"), "not drawn", results),
        "InputError": edgetwin.InputError("q.yaml", "axes.batch", "bad"),
        "NoHeldOutWarning": edgetwin.NoHeldOutWarning("no held-out errors"),
        "NotPinnedWarning": edgetwin.NotPinnedWarning("x = 5 is where its fit started"),
        "PoorFitWarning": edgetwin.PoorFitWarning("misses its measurements"),
        "RunFailed": edgetwin.RunFailed("rank 1 stopped"),
        "SkippedRefitWarning": edgetwin.SkippedRefitWarning("batch 8: no points"),
        "UnitWarning": edgetwin.UnitWarning("vit_latency.csv: field 'latency_ms': slow"),
    }


def test_every_exception_of_the_api_survives_pickling_with_its_attributes() -> None:
    """``FiguresNotDrawn`` did not unpickle (its ``__init__`` takes three arguments, and an
    exception pickles its ``args``, the message alone): a pool's caller got a TypeError."""
    examples = _examples()
    exported = {
        name
        for name in edgetwin.__all__
        if isinstance(kind := getattr(edgetwin, name), type) and issubclass(kind, BaseException)
    }
    assert set(examples) == exported  # a new one is checked here too
    for name, error in examples.items():
        copied = pickle.loads(pickle.dumps(error))
        assert type(copied) is type(error), name
        assert str(copied) == str(error), name
        assert vars(copied) == vars(error), name


def _run_with_figures(out: Path) -> edgetwin.Results:
    """A run whose static figures are not drawn (the deadline the test sets), in a worker."""
    return edgetwin.run(JETSON, overrides=ONE_BATCH, out=out, static="svg")


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_figures_not_drawn_reaches_the_caller_of_a_process_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's caller got "__init__() missing 2 required positional arguments" (or a
    broken pool) for a run whose figures were not drawn; it gets the FiguresNotDrawn, its
    folder and the run's results."""
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (CI installs it)")
    monkeypatch.setenv(DEADLINE_ENV, "0.001")  # the workers inherit it
    out = tmp_path / "run"
    with ProcessPoolExecutor(max_workers=1) as pool:
        future = pool.submit(_run_with_figures, out)
        with pytest.raises(edgetwin.FiguresNotDrawn, match=r"not drawn within 0\.001 s") as raised:
            future.result(timeout=100)
    assert raised.value.folder == out
    assert f"{out} was written without figures/" in raised.value.problem
    ran = raised.value.result
    assert isinstance(ran, edgetwin.Results)
    written = edgetwin.load_results(out)  # the folder was published, without figures/
    assert len(ran.rows) == len(written.rows) >= 1 and ran.provenance == written.provenance
    assert not (out / "figures").exists()
