"""The Python API (``edgetwin.run``, ``load_scenario``, ``load_results``, ``Results``):
the README's example as written, the DataFrame against ``results.csv``, the CLI as a thin
layer over it, parquet, provenance, and ``import edgetwin`` staying light."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pandas as pd
import pytest
import yaml

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.provenance import write_provenance
from edgetwin.results import DTYPES
from edgetwin.scenario import load_scenario
from edgetwin.unplayed_settings import unplayed_settings

ROOT = Path(__file__).resolve().parents[1]
JETSON = ROOT / "scenarios" / "prism_jetson.yaml"
SMALL = ["sweeps=[{batch: [1, 8]}]"]  # a few configurations of the Jetson study


def readme_python_example() -> str:
    """The code block of the README's "Python API" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the README's Python API section has no python block"
    return match.group(1)


def csv_frame(folder: Path) -> pd.DataFrame:
    """``results.csv`` read by pandas itself, with the dtypes the API documents."""
    return pd.read_csv(folder / "results.csv", dtype=DTYPES)


@pytest.mark.timeout(120)
def test_the_readme_example_runs_and_its_frame_is_results_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(readme_python_example(), namespace)
    frame = namespace["frame"]
    assert isinstance(frame, pd.DataFrame)
    header = (tmp_path / "out" / "api" / "results.csv").read_text().splitlines()[0]
    assert list(frame.columns) == header.split(",")
    assert {c: str(t) for c, t in frame.dtypes.items()} == {c: DTYPES[c] for c in frame.columns}
    assert str(frame.dtypes["strategy"]) == "string" and str(frame.dtypes["segments"]) == "Int64"
    # the same values as the CSV (to its 7 significant digits), read back either way
    on_disk = csv_frame(tmp_path / "out" / "api")
    pd.testing.assert_frame_equal(frame, on_disk, check_exact=False, rtol=1e-6)
    again = namespace["again"]
    assert isinstance(again, edgetwin.Results)
    pd.testing.assert_frame_equal(again.to_pandas(), on_disk)
    assert len(frame) == 65  # prism_jetson: 65 configurations, one repetition
    slow = namespace["slow"]
    assert isinstance(slow, edgetwin.Results)
    at_400 = frame[frame["bandwidth_mbps"] == 400]
    both = slow.to_pandas().merge(at_400, on=["strategy", "cr", "batch"], suffixes=("", "_400"))
    split = both[both["strategy"] != "single"]
    assert len(split) == 12  # voltage and prism at 3 CRs, at 3 batch sizes
    assert (split["total_ms"] > split["total_ms_400"]).all()  # the what-if at 100 Mbps is slower


@pytest.mark.timeout(120)
def test_the_cli_writes_what_the_api_writes(tmp_path: Path) -> None:
    code = main(["run", str(JETSON), "--out", str(tmp_path / "cli"), "--quiet", "--seed", "3"])
    assert code == 0
    results = edgetwin.run(JETSON, mode=None, seed=3, out=tmp_path / "api")
    for name in ("results.csv", "scenario.resolved.yaml", "reference.csv"):
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "api" / name).read_bytes()
    assert (tmp_path / "api" / "report.html").is_file()
    assert results.scenario is not None and results.scenario.seed == 3
    assert results.provenance is not None  # the folder's provenance.json
    assert results.provenance["command"] == ["edgetwin.run", str(JETSON), "seed=3"]
    cli = json.loads((tmp_path / "cli" / "provenance.json").read_text())
    assert cli["command"][:2] == ["edgetwin", "run"]
    assert cli["inputs"] == results.provenance["inputs"]  # the same files, the same hashes
    reference = str(ROOT / "data/reference/prism-jetson/measurements.csv")
    assert reference in cli["inputs"]  # normalised: not .../scenarios/../data/...


@pytest.mark.timeout(120)
def test_a_loaded_scenario_runs_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = edgetwin.load_scenario(JETSON, SMALL)
    assert scenario.reference is not None and Path(scenario.reference).is_absolute()
    assert scenario.devices[0].profile == "jetson_orin_nano"  # a shipped name stays a name
    monkeypatch.chdir(tmp_path)
    from_object = edgetwin.run(scenario, overrides=["network.bandwidth_mbps=200"])
    from_file = edgetwin.run(JETSON, overrides=[*SMALL, "network.bandwidth_mbps=200"])
    assert from_object.rows == from_file.rows
    assert from_object.reference is not None and from_file.reference is not None
    assert from_object.reference.resolve() == from_file.reference.resolve()  # the same file
    assert {r.bandwidth_mbps for r in from_object.rows} == {200.0}


