"""The Python API as a user meets it: a Scenario changed in memory is validated as a file
is, and a user's type checker sees the API's types (an installed edgetwin is typed)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import edgetwin
from edgetwin.errors import InputError
from edgetwin.run_failures import failed_summary

ROOT = Path(__file__).resolve().parents[1]
JETSON = ROOT / "scenarios" / "prism_jetson.yaml"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"mode": "bogus"}, "mode"),
        ({"seed": -1}, "seed"),
        ({"sweeps": "x"}, "sweeps"),
        ({"sed": 5}, "sed"),  # was run with the seed unchanged
    ],
    ids=["mode", "seed", "sweeps", "unknown-key"],
)
def test_a_scenario_copied_with_bad_values_is_refused(
    update: dict[str, Any], field: str, tmp_path: Path
) -> None:
    """``model_copy(update=...)`` does not validate, and a Scenario run as it is (mode=None,
    no seed, no overrides) was not validated again: mode 'bogus' ran local processes, a
    negative seed was numpy's ValueError, sweeps 'x' an AttributeError from the runner."""
    changed = edgetwin.load_scenario(JETSON).model_copy(update=update)
    out = tmp_path / "out"
    with pytest.raises(InputError) as raised:
        edgetwin.run(changed, mode=None, out=out)
    assert raised.value.field == field
    assert raised.value.path == "<scenario prism_jetson>"
    assert not out.exists()


def test_an_unknown_key_copied_into_a_nested_part_is_named() -> None:
    scenario = edgetwin.load_scenario(JETSON)
    network = scenario.network.model_copy(update={"bandwith_mbps": 10})
    with pytest.raises(InputError) as raised:
        edgetwin.run(scenario.model_copy(update={"network": network}))
    assert raised.value.field == "network.bandwith_mbps"
    assert raised.value.problem == "unknown key (did you mean 'bandwidth_mbps'?)"


USER_SCRIPT = """\
from pathlib import Path

import edgetwin
from edgetwin import load_results, load_scenario, run

run(Path("s.yaml"), seed="1", mode="hardware")
edgetwin.run(3)
load_scenario(5)
edgetwin.init("scenarios")
count: int = load_results("out")
version: int = edgetwin.__version__
"""


def api_md_examples() -> str:
    """The python blocks of docs/api.md, one after another (as one script)."""
    text = (ROOT / "docs" / "api.md").read_text()
    return "\n".join(re.findall(r"```python\n(.*?)```", text, re.DOTALL))


