"""``--mode local`` for a crowd scenario: the real CROWDio foreman and a worker process per
phone on loopback (no root, no Mininet). It used to run the twin without a word, its rows
saying mode twin."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.crowd_fleet import resolve_classes
from edgetwin.emu.crowd_jobs import check_real_stages_fit, job_seed
from edgetwin.emu.crowdio.launcher import WORKER
from edgetwin.emu.crowdio.model import TINY, export_stages, make_inputs
from edgetwin.emu.crowdio.sdk import pipeline_job, submit_message
from edgetwin.emu.memory_check import interpreter
from edgetwin.errors import InputError
from edgetwin.models.strategy import CROWDIO_FOREMAN
from edgetwin.number_text import exact_text, figure_text
from edgetwin.phone_profile import load_phone_profile
from edgetwin.result_cells import read_results
from edgetwin.run_folders import LOCAL, leftover_folders
from edgetwin.scenario import load_scenario
from edgetwin.unplayed_settings import unplayed_settings
from tests.conftest import REPO

SCENARIO = REPO / "scenarios/emu_crowdio.yaml"
STREAMING = "strategies=[{name: crowdio_streaming}]"


def _pipeline_pids(under: Path) -> set[int]:
    """Processes running the foreman's or a worker's module with a folder under ``under``
    (their store, cache, logs) on their command line: this test's, not those of other
    runs on the same machine."""
    pids = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = [
                arg.decode(errors="replace")
                for arg in (entry / "cmdline").read_bytes().split(b"\0")
            ]
        except OSError:
            continue  # not a process, or gone meanwhile
        ours = any(arg.startswith(str(under)) for arg in argv)
        if ours and any(arg in (WORKER, CROWDIO_FOREMAN) for arg in argv):
            pids.add(int(entry.name))
    return pids


@pytest.mark.timeout(300)
def test_a_crowd_scenario_in_local_mode_runs_the_real_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every temporary folder of the run under tmp_path, so that its processes are known
    by their command lines (a check over every process of the machine failed when another
    run's foreman or worker started meanwhile)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            seen.update(_pipeline_pids(tmp_path))

    watcher = threading.Thread(target=watch)
    watcher.start()
    out = tmp_path / "local"
    argv = ["run", str(SCENARIO), "--mode", "local", "--out", str(out), "--set", STREAMING]
    try:
        assert main([*argv, "--quiet"]) == 0
    finally:
        done.set()
        watcher.join()
    assert len(seen) >= 2 * 4  # a foreman and 3 workers per run, recognised while they ran
    rows = edgetwin.load_results(out).rows
    # a run per swept (nominal) bandwidth, as the twin and the emulator have
    assert [(r.mode, r.strategy, r.bandwidth_mbps) for r in rows] == [
        ("local", "crowdio_streaming", 10),
        ("local", "crowdio_streaming", 100),
    ]
    for row in rows:
        assert row.status == "ok" and row.devices == 3 and row.inputs == 5, row
        assert row.cold_loads is not None and row.cold_loads >= 3  # cold caches: every stage
        assert row.bytes_moved is not None and row.bytes_moved > 0
    assert "the bandwidth is nominal" in (out / "report.html").read_text()
    assert _pipeline_pids(tmp_path) == set()  # the foreman and every worker it started are gone
    # what the sessions add to a worker (ONNX Runtime's first session: ~13 MB), not the
    # worker's process (~85 MB), which peak_rss_mb was; the twin's sessions of the same file
    worker_mb = interpreter(WORKER).bytes_for(1) / 2**20
    assert all(0 < (row.peak_session_mb or 0) < worker_mb / 2 for row in rows)
    twin = tmp_path / "twin"
    assert main(["run", str(SCENARIO), "--mode", "twin", "--out", str(twin), "--quiet"]) == 0
    crowd = load_scenario(SCENARIO).crowd
    assert crowd is not None
    cell_a_mb = crowd.job.stages[0].ram_mb  # the largest stage, held by every phone
    assert {row.peak_session_mb for row in edgetwin.load_results(twin).rows} == {cell_a_mb}


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (
            ["--set", "emulator.faults=[{kind: kill_worker, host: 1, at_s: 0.1}]"],
            "field 'emulator.faults'",
        ),
        (["--trace"], "--trace (trace=True in Python)"),
    ],
)
def test_local_mode_refuses_what_loopback_cannot_play(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    for check in ([], ["--check"]):
        out = tmp_path / "out"
        argv = ["run", str(SCENARIO), "--mode", "local", "--out", str(out), *extra, *check]
        assert main(argv) == 2
        error = capsys.readouterr().err
        assert named in error and "Traceback" not in error, error
        assert not out.exists()


def test_what_a_real_crowd_run_does_not_play_is_said() -> None:
    """A local run of crowd_city played none of its churn, its stream of jobs or its
    30 ms latency, and said nothing (one job, 139 ms, where the twin took 10-14 s)."""
    city = load_scenario(
        REPO / "scenarios/crowd_city.yaml", ["network.schedule=[{at_ms: 1000, bandwidth_mbps: 5}]"]
    )
    local = unplayed_settings(city, "local")
    churn = [f"crowd.fleet.{k}.availability is set" for k in range(3)]
    for said in (*churn, "crowd.job.interarrival", "network.latency_ms", "network.schedule"):
        assert sum(said in warning for warning in local) == 1, (said, local)
    for shaped in ("network.latency_ms", "network.schedule"):  # as a Python caller asks
        warning = next(warning for warning in local if warning.startswith(shaped))
        assert warning.endswith("only --mode emu (mode='emu' in Python) plays it"), warning
    emu = unplayed_settings(city, "emu")  # the emulator shapes the network
    assert len(emu) == 4 and not any("network." in warning for warning in emu)
    assert unplayed_settings(city, "twin") == []
    assert unplayed_settings(load_scenario(SCENARIO), "local") == []


def test_a_bandwidth_step_after_a_real_crowd_jobs_deadline_is_said() -> None:
    """The emulator runs one crowd job, which its 600 s deadline ends: a step at 600 s or
    later never played, and nothing said so (the twin plays it over the horizon)."""
    steps = (
        "network.schedule=[{at_ms: 1000, bandwidth_mbps: 5}, {at_ms: 600000, bandwidth_mbps: 2}]"
    )
    city = load_scenario(REPO / "scenarios/crowd_city.yaml", [steps])
    late = [w for w in unplayed_settings(city, "emu") if w.startswith("network.schedule")]
    assert late == [
        "network.schedule.1.at_ms is 600,000 ms, but the emulator runs one crowd job, which its "
        "600 s deadline ends: the step never plays"
    ], late
    assert unplayed_settings(city, "twin") == []


def test_too_many_stages_for_the_tiny_model_names_the_model_that_makes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said only "the tiny DistilBERT makes at most 5 stages"; the full one makes 7."""
    six = REPO / "scenarios/crowdio_6stage.yaml"
    argv = ["run", str(six), "--mode", "local", "--check", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "field 'crowd.job.stages': the tiny DistilBERT makes at most 5 stages" in error
    assert "; emulator.model: full makes up to 7" in error
    assert main([*argv, "--set", "emulator.model=full"]) == 0


def _one_class(ram_mb: float) -> str:
    """A fleet of one phone of class ``low`` (android_low) with ``ram_mb`` of RAM."""
    return f"crowd.fleet=[{{name: low, profile: android_low, count: 1, ram_mb: {ram_mb!r}}}]"


@pytest.mark.timeout(180)
def test_a_killed_run_leaves_no_foreman_or_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL of ``edgetwin run --mode local`` mid-job: the foreman and the workers exit
    (they watch their launcher: --parent-pid). They ran on for ever, the foreman serving
    its port and the workers holding their caches, as ViT ranks once did. Its folder (the
    stages, the job's folder, the caches) is named after it, a leftover once it is gone
    (the next local run removes it: tests/test_run_folders.py)."""
    out = tmp_path / "out"
    argv = ["run", str(SCENARIO), "--mode", "local", "--out", str(out), "--quiet"]
    argv += ["--set", STREAMING, "--set", "emulator.task_delay_ms=60000"]  # a job that lasts
    run = subprocess.Popen(
        [sys.executable, "-m", "edgetwin", *argv],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # the run's folders, named on its processes
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    pids = _pipeline_pids(tmp_path)
    while len(pids) < 4 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
        pids = _pipeline_pids(tmp_path)
    processes = [psutil.Process(pid) for pid in pids]
    run.kill()
    run.wait()
    assert len(processes) == 4, "a foreman and 3 workers did not start"
    _, alive = psutil.wait_procs(processes, timeout=30)
    for process in alive:
        process.kill()
    assert alive == []
    assert _pipeline_pids(tmp_path) == set()
    (left,) = tmp_path.glob("edgetwin-*-crowd*")
    assert left.name.startswith(f"edgetwin-local-{run.pid}.") and any(left.glob("crowdio-*"))
    (record,) = tmp_path.glob("edgetwin-*-elsewhere-*")  # names its staging beside --out
    (staging,) = tmp_path.glob(".out-*")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert sorted(leftover_folders(LOCAL)) == sorted([left, staging, record])


@pytest.mark.timeout(120)
def test_a_real_stage_that_fits_no_phone_class_is_refused_before_any_process_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scenario's stage sizes fit the fleet's 0.2 MB session budget, so the twin's
    check passed, but the tiny DistilBERT's first stage as exported needs a 0.278 MB
    session (2 x its ONNX blob): the one phone's worker was never given it and the job
    waited for its 600 s deadline."""
    reserved_mb = load_phone_profile("android_low").os_reserved_mb
    items = [
        _one_class(reserved_mb + 0.2),
        "crowd.job.stages.0.ram_mb=0.1",
        "crowd.job.stages.1.ram_mb=0.1",
        "crowd.job.stages.2.ram_mb=0.01",
        "~sweeps",
        STREAMING,
    ]
    sets = [arg for item in items for arg in ("--set", item)]
    out = tmp_path / "out"
    argv = ["run", str(SCENARIO), "--out", str(out), *sets]
    assert main([*argv, "--mode", "twin", "--check"]) == 0  # the scenario's sizes fit
    capsys.readouterr()
    for mode in ("local", "emu"):  # --check exports the stages too
        assert main([*argv, "--mode", mode, "--check"]) == 2
        assert "field 'crowd.job.stages.0': stage cell_a as the tiny" in capsys.readouterr().err
    assert main(["run", str(SCENARIO), "--out", str(out), "--mode", "local", "--check"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # see _pipeline_pids
    assert main([*argv, "--mode", "local"]) == 2
    error = capsys.readouterr().err
    assert "emu_crowdio.yaml: field 'crowd.job.stages.0': stage cell_a as the tiny" in error
    needs = re.search(r"needs a ([0-9.]+) MB session \(2 x its [0-9,]+-byte ONNX blob;", error)
    assert needs is not None and float(needs.group(1)) > 0.2, error
    assert "the twin reads ram_mb, 0.1 MB) and fits no phone class: the largest session" in error
    budget = f"budget is 0.2 MB (class low: {exact_text(reserved_mb + 0.2)} MB of RAM less the"
    assert f"{budget} {exact_text(reserved_mb)} MB Android keeps)" in error
    assert "Traceback" not in error, error
    assert not out.exists()
    assert _pipeline_pids(tmp_path) == set()  # no foreman, no worker started


@pytest.mark.timeout(300)
def test_a_stage_fits_a_phone_in_the_twin_and_on_a_real_worker_at_the_same_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real worker reported its budget less its whole RSS (its interpreter and ONNX
    Runtime, tens of MB) as free RAM, where the twin's phone gives a session its whole
    budget: at a 32 MB budget the twin ran the job and the real run was refused (before
    that, its worker was never given a task and the job waited for its 600 s deadline).
    Its free RAM is now its budget less what it holds above its start with no session
    (``Worker.free_ram_mb``): with the twin's stages the sessions the real ones declare,
    the job runs in both at 32 MB, and in neither below the first stage's session."""
    stages = export_stages(TINY, 3, seed=0)
    job = pipeline_job(stages, make_inputs(TINY, 1, seed=0))
    declared_mb = [stage.ram_mb for stage in submit_message(job, "job-1", 0).stages]
    sizes = [f"crowd.job.stages.{i}.ram_mb={mb!r}" for i, mb in enumerate(declared_mb)]
    reserved_mb = load_phone_profile("android_low").os_reserved_mb
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # see _pipeline_pids
    for budget_mb, runs in ((32.0, True), (0.9 * declared_mb[0], False)):
        items = (_one_class(reserved_mb + budget_mb), *sizes, "crowd.job.inputs=1", "~sweeps")
        sets = [arg for item in (*items, STREAMING) for arg in ("--set", item)]
        for mode in ("twin", "local"):
            out = tmp_path / f"{mode}-{budget_mb:g}"
            argv = ["run", str(SCENARIO), "--out", str(out), "--mode", mode, "--quiet", *sets]
            code, error = main(argv), capsys.readouterr().err
            if runs:
                assert code == 0, error
                rows = read_results(out / "results.csv")
                assert rows and all(row.ok for row in rows), (mode, rows)
            else:
                assert code == 2 and "field 'crowd.job.stages.0" in error, (mode, error)
                assert not out.exists()
    assert _pipeline_pids(tmp_path) == set()


def test_the_real_stages_are_checked_by_the_session_the_job_declares() -> None:
    """check_real_stages_fit compares what the foreman's core dispatches a stage by, the
    ram_mb its job declares (STAGE_RAM_FACTOR x the ONNX blob), with the session budgets: a
    budget of exactly that holds the stage; one with room for the blob alone does not."""
    stages = export_stages(TINY, 3, seed=0)
    job = pipeline_job(stages, make_inputs(TINY, 1, seed=0))
    declared_mb = [stage.ram_mb for stage in submit_message(job, "job-1", 0).stages]
    assert declared_mb == sorted(declared_mb, reverse=True)  # the first stage is the largest
    reserved_mb = load_phone_profile("android_low").os_reserved_mb

    def check(budget_mb: float) -> None:
        scenario = load_scenario(SCENARIO, [_one_class(reserved_mb + budget_mb)])
        assert scenario.crowd is not None
        classes = resolve_classes(scenario.crowd, SCENARIO)
        assert classes[0].session_budget_mb == budget_mb
        check_real_stages_fit(scenario.crowd, stages, classes, "tiny", SCENARIO)

    check(declared_mb[0])  # every stage fits, the first exactly
    blob_mb = len(stages[0].blob) / 2**20
    assert declared_mb[1] < 1.5 * blob_mb < declared_mb[0]
    with pytest.raises(InputError) as raised:
        check(1.5 * blob_mb)  # the blob fits, its session does not
    assert raised.value.path == str(SCENARIO) and raised.value.field == "crowd.job.stages.0"
    assert f"needs a {figure_text(declared_mb[0])} MB session" in raised.value.problem


def test_a_stage_no_class_holds_is_said_with_the_session_to_four_digits() -> None:
    """``.3g`` wrote the session of the first of two tiny stages (0.4255 MB) as 0.425 MB, a
    digit short of the reports' figures; it is said as they round it (``figure_text``)."""
    stages = export_stages(TINY, 2, seed=0)
    reserved_mb = load_phone_profile("android_low").os_reserved_mb
    two = "crowd.job.stages=[{name: cell_a, size_mb: 0.2, ram_mb: 0.1, gflops: 0.0006},"
    two += " {name: cell_b, size_mb: 0.005, ram_mb: 0.1, gflops: 0.00001}]"
    scenario = load_scenario(SCENARIO, [_one_class(reserved_mb + 0.2), two])
    assert scenario.crowd is not None
    classes = resolve_classes(scenario.crowd, SCENARIO)
    with pytest.raises(InputError) as raised:
        check_real_stages_fit(scenario.crowd, stages, classes, "tiny", SCENARIO)
    said = re.search(r"needs a ([0-9.]+) MB session \(2 x its", raised.value.problem)
    assert said is not None, raised.value.problem
    assert float(said.group(1)) == float(f"{stages[0].ram_mb:.4g}")  # four digits, not three


def test_each_repetition_of_a_real_crowd_job_has_its_own_seed() -> None:
    """Every repetition submitted the scenario's seed, so the foreman's random scheduler
    drew the same choices in each (the twin's repetitions draw from streams of their own);
    the seed of each (scenario seed, repetition) is its own and the same every time."""
    seeds = [job_seed(0, rep) for rep in range(4)]
    assert len(set(seeds)) == 4 and all(0 <= seed < 2**32 for seed in seeds)
    assert job_seed(0, 1) == seeds[1] and job_seed(1, 0) not in seeds