@pytest.mark.timeout(120)
def test_parquet_instead_of_or_beside_the_csv(tmp_path: Path) -> None:
    code = main(
        [
            "run",
            str(JETSON),
            "--out",
            str(tmp_path / "pq"),
            "--quiet",
            "--format",
            "parquet",
            "--set",
            SMALL[0],
        ]
    )
    assert code == 0
    assert not (tmp_path / "pq" / "results.csv").exists()
    assert (tmp_path / "pq" / "report.html").is_file()
    results = edgetwin.run(JETSON, overrides=SMALL, out=tmp_path / "both", format="both")
    assert (tmp_path / "both" / "results.csv").is_file()
    from_parquet = edgetwin.load_results(tmp_path / "pq")
    assert from_parquet.rows == results.rows  # full precision, every type back
    pd.testing.assert_frame_equal(from_parquet.to_pandas(), results.to_pandas())
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "both" / "results.parquet"), results.to_pandas()
    )


@pytest.mark.timeout(120)
def test_a_crowd_run_has_its_columns_typed(tmp_path: Path) -> None:
    results = edgetwin.run(ROOT / "scenarios" / "crowdio_android.yaml", out=tmp_path / "c")
    frame = results.to_pandas()
    header = (tmp_path / "c" / "results.csv").read_text().splitlines()[0].split(",")
    assert list(frame.columns) == header
    assert "cold_loads" in header and str(frame.dtypes["cold_loads"]) == "Int64"
    assert str(frame.dtypes["scheduler"]) == "string"
    pd.testing.assert_frame_equal(frame, csv_frame(tmp_path / "c"), check_exact=False, rtol=1e-6)


@pytest.mark.timeout(120)
def test_write_and_load_results_keep_provenance_and_scenario(tmp_path: Path) -> None:
    results = edgetwin.run(JETSON, overrides=SMALL)
    out = results.write(tmp_path / "w")
    assert sorted(p.name for p in out.iterdir()) == [
        "devices.yaml",
        "provenance.json",
        "reference.csv",
        "report.html",
        "results.csv",
        "scenario.resolved.yaml",
    ]
    run_record = edgetwin.load_results(out).provenance
    assert run_record is not None and run_record == results.provenance  # the run's, no out
    assert run_record["command"] == ["edgetwin.run", str(JETSON), *SMALL, "mode=twin"]
    assert str(JETSON) in run_record["inputs"]
    results.write(out, force=True)  # its own folder: replaceable, as the command's are
    bare = edgetwin.Results(rows=results.rows).write(tmp_path / "bare")  # made in Python
    bare_record = edgetwin.load_results(bare).provenance
    assert bare_record is not None and bare_record["inputs"] == {}
    assert bare_record["command"] == ["edgetwin.Results.write", str(tmp_path / "bare")]
    edgetwin.Results(rows=results.rows).write(bare, force=True)
    write_provenance(out, command=["x"], seed=0, inputs={"a.yaml": "0" * 64})
    record = json.loads((out / "provenance.json").read_text())
    loaded = edgetwin.load_results(out)
    assert loaded.provenance == record
    again = loaded.write(tmp_path / "again")
    assert edgetwin.load_results(again).provenance == record  # it travels with the results
    written = (again / "provenance.json").read_bytes()
    assert written == (out / "provenance.json").read_bytes()  # as the command wrote it
    assert loaded.scenario == results.scenario
    (out / "provenance.json").write_text("[1, 2")
    with pytest.raises(InputError, match=r"provenance\.json"):
        edgetwin.load_results(out)


def test_progress_is_told_the_total_and_advanced_once_per_run() -> None:
    seen: list[object] = []

    @contextmanager
    def progress(label: str, total: int) -> Iterator[Callable[[], None]]:
        advanced = []
        seen.append((label, total))
        yield lambda: advanced.append(1)
        seen.append(len(advanced))

    results = edgetwin.run(JETSON, overrides=SMALL, progress=progress)
    assert seen == [("twin prism_jetson", len(results.rows)), len(results.rows)]


def test_a_progress_that_takes_a_name_is_told_each_configuration_in_run_order() -> None:
    """The steps were only counted: nothing said which configuration had run."""
    named: list[str] = []

    @contextmanager
    def progress(label: str, total: int) -> Iterator[Callable[[str], None]]:
        yield named.append

    overrides = ["strategies=[{name: single}, {name: prism, cr: [9.9]}]", "repetitions=2", *SMALL]
    edgetwin.run(JETSON, overrides=overrides, progress=progress)
    configs = ["single, batch 1", "single, batch 8", "prism cr 9.9 x2, batch 1"]
    configs.append("prism cr 9.9 x2, batch 8")
    assert named == [f"{c}, 400 Mbps, rep {rep}" for c in configs for rep in (0, 1)]