@pytest.mark.timeout(180)
def test_the_api_md_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every python block of docs/api.md, in a folder laid out as the repository is (its
    own scenarios/, since a block writes ../out/ beside them), with the two run folders
    the comparison names made by the twin."""
    shutil.copytree(ROOT / "scenarios", tmp_path / "scenarios")
    (tmp_path / "data").symlink_to(ROOT / "data")
    (tmp_path / "edgetwin").mkdir()
    (tmp_path / "edgetwin" / "calibration").symlink_to(ROOT / "edgetwin" / "calibration")
    monkeypatch.chdir(tmp_path)
    for side in ("twin", "emu"):
        edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1, 8]}]"], out=f"out/{side}")
    namespace: dict[str, object] = {}
    exec(api_md_examples(), namespace)
    outcome = namespace["outcome"]
    assert isinstance(outcome, edgetwin.PlanOutcome)
    assert outcome.describe()[0].startswith("batch 8, 2 devices: prism beats one device from ")
    assert isinstance(namespace["refit"], edgetwin.Results)
    # the calibrate example's fit warnings, picked out by edgetwin.FIT_WARNINGS
    fit_lines = namespace["fit_lines"]
    assert isinstance(fit_lines, list)
    assert [line.split(" = ")[0] for line in fit_lines] == ["power.idle_w", "power.staging_w"]


@pytest.mark.timeout(240)
def test_a_user_type_checker_sees_the_installed_api(tmp_path: Path) -> None:
    """The package had no py.typed (mypy: 'missing library stubs or py.typed marker') and
    its names were a module ``__getattr__`` (every one of them Any): no wrong call was
    found. The wheel, installed, is checked as a user's script sees it."""
    source = tmp_path / "source"
    no_caches = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "edgetwin", source / "edgetwin", ignore=no_caches)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, source], check=True
    )
    wheel = next(wheels.glob("edgetwin-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", site, wheel], check=True)
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    (tmp_path / "api_md.py").write_text(api_md_examples())
    mypy = [sys.executable, "-m", "mypy", "--no-incremental", "--python-version", "3.11"]
    checked = subprocess.run(
        [*mypy, "user.py", "api_md.py"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "MYPYPATH": "", "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    report = checked.stdout
    assert "py.typed" not in report, report
    assert "api_md.py" not in report, report  # docs/api.md's examples type-check as written
    for wrong in (
        'Argument "seed" to "run" has incompatible type "str"',
        'Argument "mode" to "run" has incompatible type',
        'Argument 1 to "run" has incompatible type "int"',
        'Argument 1 to "load_scenario" has incompatible type "int"',
        'Argument 1 to "init" has incompatible type "Literal[\'scenarios\']"',
        'expression has type "Results", variable has type "int"',
        'expression has type "str", variable has type "int"',  # was: no attribute __version__
    ):
        assert wrong in report, report


@pytest.mark.timeout(60)
def test_load_results_checks_the_reference_table_as_report_does(tmp_path: Path) -> None:
    """load_results took any reference.csv; Results.write then died drawing the
    comparison (KeyError 'strategy' from deep inside). ``edgetwin report`` refuses it."""
    folder = tmp_path / "run"
    edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1]}]"], out=folder)
    (folder / "reference.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match=r"reference\.csv is not a results table") as raised:
        edgetwin.load_results(folder)
    assert raised.value.path == str(folder / "reference.csv")


@pytest.mark.timeout(60)
def test_loaded_results_are_written_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_results of a relative folder kept reference.csv's path relative: after a chdir,
    write() was a FileNotFoundError; a reference removed since is one naming it."""
    monkeypatch.chdir(tmp_path)
    edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1]}]"], out="run")
    loaded = edgetwin.load_results("run")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loaded.write("copy")
    reference = tmp_path / "run" / "reference.csv"
    assert (elsewhere / "copy" / "reference.csv").read_bytes() == reference.read_bytes()
    reference.unlink()
    with pytest.raises(InputError) as raised:
        loaded.write("again")
    assert (raised.value.path, raised.value.field) == (str(reference), "reference")
    assert not (elsewhere / "again").exists()


def test_the_api_names_are_the_workbenchs() -> None:
    """``edgetwin.__all__`` (kept in the package root, so that ``import edgetwin`` stays
    light) names exactly what the workbench exports, and each resolves."""
    from edgetwin import workbench

    assert edgetwin.__all__ == workbench.__all__
    assert dir(edgetwin) == sorted(edgetwin.__all__)  # a notebook's completion offers them
    for name in edgetwin.__all__:
        assert getattr(edgetwin, name) is getattr(workbench, name)


# what ``import edgetwin`` must not load: the API's own imports, on first use
HEAVY = ("torch", "plotly", "simpy", "pandas", "scipy", "pydantic")
DOCUMENTED = re.compile(r"\bedgetwin((?:\.[A-Za-z_]\w*)+)")


def test_every_documented_name_is_reached_from_a_bare_import() -> None:
    """``import edgetwin; edgetwin.progress.Progress`` was an AttributeError: the package
    reached the API's names, not its modules, which docs/api.md names the same way
    (``edgetwin.errors.InputError``, ``edgetwin.results.DTYPES``). Each ``edgetwin.X`` and
    ``edgetwin.X.Y`` of the README and docs/api.md resolves in a fresh interpreter after
    ``import edgetwin`` alone, and so does a deeper name unless it is a module's path, which
    a reader imports or runs as such (``edgetwin.emu.vit.worker``): api.md named
    ``edgetwin.calibration.fit_check.FIT_WARNINGS``, an AttributeError without an import it
    did not show. The import loaded nothing heavy, nor did the light modules."""
    text = (ROOT / "README.md").read_text() + (ROOT / "docs" / "api.md").read_text()
    chains = [m.group(1)[1:].split(".") for m in DOCUMENTED.finditer(text)]
    names = sorted({".".join(chain[:1] if _is_module(chain) else chain) for chain in chains})
    assert "progress.Progress" in names and "errors.InputError" in names
    deep = [name for name in names if name.count(".") > 1]
    assert "workbench.run_files.RUN_FILES" in deep
    bare, light, missing = _reached(names)
    assert (bare, light, missing) == ([], [], [])
    # each in an interpreter of its own: one reached before it (edgetwin.calibrate, which
    # imports the API) may have imported the module a reader has not
    assert [problem for name in deep for problem in _reached([name])[2]] == []


def _reached(names: list[str]) -> tuple[list[str], list[str], list[str]]:
    """In a fresh interpreter: what ``import edgetwin`` loaded of ``HEAVY``, what it had
    loaded after two light modules were named, and each of ``names`` not reached from it."""
    code = f"""
import functools, json, sys
import edgetwin
heavy = {HEAVY!r}
loaded = lambda: sorted(m for m in sys.modules if m.split(".")[0] in heavy)
bare = loaded()
edgetwin.progress.text_progress, edgetwin.errors.InputError
light = loaded()
missing = []
for name in {names!r}:
    try:
        functools.reduce(getattr, name.split("."), edgetwin)
    except AttributeError as exc:
        missing.append(f"{{name}}: {{exc}}")
print(json.dumps([bare, light, missing]))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    bare, light, missing = json.loads(done.stdout)
    return bare, light, missing


def _is_module(chain: list[str]) -> bool:
    """Whether ``edgetwin.<chain>`` is a module deeper than the package's own
    (``emu.vit.worker``), found without importing it."""
    if len(chain) <= 2:
        return False
    try:
        return importlib.util.find_spec(".".join(["edgetwin", *chain])) is not None
    except ModuleNotFoundError:  # a module's attribute: its "parent" has no __path__
        return False


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_a_module'"):
        _ = edgetwin.not_a_module  # type: ignore[attr-defined]
    assert not hasattr(edgetwin, "sim.runner")  # a dotted name imports nothing


def test_the_version_is_the_commands() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "edgetwin", "--version"], capture_output=True, text=True, check=True
    )
    assert shown.stdout.split() == ["edgetwin", edgetwin.__version__]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", [True, "1", 1.5], ids=["bool", "str", "float"])