@pytest.mark.parametrize(
    "progress",
    [print, lambda label, total: lambda: None, lambda label, total: nullcontext()],
    ids=["print", "returns-a-function", "yields-none"],
)
def test_a_progress_that_is_no_context_manager_is_named_and_writes_nothing(
    tmp_path: Path, progress: Callable[[str, int], object]
) -> None:
    """These were a TypeError from inside the run: 'NoneType' object does not support
    the context manager protocol (or is not callable)."""
    with pytest.raises(InputError) as raised:
        edgetwin.run(JETSON, overrides=SMALL, progress=progress, out=tmp_path / "x")
    assert raised.value.field == "progress"
    assert "context manager" in raised.value.problem
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "advance",
    [lambda label, total, extra: None, lambda *, step: None],
    ids=["three-arguments", "keyword-only"],
)
def test_a_progress_step_that_takes_neither_a_name_nor_nothing_is_named(
    tmp_path: Path, advance: Callable[..., None]
) -> None:
    """A step function that can be called neither with the step's name nor without it was
    a TypeError from inside the run ('missing 3 required positional arguments')."""
    with pytest.raises(InputError) as raised:
        edgetwin.run(
            JETSON, overrides=SMALL, progress=lambda *_: nullcontext(advance), out=tmp_path / "x"
        )
    assert raised.value.field == "progress"
    assert "a function of the step's name or of nothing" in raised.value.problem
    assert not (tmp_path / "x").exists()


def test_a_trace_without_out_is_refused() -> None:
    """``trace=True`` without ``out`` ran, wrote the timelines into a scratch folder and
    dropped them, without a word."""
    with pytest.raises(InputError) as raised:
        edgetwin.run(JETSON, overrides=SMALL, trace=True)
    assert raised.value.field == "trace" and "give out too" in raised.value.problem


def test_progress_none_shows_nothing() -> None:
    """The documented default shows nothing; ``None`` was refused as not a function."""
    quiet = edgetwin.run(JETSON, overrides=SMALL, progress=None)
    assert quiet.rows == edgetwin.run(JETSON, overrides=SMALL).rows


def test_bad_input_names_the_field_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"network\.bandwidth_mbps"):
        edgetwin.run(JETSON, overrides=["network.bandwidth_mbps=-1"], out=tmp_path / "x")
    assert not (tmp_path / "x").exists()
    with pytest.raises(InputError, match=r"results\.csv"):
        edgetwin.load_results(tmp_path)


@pytest.mark.timeout(120)
def test_load_results_of_another_commands_folder_names_that_command(tmp_path: Path) -> None:
    """A validate folder said only 'results.csv: file not found'; report named the command
    that wrote it, and load_results does too."""
    spec = ROOT / "edgetwin/calibration/specs/jetson_orin_nano.yaml"
    edgetwin.validate(spec, out=tmp_path / "v")
    with pytest.raises(InputError, match=r"holds validation\.html, which edgetwin validate"):
        edgetwin.load_results(tmp_path / "v")


def test_an_override_removes_a_key_and_its_field_takes_the_default() -> None:
    """``~key`` drops a key: a list item from its list, a field back to its default."""
    result = edgetwin.run(JETSON, overrides=[*SMALL, "~strategies.0", "~input_source"])
    assert {row.strategy for row in result.rows} == {"voltage", "prism"}
    assert result.scenario is not None
    assert result.scenario.input_source == "terminal"  # the file says replicated


@pytest.mark.parametrize(
    ("overrides", "trace", "named"),
    [
        (["network"], False, "override 'network': expected key=value"),
        ([".network=1"], False, "override '.network': a dotted key"),
        ([], True, "--trace (trace=True in Python)"),
    ],
    ids=["no-value", "empty-part", "trace"],
)
def test_errors_name_what_the_api_caller_gave(
    tmp_path: Path, overrides: list[str], trace: bool, named: str
) -> None:
    """The API's errors name its own arguments too: these named only the CLI's flags
    (``field '--set'``, ``field '--trace'``), which a Python caller never typed."""
    llm_smoke = JETSON.parent / "llm_smoke.yaml"
    with pytest.raises(InputError) as raised:
        edgetwin.run(llm_smoke, mode="local", overrides=overrides, trace=trace, out=tmp_path / "x")
    assert named in raised.value.message
    assert raised.value.field is None


def test_errors_that_name_an_option_name_the_python_argument_too(tmp_path: Path) -> None:
    """An out that is a file or is not empty, and a decoder that real code cannot run,
    named the command line's options alone ('--out is not empty; pass --force', 'use
    --mode twin'), which a Python caller never typed."""
    (tmp_path / "file").write_text("a file\n")
    with pytest.raises(InputError) as raised:
        edgetwin.run(JETSON, overrides=SMALL, out=tmp_path / "file")
    assert raised.value.problem == "--out (out= in Python) exists and is not a folder"
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine\n")
    with pytest.raises(InputError) as raised:
        edgetwin.run(JETSON, overrides=SMALL, out=full)
    assert raised.value.problem == (
        "--out (out= in Python) is not empty; pass --force (force=True in Python) to replace "
        "it whole"
    )
    llm_smoke = JETSON.parent / "llm_smoke.yaml"
    with pytest.raises(InputError) as raised:
        edgetwin.run(llm_smoke, mode="local", overrides=["model.kv_dtype=fp16"])
    assert raised.value.field == "model.kv_dtype"
    assert raised.value.problem.endswith("; use --mode twin (mode='twin' in Python)")


@pytest.mark.timeout(60)
def test_warnings_that_name_an_option_name_the_python_argument_too() -> None:
    """A twin run's warnings said 'only --mode emu drops packets' (and plays faults and
    host cores), an option that a Python caller never typed: they name mode='emu' too."""
    faults = ROOT / "scenarios" / "emu_crowdio_faults.yaml"
    lossy = [*SMALL, "network.loss_pct=1", "emulator.host_cpu_cores=[1, 1]"]
    said = [
        *edgetwin.run(JETSON, overrides=lossy).warnings,
        *edgetwin.run(faults, mode="twin").warnings,
    ]
    naming = [warning for warning in said if "--" in warning]
    assert len(naming) == 3, said  # loss, host cores, faults
    for warning in naming:
        assert "only --mode emu (mode='emu' in Python) " in warning, warning
        assert warning.count("--") == 1, warning


def test_import_edgetwin_stays_light() -> None:
    """The API is imported on first use: a worker's ``import edgetwin`` pulls nothing."""
    script = (
        "import sys, edgetwin\n"
        "heavy = [m for m in ('edgetwin.workbench', 'pandas', 'simpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert edgetwin.run.__module__ == 'edgetwin.workbench.running'\n"
        "assert 'edgetwin.workbench' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        _ = edgetwin.nonesuch  # type: ignore[attr-defined]


def test_the_api_names_the_command_of_a_file_of_another_kind() -> None:
    evaluation = JETSON.with_name("adaptive_prism.eval.yaml")
    with pytest.raises(InputError, match="edgetwin evaluate"):
        edgetwin.run(evaluation)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("call", "given", "right"),
    [
        (lambda path: edgetwin.evaluate_adaptive(path), "prism_jetson.yaml", "run"),
        (
            lambda path: edgetwin.evaluate_affinity(path),
            "adaptive_prism.eval.yaml",
            "evaluate_adaptive",
        ),
        (lambda path: edgetwin.run_plan(path, out="unused"), "prism_jetson.yaml", "run"),
        (lambda path: edgetwin.calibrate(path), "plan_crossover.plan.yaml", "run_plan"),
        (lambda path: edgetwin.validate(path), "affinity_small.eval.yaml", "evaluate_affinity"),
    ],
    ids=["evaluate_adaptive", "evaluate_affinity", "run_plan", "calibrate", "validate"],
)
def test_each_api_function_names_the_function_of_a_file_of_another_kind(
    call: Callable[[Path], object], given: str, right: str
) -> None:
    """The functions said 'field 'scenario': required key is missing' and the like: only
    the command line checked what kind of file it was given."""
    with pytest.raises(InputError) as raised:
        call(JETSON.with_name(given))
    assert f"(edgetwin.{right} in Python)" in raised.value.problem
    assert "missing" not in raised.value.problem


@pytest.mark.timeout(60)
def test_a_twin_run_warns_that_only_the_emulator_drops_packets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The twin models no packet loss: a scenario's ``loss_pct`` is a warning there, in the
    API's ``warnings`` and on the console, and the rows are those of a lossless run."""
    lossless = edgetwin.run(JETSON, overrides=SMALL)
    assert lossless.warnings == ()
    lossy = edgetwin.run(JETSON, overrides=[*SMALL, "network.loss_pct=2.5"])
    assert lossy.warnings == (
        "network.loss_pct is 2.5 %, but only --mode emu (mode='emu' in Python) drops packets: "
        "a twin run has no loss",
    )
    assert [r.total_ms for r in lossy.rows] == [r.total_ms for r in lossless.rows]
    lossy_cli = ["--set", SMALL[0], "--set", "network.loss_pct=1", "--out", str(tmp_path)]
    assert main(["run", str(JETSON), "--quiet", "--force", *lossy_cli]) == 0
    assert "edgetwin: warning: network.loss_pct is 1 %" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_a_twin_run_warns_that_only_the_emulator_plays_faults_and_host_cores() -> None:
    """emu_crowdio_faults run in the twin took no link down and killed no worker, and a
    host's core quota capped nothing, without a word."""
    faults = ROOT / "scenarios" / "emu_crowdio_faults.yaml"
    twin = edgetwin.run(faults, mode="twin")
    expected = (
        "emulator.faults is set, but only --mode emu (mode='emu' in Python) plays it: "
        "a twin run has none"
    )
    assert expected in twin.warnings
    capped = edgetwin.run(JETSON, overrides=[*SMALL, "emulator.host_cpu_cores=[1, 1]"])
    assert any(w.startswith("emulator.host_cpu_cores is set") for w in capped.warnings)


def _with_step(scenario: Path, overrides: list[str], at_ms: float, mbps: float) -> edgetwin.Results:
    """A run of ``scenario`` with ``overrides`` and one bandwidth step, to ``mbps`` at
    ``at_ms``."""
    step = f"network.schedule=[{{at_ms: {at_ms:g}, bandwidth_mbps: {mbps:g}}}]"
    return edgetwin.run(scenario, overrides=[*overrides, step])