def test_a_bad_seed_argument_names_the_argument(seed: object, tmp_path: Path) -> None:
    """A bad ``seed=`` was blamed on the scenario file's field 'seed', which the file
    need not have."""
    with pytest.raises(InputError) as raised:
        edgetwin.run(JETSON, seed=seed, out=tmp_path / "out")  # type: ignore[arg-type]
    assert (raised.value.path, raised.value.field) == (None, "seed")
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(60)
def test_a_numpy_whole_number_is_a_seed() -> None:
    """``for seed in np.arange(3): edgetwin.run(..., seed=seed)`` was refused ('a whole
    number, not np.int64(0)'): numpy's integers are no ``int``."""
    small = ["sweeps=[{batch: [1]}]"]
    from_numpy = edgetwin.run(JETSON, seed=np.int64(3), overrides=small)  # type: ignore[arg-type]
    assert from_numpy.rows == edgetwin.run(JETSON, seed=3, overrides=small).rows
    assert from_numpy.provenance is not None and from_numpy.provenance["seed"] == 3


@pytest.mark.timeout(120)
def test_results_and_a_comparison_show_as_one_line(tmp_path: Path) -> None:
    """A notebook shows the object: it was every row's repr, some 66 KB for the Jetson
    study."""
    overrides = ["sweeps=[{batch: [1, 8]}]"]
    results = edgetwin.run(JETSON, overrides=overrides, out=tmp_path / "a")
    assert repr(results) == "Results(10 rows of prism_jetson: single, voltage, prism)"
    edgetwin.run(JETSON, overrides=overrides, out=tmp_path / "b")
    shown = repr(edgetwin.compare(tmp_path / "a", tmp_path / "b"))
    assert shown.startswith("Comparison(50 points; median |error| %: total_ms 0.00, ")
    assert shown.endswith("; 0 unmatched, 0 unmeasured)") and "\n" not in shown


@pytest.mark.timeout(60)
def test_results_line_says_why_rows_failed() -> None:
    """The line a notebook shows and ``edgetwin run``'s last line count failed rows by
    reason with one definition (run_failures.failed_summary); the line did not count them."""
    overrides = ["devices.0.ram_mb=400", "sweeps=[{batch: [1, 32]}]"]
    results = edgetwin.run(JETSON, overrides=overrides)
    shown = "Results(10 rows of prism_jetson: single, voltage, prism; 5 failed: out of memory 5)"
    assert repr(results) == shown