@pytest.mark.timeout(60)
def test_a_twin_run_warns_of_a_schedule_step_a_run_ended_before() -> None:
    """Voltage at batch 1 on the Jetsons ends in 0.68 s (a warm-up batch and the measured
    one), before a step at 1 s: its row was the starting rate's, and nothing said so (the
    emulator says it of its launches); at batch 8 (1.2 s a batch) the step plays. A step at
    0 ms plays in every run, unsaid."""
    voltage = ["sweeps=[{batch: [1, 8]}]", "strategies=[{name: voltage}]", "warmup_batches=1"]
    plain = edgetwin.run(JETSON, overrides=voltage)
    late = _with_step(JETSON, voltage, at_ms=1000, mbps=50)
    assert late.warnings == (
        "network.schedule step to 50 Mbps at 1 s did not play in 1 of 2 runs: each ended "
        "before it (times count from each run's start, its warm-up batches included)",
    )
    assert late.rows[0].total_ms == plain.rows[0].total_ms < 1000
    assert late.rows[1].total_ms > plain.rows[1].total_ms > 1000
    at_once = _with_step(JETSON, voltage, at_ms=0, mbps=50)
    assert at_once.warnings == ()
    assert all(s.comm_ms > p.comm_ms for s, p in zip(at_once.rows, plain.rows, strict=True))
    # a generation has no warm-up to count from
    decoder = _with_step(JETSON.parent / "llm_smoke.yaml", [], at_ms=1e9, mbps=50)
    assert decoder.warnings and all(
        w.endswith("(times count from each run's start)") for w in decoder.warnings
    )


@pytest.mark.timeout(60)
def test_a_failed_twin_run_is_no_run_a_schedule_step_did_not_play_in() -> None:
    """A decoder out of memory before its first token ran nothing for a step at 1 ms to
    change: every run of llm_smoke on 1 MB boards was said to have ended before it."""
    run = _with_step(JETSON.parent / "llm_smoke.yaml", ["devices.0.ram_mb=1"], at_ms=1, mbps=50)
    assert run.rows and not any(row.ok for row in run.rows)
    assert run.warnings == ()


@pytest.mark.timeout(60)
def test_a_failed_twin_run_is_not_counted_among_the_runs_either() -> None:
    """On 250 MB boards six of llm_smoke's ten runs are out of memory (their weights): the
    warning said a step at 1000 s did not play in 4 of 10 runs, as if the six had run."""
    run = _with_step(JETSON.parent / "llm_smoke.yaml", ["devices.0.ram_mb=250"], 1e6, 50)
    assert [row.ok for row in run.rows].count(True) == 4 < len(run.rows)
    assert run.warnings == (
        "network.schedule step to 50 Mbps at 1,000 s did not play in 4 of 4 runs: each ended "
        "before it (times count from each run's start)",
    )


@pytest.mark.timeout(60)
def test_a_crowd_twin_run_warns_of_a_schedule_step_its_runs_ended_before() -> None:
    """crowdio_android's one job ends in about 20 s, long before a step at 60 s: the twin's
    crowd runs played none of it and said nothing (its ViT and decoder runs say it). A step
    at 1 s plays in both runs, unsaid, and slows them."""
    android = ROOT / "scenarios" / "crowdio_android.yaml"
    one_job = ["repetitions=1", "crowd.horizon_s=1"]
    plain = edgetwin.run(android, overrides=one_job)
    late = _with_step(android, one_job, at_ms=60000, mbps=5)
    assert late.warnings == (
        "network.schedule step to 5 Mbps at 60 s did not play in 2 of 2 runs: each ended "
        "before it (times count from each run's start)",
    )
    assert late.rows == plain.rows and all(r.total_ms < 60000 for r in late.rows)
    early = _with_step(android, one_job, at_ms=1000, mbps=5)
    assert early.warnings == ()
    assert all(e.total_ms > p.total_ms for e, p in zip(early.rows, plain.rows, strict=True))


def test_a_real_run_says_it_does_not_play_the_twins_warmup_batches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``warmup_batches`` is the twin's: a local or emulator run plays ``real_warmups``
    instead, and said nothing of it (a twin run that sets ``real_warmups`` does)."""
    scenario = load_scenario(JETSON, ["warmup_batches=3"])
    assert unplayed_settings(scenario, "twin") == []
    for mode in ("local", "emu"):
        assert unplayed_settings(scenario, mode) == [
            f"warmup_batches is 3, but only a twin run plays it: a {mode} run plays "
            "real_warmups (2)"
        ]
    argv = ["run", str(JETSON), "--check", "--mode", "local", "--set", "warmup_batches=3"]
    assert main(argv) == 0
    assert "edgetwin: warning: warmup_batches is 3, but only a twin run" in capsys.readouterr().err


def test_an_emulator_run_says_its_schedule_leaves_the_twins_warmup_batches_out() -> None:
    """A twin run's schedule counts from its first warm-up batch, an emulator run's from
    each timed forward (its real warm-ups, before a configuration's first, are in no run):
    with ``warmup_batches`` and a step past 0 ms the two meet the step at other points of
    their work, and the emulator run said nothing of it. A step at 0 ms meets both alike."""
    steps = "[{at_ms: 0, bandwidth_mbps: 5}, {at_ms: 100, bandwidth_mbps: 50}]"
    scenario = load_scenario(JETSON, ["warmup_batches=3", f"network.schedule={steps}"])
    differ = (
        "network.schedule counts from each run's start: a twin run's first warm-up batch "
        "(warmup_batches 3), an emu run's timed forward (its real_warmups come before a "
        "configuration's first, in no run): its step at 0.1 s meets the two at other "
        "points of their work"
    )
    assert differ in unplayed_settings(scenario, "emu")
    assert differ not in unplayed_settings(scenario, "twin")
    at_start = "network.schedule=[{at_ms: 0, bandwidth_mbps: 5}]"
    for alike in (["warmup_batches=3", at_start], [f"network.schedule={steps}"]):
        warned = unplayed_settings(load_scenario(JETSON, alike), "emu")
        assert not any(w.startswith("network.schedule counts") for w in warned)


def test_check_is_run_check_in_python(capsys: pytest.CaptureFixture[str]) -> None:
    """``edgetwin run --check`` checks a scenario for its mode (and says the warnings the run
    would start with) without running it; Python had ``load_scenario``, which checks nothing
    of what a local or emulator run needs. ``edgetwin.check`` returns the warnings the
    command prints, and raises what it refuses, naming the same file and field."""
    slow_warmup = ["warmup_batches=3"]
    warned = edgetwin.check(JETSON, overrides=slow_warmup, mode="local")
    assert warned == [
        "warmup_batches is 3, but only a twin run plays it: a local run plays real_warmups (2)"
    ]
    in_memory = edgetwin.load_scenario(JETSON)  # its files by absolute path
    assert edgetwin.check(in_memory, overrides=slow_warmup, mode="local") == warned
    assert edgetwin.check(JETSON, overrides=slow_warmup) == []  # its own mode, the twin
    capsys.readouterr()
    assert main(["run", str(JETSON), "--check", "--mode", "local", "--set", *slow_warmup]) == 0
    assert capsys.readouterr().err.splitlines() == [f"edgetwin: warning: {w}" for w in warned]
    decoder = ROOT / "scenarios" / "llm_smoke.yaml"
    assert edgetwin.check(decoder, mode="local") == []
    with pytest.raises(InputError) as raised:  # the real decoder writes no profiler trace
        edgetwin.check(decoder, mode="local", trace=True)
    assert raised.value.path == str(decoder)
    assert "--trace (trace=True in Python): the real decoder writes no" in raised.value.message
    for bad, field in (
        ({"mode": "cloud"}, "mode"),
        ({"overrides": "seed=1"}, "overrides"),
        ({"seed": 2**32}, "seed"),
        ({"trace": "yes"}, "trace"),
    ):
        with pytest.raises(InputError) as raised:
            edgetwin.check(JETSON, **bad)  # type: ignore[arg-type]
        assert raised.value.field == field


# every command with --check: its input file and a --set that it refuses
CHECKED_COMMANDS = {
    "run": ("prism_jetson.yaml", "repetitions=0"),  # its out was not checked
    "plan": ("plan_crossover.plan.yaml", "axes.batch=[0]"),
    "evaluate": ("adaptive_prism.eval.yaml", "objective=speed"),
    "evaluate-affinity": ("affinity_small.eval.yaml", "repetitions=0"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", CHECKED_COMMANDS)
def test_check_checks_what_every_command_checks(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``edgetwin plan``, ``evaluate`` and ``evaluate-affinity`` take ``--check`` too, but
    ``edgetwin.check`` took a scenario alone (a plan question: 'this is a plan question,
    not a scenario'), and no ``out``: Python could not check a file without running it.
    It now checks each as its command does, the file's kind telling which, ``out`` too,
    with the command's errors."""
    name, refused = CHECKED_COMMANDS[command]
    spec = ROOT / "scenarios" / name
    assert edgetwin.check(spec) == []
    assert main([command, str(spec), "--check"]) == 0
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("a folder of my own\n")
    for call, argv in (
        ({"overrides": [refused]}, ["--set", refused]),
        ({"out": full}, ["--out", str(full)]),
        ({"out": full, "force": True}, ["--out", str(full), "--force"]),
    ):
        with pytest.raises(InputError) as raised:
            edgetwin.check(spec, **call)  # type: ignore[arg-type]
        capsys.readouterr()
        assert main([command, str(spec), "--check", *argv]) == 2
        assert capsys.readouterr().err == f"edgetwin: error: {raised.value.message}\n"
    assert (full / "mine.txt").exists() and not list(tmp_path.glob(".*"))
    if command != "run":
        with pytest.raises(InputError) as raised:  # a scenario's run takes a seed, not this
            edgetwin.check(spec, seed=1)
        assert raised.value.field == "seed"


def test_an_encoders_memory_bandwidth_override_is_a_warning_in_every_mode() -> None:
    """Only a decoder's pieces move bytes through memory: a ViT twin run on Jetsons at
    0.001 GB/s gave the rows of their profile without a word, and a local run said only
    the twin plays it, which it does not either."""
    slow = "devices.0.memory_bandwidth_gbps=0.001"
    plain = edgetwin.run(JETSON, overrides=SMALL)
    twin = edgetwin.run(JETSON, overrides=[*SMALL, slow])
    assert twin.rows == plain.rows
    expected = (
        "devices.0.memory_bandwidth_gbps is set, but only a decoder's runs move bytes "
        "through memory: an encoder's pieces take their FLOP time, in every mode"
    )
    assert twin.warnings == (expected,)
    local = unplayed_settings(load_scenario(JETSON, [slow]), "local")
    assert [w for w in local if "memory_bandwidth_gbps" in w] == [expected]


def test_a_token_bucket_no_profile_can_burst_from_is_a_warning() -> None:
    """The Jetson profile has no stack rate, the rate a burst goes at: its runs had no
    bucket, whatever burst_kb said, and nothing said so."""
    plain = edgetwin.run(JETSON, overrides=SMALL)
    bucket = edgetwin.run(JETSON, overrides=[*SMALL, "network.burst_kb=100000"])
    assert len(bucket.warnings) == 1
    assert "network.burst_kb is set" in bucket.warnings[0]
    assert "jetson_orin_nano has no network.stack_mbps" in bucket.warnings[0]
    assert [r.total_ms for r in bucket.rows] == [r.total_ms for r in plain.rows]
    h200 = edgetwin.run(ROOT / "scenarios" / "h200_bw.yaml", overrides=["sweeps=[{batch: [1]}]"])
    assert h200.warnings == ()  # its profile bursts at its stack rate


def test_sampling_a_profile_without_bootstrap_samples_is_a_warning() -> None:
    """sample_profiles on the Jetson profile (a fit to a published table keeps no bootstrap
    samples) ran the fitted profile in every repetition, and nothing said so."""
    plain = edgetwin.run(JETSON, overrides=SMALL)
    sampled = edgetwin.run(JETSON, overrides=[*SMALL, "sample_profiles=true"])
    assert len(sampled.warnings) == 1
    assert "profile jetson_orin_nano keeps no bootstrap samples" in sampled.warnings[0]
    assert sampled.rows == plain.rows
    h200 = ROOT / "scenarios" / "h200_loopback.yaml"
    resampled = edgetwin.run(h200, overrides=["sweeps=[{batch: [1]}]", "sample_profiles=true"])
    assert resampled.warnings == ()  # its fit kept samples: each repetition draws one


@pytest.mark.parametrize("setting", ["network.burst_kb=100000", "sample_profiles=true"])
def test_run_check_says_what_the_twins_fleet_does_not_play(
    setting: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A twin run starts by warning of what its devices' profiles cannot play (a token
    bucket with no stack rate to burst at, sampling a fit that kept no samples), and `plan
    --check` said the first; `run --check` and ``edgetwin.check`` said "ok" alone."""
    ran = edgetwin.run(JETSON, overrides=[*SMALL, setting])
    assert len(ran.warnings) == 1
    assert edgetwin.check(JETSON, overrides=[*SMALL, setting]) == list(ran.warnings)
    capsys.readouterr()
    assert main(["run", str(JETSON), "--check", "--set", *SMALL, "--set", setting]) == 0
    said = [f"edgetwin: warning: {w}" for w in ran.warnings]
    assert capsys.readouterr().err.splitlines() == said


@pytest.mark.timeout(60)
def test_a_crowd_twin_run_plays_the_swept_bandwidths_as_the_emulator_does() -> None:
    """The crowd twin ran at network.bandwidth_mbps alone while the emulator played the
    sweeps' bandwidths: the two modes of one file had no row in common."""
    crowd = ROOT / "scenarios/emu_crowdio.yaml"
    streaming = "strategies=[{name: crowdio_streaming}]"
    swept = edgetwin.run(crowd, mode="twin", overrides=[streaming])
    assert swept.warnings == ()
    assert [row.bandwidth_mbps for row in swept.rows] == [10, 100]  # the emulator's order
    slow, fast = swept.rows
    assert slow.status == fast.status == "ok" and slow.total_ms > fast.total_ms
    assert slow.bytes_moved == fast.bytes_moved  # the same phones and work, on slower links
    unswept = edgetwin.run(crowd, mode="twin", overrides=[streaming, "sweeps=[{batch: [1]}]"])
    assert [row.bandwidth_mbps for row in unswept.rows] == [20]  # network.bandwidth_mbps


def test_out_that_holds_the_scenario_is_refused(tmp_path: Path) -> None:
    """The CLI refused it, but from Python ``force=True`` replaced the folder and the
    scenario it had just read went with it."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        (ROOT / "edgetwin" / "workbench" / "templates" / "scenario.yaml").read_text()
    )
    with pytest.raises(InputError, match="holds an input of this command"):
        edgetwin.run(scenario, out=tmp_path, force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["s.yaml"]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: edgetwin.run(123), "scenario"),
        (lambda: edgetwin.run(JETSON, out=5), "out"),
        (lambda: edgetwin.run(JETSON, overrides="seed=3"), "overrides"),
        (lambda: edgetwin.run(JETSON, overrides=None), "overrides"),
        (lambda: edgetwin.run(JETSON, overrides=[1]), "overrides.0"),
        (lambda: edgetwin.run(JETSON, format="xlsx"), "format"),
        (lambda: edgetwin.run(JETSON, progress=5), "progress"),
        (lambda: edgetwin.run(JETSON, progress=lambda: None), "progress"),  # a TypeError
        (lambda: edgetwin.load_scenario(5), "path"),
        (lambda: edgetwin.load_scenario(JETSON, overrides="seed=3"), "overrides"),
        (lambda: edgetwin.load_results(None), "folder"),  # was "dir": no such argument
        (lambda: edgetwin.run(JETSON, force="no"), "force"),
        (lambda: edgetwin.run(JETSON, trace="yes"), "trace"),
        (lambda: edgetwin.run(JETSON, command="edgetwin run s.yaml"), "command"),
        (lambda: edgetwin.run(JETSON, command=["edgetwin", 1]), "command.1"),
    ],
    ids=[
        *("scenario-int", "out-int", "overrides-str", "overrides-none", "overrides-int"),
        *(
            "format",
            "progress-int",
            "progress-no-arguments",
            "load-int",
            "load-overrides-str",
            "results-none",
        ),
        *("force-str", "trace-str", "command-str", "command-int"),
    ],
)
def test_a_bad_argument_is_named(call: Callable[[], object], field: str) -> None:
    """These were a TypeError or AttributeError from deep inside (or ran: an unknown
    format wrote both files; a string of overrides was read one character at a time)."""
    with pytest.raises(InputError) as raised:
        call()
    assert raised.value.field == field


def test_force_replaces_an_edgetwin_output_only(tmp_path: Path) -> None:
    """``force=True`` emptied any folder, a paper's too (``out="~/paper"``, a typo)."""
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "thesis.tex").write_text("years of work\n")
    with pytest.raises(InputError, match="is no edgetwin output"):
        edgetwin.run(JETSON, overrides=SMALL, out=paper, force=True)
    assert [p.name for p in paper.iterdir()] == ["thesis.tex"]