@pytest.mark.timeout(120)
def test_the_lines_a_notebook_shows_say_the_run_warned(tmp_path: Path) -> None:
    """``edgetwin run`` and ``compare`` print each warning on stderr; the line a notebook
    shows said nothing of them, so a twin run with packet loss (which it does not play)
    looked like any other unless ``.warnings`` was read."""
    lossy = ["network.loss_pct=1", "sweeps=[{batch: [1]}]"]
    results = edgetwin.run(JETSON, overrides=lossy, out=tmp_path / "lossy")
    (warning,) = results.warnings
    assert "a twin run has no loss" in warning
    shown = "Results(5 rows of prism_jetson: single, voltage, prism; 1 warning in .warnings)"
    assert repr(results) == shown
    assert repr(edgetwin.load_results(tmp_path / "lossy")) == shown
    other = ["sweeps=[{batch: [1]}]", "devices=[{name: jetson, profile: h200_netns, count: 2}]"]
    edgetwin.run(JETSON, overrides=other, out=tmp_path / "h200")
    comparison = edgetwin.compare(tmp_path / "lossy", tmp_path / "h200")
    # the sides ran on other devices, and the lossy side's own warning is passed on
    devices, passed_on = comparison.warnings
    assert "ran on profile jetson_orin_nano" in devices and "warned: " in passed_on
    assert repr(comparison).endswith("; 0 unmatched, 0 unmeasured; 2 warnings in .warnings)")
    plan = edgetwin.run_plan(
        ROOT / "scenarios" / "plan_crossover.plan.yaml",
        out=tmp_path / "plan",
        overrides=["axes.batch=[8]", "axes.devices=[2]", "set=[network.loss_pct=1]"],
        workers=1,
    )
    assert len(plan.warnings) == 1 and repr(plan).endswith("; 1 warning in .warnings)")


def test_a_failure_summary_names_the_commonest_reasons_then_dots() -> None:
    """Statuses say where (a device, a token, a job's counts); the summary counts the
    reason without them, the commonest three first."""
    row = edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1]}]"]).rows[0]
    no_phone = "incomplete: 0 of 4 inputs done; no phone connected (3 of 3 with an empty battery)"
    statuses = [
        "ok",
        "out of memory on jetson-0 at token 7",
        "device lost: jetson-1: went away",
        "out of memory on jetson-1 (weights)",
        no_phone,
        "device lost: jetson-0: went away",
        no_phone.replace("0 of 4", "2 of 4"),
        "incomplete: 1 of 4 inputs done; stage cell_b did not fit any connected phone's RAM",
        no_phone,
    ]
    rows = [replace(row, status=status) for status in statuses]
    expected = "8 failed: no phone connected 3, out of memory 2, device lost (went away) 2, ..."
    assert failed_summary(rows) == expected
    assert failed_summary(rows[:1]) == "0 failed"


def test_what_the_api_raises_and_warns_is_in_its_namespace() -> None:
    """A caller catches a failed run and filters the fit's warnings without importing
    edgetwin's internals (docs/api.md named ``edgetwin.errors.RunFailed`` and
    ``edgetwin.calibration.fit_check``)."""
    from edgetwin.calibration.fit_check import FIT_WARNINGS, AtBoundWarning, PoorFitWarning
    from edgetwin.errors import RunFailed

    assert edgetwin.RunFailed is RunFailed
    assert edgetwin.PoorFitWarning is PoorFitWarning
    assert edgetwin.AtBoundWarning is AtBoundWarning
    assert edgetwin.FIT_WARNINGS is FIT_WARNINGS


def test_what_a_fit_check_needs_is_in_its_namespace() -> None:
    """docs/api.md's calibrate example imported ``poorly_fitted`` from
    ``edgetwin.calibration.fit_check``: its examples now use ``edgetwin`` alone."""
    from edgetwin.calibration.fit_check import at_bound, poorly_fitted

    assert edgetwin.poorly_fitted is poorly_fitted
    assert edgetwin.at_bound is at_bound
    assert "from edgetwin." not in api_md_examples()


@pytest.mark.parametrize("check", ["poorly_fitted", "at_bound", "not_held_out"])
@pytest.mark.parametrize(
    "given",
    ["edgetwin/calibration/profiles/jetson_orin_nano.yaml", [], None],
    ids=["profile-file", "android-list", "none"],
)
def test_a_fit_check_of_no_profile_names_the_argument(check: str, given: object) -> None:
    """A fit check given a profile file's path (or the list an Android spec's calibrate
    returns) raised an AttributeError ("'str' object has no attribute 'fit'")."""
    with pytest.raises(InputError) as raised:
        getattr(edgetwin, check)(given)
    assert (raised.value.path, raised.value.field) == (None, "profile")
    assert "DeviceProfile" in raised.value.problem