def test_force_that_is_not_true_replaces_nothing(tmp_path: Path) -> None:
    """force="no" read as true: the folder and what it held were replaced."""
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(InputError):
        edgetwin.run(JETSON, out=tmp_path, force="no")
    results = edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1]}]"])
    with pytest.raises(InputError):
        results.write(tmp_path, force="no")  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_load_results_of_a_name_too_long(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot be read: File name too long"):
        edgetwin.load_results(tmp_path / ("x" * 5000))


def test_an_unknown_mode_is_named() -> None:
    with pytest.raises(InputError) as raised:
        edgetwin.run(JETSON, mode="hardware")  # type: ignore[arg-type]
    assert raised.value.field == "mode"


def test_results_written_elsewhere_keep_the_link_check(tmp_path: Path) -> None:
    """An emulator run's results written to another folder lost ``link_check.csv``, and
    their page its link figure."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "data" / "traces" / "emu-vit-loop-2026-12" / "fit", run)
    again = edgetwin.load_results(run).write(tmp_path / "again")
    checks = (run / "link_check.csv").read_bytes()
    assert (again / "link_check.csv").read_bytes() == checks
    assert "Link check: wire rate against set rate" in (again / "report.html").read_text()
    shutil.rmtree(run)  # the results carry the checks, not the path they were read from
    edgetwin.load_results(again).write(tmp_path / "third")
    assert (tmp_path / "third" / "link_check.csv").read_bytes() == checks


def test_a_real_runs_warmups_are_in_its_resolved_scenario_and_a_twin_run_says_it_plays_none(
    tmp_path: Path,
) -> None:
    """``real_warmups`` (2 where left out) is written with every default, so a run folder
    says how many untimed forwards its real runs had; the twin plays ``warmup_batches``
    instead, its rows the same, and says so."""
    plain = edgetwin.run(JETSON, overrides=SMALL, out=tmp_path / "plain")
    resolved = yaml.safe_load((tmp_path / "plain" / "scenario.resolved.yaml").read_text())
    assert resolved["real_warmups"] == 2 and plain.warnings == ()
    ten = edgetwin.run(JETSON, overrides=[*SMALL, "real_warmups=10"], out=tmp_path / "ten")
    resolved = yaml.safe_load((tmp_path / "ten" / "scenario.resolved.yaml").read_text())
    assert resolved["real_warmups"] == 10 and ten.rows == plain.rows
    assert ten.warnings == (
        "real_warmups is 10, but only a local or emu run plays it: a twin run plays "
        "warmup_batches (0)",
    )
