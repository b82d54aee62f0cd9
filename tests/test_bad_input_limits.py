"""Bad input that crashed, hung or was accepted: output folders that cannot be replaced,
sizes past what one machine can run, empty tables and trace folders, a Dask scheduler
that is not an address, and a command stopped with SIGTERM.

Each case goes through the real command line (in-process, or a subprocess for SIGTERM)
and must exit 2 with one line naming the file and the field, leaving nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import yaml

import edgetwin
from edgetwin.cli import main
from edgetwin.emu import memory_check
from edgetwin.emu.local import check_runnable, largest_batch_memory
from edgetwin.emu.memory_check import interpreter
from edgetwin.errors import InputError, sigterm_interrupts, stop_asked
from edgetwin.models.costs import weight_bytes
from edgetwin.models.strategy import VIT_WORKER
from edgetwin.mount_points import mount_points
from edgetwin.phone_profile import load_phone_profile
from edgetwin.plan.executors import pool_size
from edgetwin.result_cells import read_results
from edgetwin.scenario import load_scenario
from edgetwin.workbench.output import output_folder
from tests.conftest import ctrl_c_reaches
from tests.test_bad_input import assert_clean_failure

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios"
SPECS = REPO / "edgetwin" / "calibration" / "specs"
TEMPLATE = REPO / "edgetwin" / "workbench" / "templates" / "scenario.yaml"


@pytest.mark.timeout(60)
def test_out_that_is_the_current_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out . --force`` was an OSError traceback that left a ``.-old-*`` folder."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(TEMPLATE, work / "s.yaml")
    monkeypatch.chdir(work)
    for out in (".", ".."):
        argv = ["run", "s.yaml", "--out", out, "--force", "--quiet"]
        assert_clean_failure(argv, capsys, tmp_path, "current folder")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["run", "plan"])
def test_out_that_holds_the_input_is_refused(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run proj/s.yaml --out proj --force`` deleted the scenario it had just read."""
    project = tmp_path / "proj"
    project.mkdir()
    if command == "run":
        shutil.copy(TEMPLATE, project / "s.yaml")
        read = project / "s.yaml"
    else:
        shutil.copy(SCENARIOS / "prism_jetson.yaml", project / "prism_jetson.yaml")
        shutil.copy(SCENARIOS / "plan_fleet.plan.yaml", project / "q.plan.yaml")
        read = project / "q.plan.yaml"
    argv = [command, str(read), "--out", str(project), "--force", "--quiet"]
    assert_clean_failure(argv, capsys, tmp_path, "holds an input", read.name)


@pytest.mark.timeout(60)
def test_published_folder_is_readable_by_others(tmp_path: Path) -> None:
    """An output folder gets the mode its files get (0o755), not mkdtemp's 0o700."""
    out = tmp_path / "out"
    assert main(["run", str(TEMPLATE), "--out", str(out), "--quiet"]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o755


@pytest.mark.timeout(30)
@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("theirs", ["folder", "file"])
def test_an_out_filled_by_another_command_meanwhile_is_kept(
    tmp_path: Path, force: bool, theirs: str
) -> None:
    """Two runs started with the same new --out: the one that publishes second is refused
    (without --force) and the first's output stays; both used to exit 0, the second
    silently replacing the first. With --force the second replaces it, as asked."""
    out = tmp_path / "out"
    with contextlib.ExitStack() as stack:
        if not force:
            stack.enter_context(pytest.raises(InputError, match="filled by another command"))
        with output_folder(out, force=force) as staging:
            (staging / "mine.txt").write_text("this run")
            if theirs == "folder":  # the other command publishes first
                out.mkdir()
                (out / "theirs.txt").write_text("the other run")
            else:
                out.write_text("the other command's file")
    if force:
        assert [p.name for p in out.iterdir()] == ["mine.txt"]
    elif theirs == "folder":
        assert [p.name for p in out.iterdir()] == ["theirs.txt"]
    else:
        assert out.read_text() == "the other command's file"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folder left


def _root_command(*argv: str) -> bool:
    """Run a command that needs root (chattr, mount); False if it cannot run here."""
    if os.geteuid() != 0 or shutil.which(argv[0]) is None:
        return False
    return subprocess.run(argv, capture_output=True).returncode == 0


@contextlib.contextmanager
def _immutable(folder: Path) -> Iterator[None]:
    """``folder`` with the immutable attribute: not renamed, not removed, even by root."""
    if not _root_command("chattr", "+i", str(folder)):
        pytest.skip("needs root and chattr on a file system with attributes")
    try:
        yield
    finally:
        _root_command("chattr", "-i", str(folder))


@contextlib.contextmanager
def _mount_point(folder: Path, kind: str = "tmpfs", root: Path | None = None) -> Iterator[None]:
    """``folder`` made a mount point: a small tmpfs mounted on it, or a new folder of the
    same file system bound onto it (``bind``: ``os.path.ismount`` does not see it). At the
    end every mount point under ``root`` (default: ``folder``'s) is unmounted: where a
    failed test moved the folder, too."""
    if kind == "bind":
        source = folder.with_name(f"{folder.name}-source")
        source.mkdir()
        mount = ["mount", "--bind", str(source), str(folder)]
    else:
        mount = ["mount", "-t", "tmpfs", "-o", "size=16m", "edgetwin-test", str(folder)]
    if not _root_command(*mount):
        pytest.skip("needs root and mount")
    try:
        yield
    finally:
        under = (root or folder.parent).resolve()
        points = [p for p in mount_points() if p.is_relative_to(under)]
        for point in sorted(points, key=lambda p: len(p.parts), reverse=True):
            _root_command("umount", str(point))


@pytest.mark.timeout(60)
def test_an_out_the_system_will_not_rename_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--force`` onto a folder that cannot be renamed (immutable; another user's in a
    sticky folder) ran, then was an OSError traceback (exit 1) that left an empty
    ``.out-old-*`` folder beside it."""
    out = tmp_path / "out"
    files = _stale_folder(out)
    with _immutable(out):
        argv = ["run", str(TEMPLATE), "--out", str(out), "--force", "--quiet"]
        assert_clean_failure(argv, capsys, tmp_path, "cannot replace it", "was not kept")
    assert {p.name: p.read_text() for p in out.iterdir()} == files


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["tmpfs", "bind"])
@pytest.mark.parametrize("force", [False, True])
def test_an_out_that_is_a_mount_point_is_refused_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], force: bool, kind: str
) -> None:
    """A mount point (a container's volume) as --out, empty or with --force, ran the whole
    sweep and then was an OSError traceback ('Device or resource busy'), exit 1, leaving
    a folder beside it. A folder of the same file system bound onto it (its name with a
    space, which /proc/self/mountinfo writes as an escape) passed the early check, ran, and
    was refused at the end ('cannot replace it: Device or resource busy')."""
    out = tmp_path / "the out"
    out.mkdir()
    with _mount_point(out, kind):
        files = _stale_folder(out) if force else {}
        argv = ["run", str(TEMPLATE), "--out", str(out), "--quiet", *["--force"] * force]
        assert_clean_failure(argv, capsys, tmp_path, "mount point", "use one in it")
        assert {p.name: p.read_text() for p in out.iterdir()} == files


@pytest.mark.timeout(60)
def test_an_out_that_holds_a_mount_point_is_refused_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--force onto a folder holding a mount point (a volume mounted into an earlier run's
    folder) ran, then deleted the mounted file system's files with the old folder, and left
    it mounted in a hidden folder beside."""
    out = tmp_path / "out"
    files = _stale_folder(out)
    (out / "data").mkdir()
    with _mount_point(out / "data", root=tmp_path):
        (out / "data" / "keep.txt").write_text("on another file system\n")
        argv = ["run", str(TEMPLATE), "--out", str(out), "--force", "--quiet"]
        assert_clean_failure(argv, capsys, tmp_path, "holds a mount point", "data")
        assert (out / "data" / "keep.txt").read_text() == "on another file system\n"
    assert {p.name: p.read_text() for p in out.iterdir() if p.is_file()} == files


@pytest.mark.timeout(60)
def test_a_plan_journals_into_a_mount_point_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan writes a new or empty --out in place (its journal), so a mount point serves;
    with --force its folder is swapped in, which a mount point refuses before the sweep
    (it was an OSError traceback after it)."""
    out = tmp_path / "out"
    out.mkdir()
    argv = ["plan", str(SCENARIOS / "plan_fleet.plan.yaml"), "--out", str(out), "--quiet"]
    # 2 of the plan's 8 boards: narrowed on purpose, no warning of the 6 left idle
    argv += ["--workers", "1", "--set", "axes.bandwidth_mbps=[100]", "--set", "axes.devices=[2]"]
    with _mount_point(out):
        assert main(argv) == 0
        assert (out / "answer.json").is_file()
        assert_clean_failure([*argv, "--force"], capsys, tmp_path, "mount point")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "argv",
    [
        ["run", str(TEMPLATE), "--quiet"],
        ["plan", str(SCENARIOS / "plan_fleet.plan.yaml"), "--quiet", "--workers", "1"],
        ["calibrate", str(SPECS / "jetson_orin_nano.yaml")],
    ],
    ids=["run", "plan", "calibrate"],
)
def test_an_out_under_a_file_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """--out under a file said 'File exists' (run, calibrate) or 'Not a directory' (plan),
    not which file blocks the way."""
    blocking = tmp_path / "notes.txt"
    blocking.write_text("a file\n")
    out = blocking / "sub" / "out"
    assert_clean_failure([*argv, "--out", str(out)], capsys, tmp_path, f"{blocking} is a file")


@pytest.mark.timeout(60)
def test_an_out_in_a_folder_that_cannot_be_written_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error named the hidden staging folder the user never asked for."""
    parent = tmp_path / "locked"
    parent.mkdir()
    with _immutable(parent):
        argv = ["run", str(TEMPLATE), "--out", str(parent / "out"), "--quiet"]
        line = assert_clean_failure(argv, capsys, tmp_path, "cannot create the output folder")
    assert ".out-" not in line and line.endswith("Operation not permitted"), line


def _stale_folder(out: Path) -> dict[str, str]:
    """A folder an earlier run left: results, a trace and its provenance record."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"results.csv": "scenario,old\n", "trace.json": "[]\n", "provenance.json": "{}\n"}
    for name, text in files.items():
        (out / name).write_text(text)
    return files


@pytest.mark.parametrize(
    ("scenario", "item", "expect"),
    [
        ("crowd_city", "crowd.fleet_size=10000000", ("'crowd.fleet_size'", "less than or equal")),
        ("crowd_city", "crowd.fleet.0.share=null", ("field 'crowd.fleet.0'", "exactly one")),
        ("crowd_city", "crowd.job.inputs=1000000", ("'crowd.job.inputs'", "less than or equal")),
        ("crowd_city", "crowd.horizon_s=1e9", ("field 'crowd.horizon_s'", "less than or equal")),
        (
            "crowd_city",
            "crowd.job.interarrival={kind: exponential, mean_s: 0.001}",
            ("field 'crowd'", "brings 86,400,000 jobs in horizon_s (at most 100,000)"),
        ),
        (
            "crowd_city",
            "crowd.fleet.0={name: low, profile: android_low, count: 1000000}",
            ("field 'crowd'", "the fleet has 1,001,000 phones (at most 1,000,000)"),
        ),
        (
            "crowd_city",
            "crowd.fleet.1.availability={up: {kind: constant, value_s: 0.001}, "
            "down: {kind: exponential, mean_s: 0.001}}",
            (
                "field 'crowd.fleet.1.availability'",
                "come back 17,400,0",  # and the other classes' few thousand
                "times in horizon_s + drain_s (at most 10,000,000; this class's 17,400,000,000)",
            ),
        ),
        (
            "prism_jetson",
            "devices.0.count=10000000",
            ("'devices.0.count'", "less than or equal to 1,024"),
        ),
        (
            "prism_jetson",
            "repetitions=100000000",
            ("'repetitions'", "less than or equal to 10,000"),
        ),
    ],
    ids=[
        "fleet",
        "share",
        "inputs",
        "horizon",
        "interarrival",
        "phones",
        "churn",
        "devices",
        "repetitions",
    ],
)
@pytest.mark.timeout(60)
def test_more_than_one_machine_runs(
    scenario: str,
    item: str,
    expect: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each ran until killed: 10^7 phones or devices hung building the fleet, a job every
    millisecond for a day, phones away and back every 2 ms for a day, 10^8 repetitions. The
    counts are written whole with separators (``g`` wrote 86,400,000 jobs ``8.64e+07``)."""
    argv = ["run", str(SCENARIOS / f"{scenario}.yaml"), "--out", str(tmp_path / "out")]
    assert_clean_failure([*argv, "--set", item], capsys, tmp_path, *expect)


@pytest.mark.parametrize(
    ("scenario", "items", "field"),
    [
        ("prism_jetson", ["model.tokens=1000000000000000"], "model.tokens"),
        (
            "adaptive_llm",
            ["model.max_positions=1000000000000000", "sweeps.0.prompt_tokens=[100000000000000]"],
            "model.max_positions",
        ),
    ],
    ids=["encoder_tokens", "decoder_positions"],
)
@pytest.mark.timeout(60)
def test_a_sequence_longer_than_any_model_takes(
    scenario: str, items: list[str], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """10^15 tokens (a decoder's positions, with a prompt of 10^14 split by Prism's CR)
    filled memory with the layouts' rows and segments until a MemoryError traceback."""
    argv = ["run", str(SCENARIOS / f"{scenario}.yaml"), "--out", str(tmp_path / "out")]
    for item in items:
        argv += ["--set", item]
    expect = (f"field '{field}'", "less than or equal to 16,777,216")
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
def test_compare_refuses_its_out_before_comparing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compare A B --out A`` printed its whole summary, then refused."""
    run = tmp_path / "run"
    assert main(["run", str(TEMPLATE), "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    argv = ["compare", str(run), str(run), "--out", str(run), "--force"]
    code = main(argv)
    printed = capsys.readouterr()
    assert code == 2 and "holds an input" in printed.err
    assert printed.out == ""


@pytest.mark.timeout(60)
def test_empty_results_table_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 0-byte results.csv (no header) is named as bad input by report and compare."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.csv").write_text("")
    for argv in (["report", str(run)], ["compare", str(run), str(run)]):
        assert_clean_failure(argv, capsys, tmp_path, "results.csv", "no such column")


@pytest.mark.timeout(60)
def test_empty_trace_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A traces spec naming a folder without trace files wrote the base profile back."""
    raw = yaml.safe_load((SPECS / "h200_netns.yaml").read_text())
    raw["base"] = str((SPECS / raw["base"]).resolve())
    (tmp_path / "traces").mkdir()
    raw["traces"] = str(tmp_path / "traces")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profile.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, "no trace file")


def _affinity_file(tmp_path: Path, **changes: object) -> Path:
    shutil.copy(SCENARIOS / "affinity_small.yaml", tmp_path / "affinity_small.yaml")
    raw = yaml.safe_load((SCENARIOS / "affinity_small.eval.yaml").read_text())
    raw.update(changes)
    path = tmp_path / "a.eval.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.timeout(60)
def test_affinity_needs_a_scheduler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _affinity_file(tmp_path, schedulers=[])
    argv = ["evaluate-affinity", str(path), "--out", str(tmp_path / "out"), "--quiet"]
    assert_clean_failure(argv, capsys, tmp_path, "field 'schedulers'")


@pytest.mark.timeout(60)
def test_affinity_instance_too_big_for_the_optimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job of 1000 inputs was a RecursionError in the branch and bound."""
    path = _affinity_file(tmp_path, instances=[{"name": "big", "set": ["crowd.job.inputs=1000"]}])
    argv = ["evaluate-affinity", str(path), "--out", str(tmp_path / "out"), "--quiet"]
    assert_clean_failure(argv, capsys, tmp_path, "field 'instances.0'", "tasks")


@pytest.mark.timeout(60)
def test_plan_scheduler_that_is_not_an_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ValueError traceback, after the sweep's journal was already started."""
    pytest.importorskip("distributed")
    argv = ["plan", str(SCENARIOS / "plan_fleet.plan.yaml"), "--out", str(tmp_path / "out")]
    argv += ["--quiet", "--scheduler", "garbage"]
    assert_clean_failure(argv, capsys, tmp_path, "--scheduler", "not a scheduler address")


def test_workers_with_a_scheduler_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--workers`` was ignored without a word when a Dask scheduler was named."""
    argv = ["plan", str(SCENARIOS / "plan_fleet.plan.yaml"), "--out", str(tmp_path / "out")]
    argv += ["--quiet", "--scheduler", "tcp://127.0.0.1:1", "--workers", "4"]
    assert_clean_failure(argv, capsys, tmp_path, "--workers", "cluster's workers run the sweep")


def test_a_pool_starts_no_more_processes_than_tasks() -> None:
    """``--workers 100000`` forked 100,000 processes for a sweep of nine tasks."""
    assert pool_size(100_000, 9) == 9
    assert pool_size(4, 9) == 4
    assert pool_size(4, 0) == 1


@pytest.mark.timeout(120)
def test_sigterm_removes_the_staging_folder(tmp_path: Path) -> None:
    """Only the emulator turned SIGTERM into a clean stop; a killed twin run left its
    ``.out-*`` staging folder behind."""
    argv = [sys.executable, "-m", "edgetwin", "run", str(SCENARIOS / "crowd_city.yaml")]
    argv += ["--out", str(tmp_path / "out"), "--quiet"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start = time.monotonic()
    while not (staging := list(tmp_path.glob(".out-*"))) and proc.poll() is None:
        assert time.monotonic() < start + 60, "no staging folder appeared"
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be stopped"
    os.kill(proc.pid, signal.SIGTERM)
    sent_s = time.monotonic() - start
    out, err = proc.communicate(timeout=60)
    # what to look at if it ever fails again (once, in a full suite beside a busy loop)
    seen = f"signal sent {sent_s:.2f} s after start, staging {staging}; stdout {out!r}"
    assert proc.returncode == 128 + signal.SIGTERM, f"{seen}; stderr {err!r}"
    assert "interrupted; no output was published" in err
    assert list(tmp_path.iterdir()) == []


# Runs ``python -m edgetwin ARGS`` with the import of edgetwin.cli held (a file says when):
# a stop during start-up, which takes most of a second, is sent there, not by the clock.
_HELD_START = """
import importlib.abc, pathlib, runpy, sys, time
class Hold(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "edgetwin.cli":
            pathlib.Path(sys.argv.pop(1)).touch()
            time.sleep(60)
sys.meta_path.insert(0, Hold())
runpy.run_module("edgetwin", run_name="__main__", alter_sys=True)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_while_the_command_starts(tmp_path: Path, stop: signal.Signals) -> None:
    """Ctrl-C while the command line's modules were imported was a traceback of the
    import, SIGTERM a silent death; both are now the one line of a stop, and its exit
    status: 128 + the signal's number."""
    held = tmp_path / "held"
    argv = [sys.executable, "-c", _HELD_START, str(held), "run", str(TEMPLATE)]
    argv += ["--out", str(tmp_path / "out")]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches
    )
    while not held.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + stop, err
    assert err == "edgetwin: interrupted while starting; nothing was written\n"
    assert [p.name for p in tmp_path.iterdir()] == ["held"]


def test_the_edgetwin_command_starts_where_a_stop_is_caught() -> None:
    """The installed ``edgetwin`` script imports the command line inside the handler."""
    with (REPO / "pyproject.toml").open("rb") as handle:
        scripts = tomllib.load(handle)["project"]["scripts"]
    assert scripts["edgetwin"] == "edgetwin.__main__:main"


@pytest.mark.timeout(60)
def test_the_command_leaves_its_objects_to_the_exit_not_to_the_collector() -> None:
    """A 300,000-phone crowd run's objects took the collector's last pass 20 s after the
    command ended (stopped or done): the command freezes what it made before it exits."""
    script = (
        "import gc, sys; from edgetwin.__main__ import main\n"
        "sys.argv = ['edgetwin', 'run', 'no-such.yaml', '--out', 'no-such-folder']\n"
        "before = gc.get_freeze_count(); code = main()\n"
        "print(code, before, gc.get_freeze_count() > 1000)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["2", "0", "True"], done.stderr  # the command's own code


@pytest.mark.timeout(30)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_stop_that_a_finalizer_swallowed_publishes_nothing(tmp_path: Path) -> None:
    """A SIGTERM handled while a dropped generator's ``finally`` runs raises there, where
    Python prints "Exception ignored" and carries on (the crowd twin drops its phones'
    suspended processes at the end of a run): the run went on and published. A stop asked
    for now publishes nothing, and the next command starts without one."""

    def suspended() -> Iterator[None]:
        try:
            yield
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs in here, in the finalizer

    out = tmp_path / "out"
    with sigterm_interrupts(), pytest.raises(KeyboardInterrupt), output_folder(out) as staging:
        dropped = suspended()
        next(dropped)
        del dropped  # its finally runs now, and its KeyboardInterrupt is lost
        assert stop_asked()
        (staging / "results.csv").write_text("finished anyway\n")
    assert list(tmp_path.iterdir()) == []
    assert not stop_asked()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("spec", "key"),
    [("android_crowdio", "reference"), ("h200_loopback", "traces"), ("h200_netns", "base")],
)
def test_a_file_a_spec_names_that_is_missing(
    spec: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error named the missing file but neither the spec nor its field."""
    raw = yaml.safe_load((SPECS / f"{spec}.yaml").read_text())
    for name in ("reference", "scenario", "traces", "base"):
        if isinstance(raw.get(name), str) and (SPECS / raw[name]).exists():
            raw[name] = str((SPECS / raw[name]).resolve())
    raw[key] = "nowhere/x"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    argv = ["calibrate", str(path), "--out", str(tmp_path / "profile.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, f"spec.yaml: field '{key}'")


@pytest.mark.timeout(60)
def test_a_reference_table_without_a_key_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reported as ``field 'line 2': cannot read row: 'strategy'``; now the column."""
    raw = yaml.safe_load((SPECS / "jetson_orin_nano.yaml").read_text())
    shipped = (SPECS / raw["reference"]).read_text().splitlines()
    reference = tmp_path / "measured.csv"
    reference.write_text("\n".join(line.split(",", 1)[1] for line in shipped) + "\n")
    raw["reference"] = str(reference)
    raw["scenario"] = str((SPECS / raw["scenario"]).resolve())
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profile.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, "measured.csv: field 'strategy'", "missing column")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["run", "compare", "calibrate"])
def test_a_measured_table_s_results_columns_read_as_in_results_csv(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CR of 'abc' in a measured table went through a run's reference, compare and
    calibrate unread (report refuses it in results.csv): they read its key and metric
    columns only."""
    raw = yaml.safe_load((SPECS / "jetson_orin_nano.yaml").read_text())
    table = tmp_path / "measured.csv"
    table.write_text((SPECS / raw["reference"]).read_text().replace(",9.9,10,", ",abc,10,", 1))
    if command == "run":
        argv = ["run", str(SCENARIOS / "prism_jetson.yaml"), "--out", str(tmp_path / "out")]
        argv += ["--set", f"reference={table}"]
    elif command == "compare":
        assert main(["run", str(TEMPLATE), "--out", str(tmp_path / "twin"), "--quiet"]) == 0
        capsys.readouterr()
        argv = ["compare", str(tmp_path / "twin"), str(table), "--out", str(tmp_path / "out")]
    else:
        raw["reference"], raw["scenario"] = str(table), str(SCENARIOS / "prism_jetson.yaml")
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(raw))
        argv = ["calibrate", str(spec), "--out", str(tmp_path / "profile.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, "measured.csv", "'cr'", "'abc' is not a number")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("entry", "expect"),
    [
        ("crowd.job.inputs=-1", ("field 'instances.0'", "scenario field 'crowd.job.inputs'")),
        ("no-value", ("field 'instances.0.set.0'", "expected key=value")),
    ],
    ids=["bad-value", "malformed"],
)
def test_an_affinity_instance_whose_set_is_bad(
    entry: str, expect: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The instance's mistake was blamed on the (valid) base scenario file."""
    path = _affinity_file(tmp_path, instances=[{"name": "bad", "set": [entry]}])
    argv = ["evaluate-affinity", str(path), "--out", str(tmp_path / "out"), "--quiet"]
    assert_clean_failure(argv, capsys, tmp_path, "a.eval.yaml", *expect)


@pytest.mark.timeout(60)
def test_validate_refuses_a_full_out_before_refitting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate refitted for seconds before it said that --out was not empty."""

    def refit(*args: object) -> None:
        raise AssertionError("refitted before checking --out")

    monkeypatch.setattr("edgetwin.calibration.trace_holdout.leave_one_out", refit)
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("an earlier run\n")
    argv = ["validate", str(SPECS / "h200_loopback.yaml"), "--by", "batch", "--out", str(out)]
    assert_clean_failure(argv, capsys, tmp_path, "--out (out= in Python) is not empty")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("blocked", "argv_tail"),
    [("figures", ["--static", "svg"]), ("report.html", [])],
    ids=["figures-is-a-file", "page-is-a-folder"],
)
def test_report_into_a_path_of_the_wrong_kind(
    blocked: str, argv_tail: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tracebacks from shutil.rmtree and os.replace; now named, and nothing rewritten."""
    run = tmp_path / "run"
    assert main(["run", str(TEMPLATE), "--out", str(run), "--quiet"]) == 0
    (run / "report.html").unlink()
    if blocked == "figures":
        (run / "figures").write_text("not a folder\n")
    else:
        (run / "report.html").mkdir()
    capsys.readouterr()
    assert_clean_failure(["report", str(run), *argv_tail], capsys, tmp_path, blocked, "exists")


@pytest.mark.timeout(60)
def test_more_segments_than_rows_run_as_every_row(tmp_path: Path) -> None:
    """``segments: [100000000]`` wrote CR 0 (the run then could not read its own table):
    L is capped at a partition's rows, 99 of ViT-B/16's 197 tokens on two boards."""
    rows = []
    for segments in (99, 100_000_000):
        out = tmp_path / f"L{segments}"
        argv = ["run", str(SCENARIOS / "prism_jetson.yaml"), "--out", str(out), "--quiet"]
        argv += ["--set", f"strategies=[{{name: prism, segments: [{segments}]}}]"]
        assert main([*argv, "--set", "sweeps=[{batch: [1]}]"]) == 0
        rows.append(read_results(out / "results.csv"))
    assert rows[0] == rows[1]
    assert [(r.segments, r.cr) for r in rows[0]] == [(99, 0.99)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("item", "field", "problem"),
    [
        ("emulator.cpu_cores_fastest=0.015", "emulator.cpu_cores_fastest", "0.00375 cores"),
        ("crowd.fleet.0.ram_mb=1", "crowd.fleet.0.ram_mb", "leaves the app no memory"),
    ],
    ids=["cpu-quota", "no-session-budget"],
)
def test_a_phone_host_the_emulator_cannot_give(item: str, field: str, problem: str) -> None:
    """Mininet turned a quota under 0.01 core into 0.01 with an error line and ran; a phone
    with less RAM than Android keeps got a 0 MB memory group, which killed iperf3."""
    from edgetwin.emu.mininet.crowd import check_crowd_emulatable

    path = SCENARIOS / "emu_crowdio.yaml"
    with pytest.raises(InputError, match=problem) as raised:
        check_crowd_emulatable(load_scenario(path, [item]), path)
    assert raised.value.field == field


@pytest.mark.timeout(60)
def test_a_phone_hosts_quota_is_said_without_an_exponent(tmp_path: Path) -> None:
    """``.3g`` said a class at a thousandth of the fastest's GFLOPS would get ``1e-05
    cores``; it is written as the reports write a figure."""
    from edgetwin.emu.mininet.crowd import check_crowd_emulatable

    shipped = (REPO / "edgetwin/calibration/profiles/android_low.yaml").read_text()
    slow = tmp_path / "slow.yaml"
    slow.write_text(re.sub(r"(?m)^cpu_gflops: .*$", "cpu_gflops: 0.016", shipped))
    path = SCENARIOS / "emu_crowdio.yaml"
    items = [f"crowd.fleet.0.profile={slow}", "emulator.cpu_cores_fastest=0.01"]
    with pytest.raises(InputError) as raised:
        check_crowd_emulatable(load_scenario(path, items), path)
    assert raised.value.field == "emulator.cpu_cores_fastest"
    assert "class low would get 0.00001 cores (at least 0.01: " in raised.value.problem


@pytest.mark.timeout(60)
def test_a_phone_with_no_memory_after_android_s_is_refused_in_the_twin_too(
    tmp_path: Path,
) -> None:
    """The emulator refused a class's RAM at or under what Android keeps; the twin ran
    it (its phones never took a task), and a profile could say so itself."""
    path = SCENARIOS / "crowdio_android.yaml"
    with pytest.raises(InputError, match="1 MB leaves the app no memory") as raised:
        edgetwin.run(path, overrides=["crowd.fleet.0.ram_mb=1"])
    assert (raised.value.path, raised.value.field) == (str(path), "crowd.fleet.0.ram_mb")
    shipped = (REPO / "edgetwin/calibration/profiles/android_low.yaml").read_text()
    profile = tmp_path / "tiny.yaml"
    profile.write_text(re.sub(r"(?m)^ram_mb: .*$", "ram_mb: 1000", shipped))
    with pytest.raises(InputError, match="is all of ram_mb") as raised:
        load_phone_profile(str(profile))
    assert (raised.value.path, raised.value.field) == (str(profile), "os_reserved_mb")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["emu", "local"])
def test_the_real_pipeline_refuses_a_stage_no_phone_class_holds(mode: str) -> None:
    """The emulator's and --mode local's set-up check the scenario's stages against the
    fleet as the twin's does (the job was dispatched and ended unfinished)."""
    from edgetwin.emu.crowd_local import check_crowd_local
    from edgetwin.emu.mininet.crowd import check_crowd_emulatable

    check = check_crowd_emulatable if mode == "emu" else partial(check_crowd_local, machine=False)
    path = SCENARIOS / "emu_crowdio.yaml"
    items = ["crowd.job.stages.1.ram_mb=3000"]  # only the high class (4608 MB) holds it
    check(load_scenario(path, items), path)
    items.append("crowd.fleet.2.profile=android_mid")  # 2560 MB
    with pytest.raises(InputError, match="largest session budget is 2,560 MB") as raised:
        check(load_scenario(path, items), path)
    assert raised.value.field == "crowd.job.stages.1.ram_mb"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("scenario", "items"),
    [
        ("llm_smoke", ["model.layers=2000"]),
        ("emu_smoke", ["model.width=24576", "model.heads=12"]),
    ],
    ids=["decoder", "vit"],
)
def test_real_ranks_too_big_for_this_machine(
    scenario: str, items: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each rank builds the whole model: these ran until the kernel's OOM killer took a
    rank ("rank 0 was killed by SIGKILL") or another process of the machine."""
    argv = ["run", str(SCENARIOS / f"{scenario}.yaml"), "--mode", "local"]
    argv += ["--out", str(tmp_path / "out"), *(a for item in items for a in ("--set", item))]
    assert_clean_failure(argv, capsys, tmp_path, "field 'model'", "GiB is available")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scenario", ["llm_smoke", "emu_smoke"], ids=["decoder", "vit"])
def test_a_batch_too_big_for_this_machine_names_the_batch(
    scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch of a million: its weights fit, but rank 0 could not hold its input images (a
    ViT) or KV cache (a decoder); the ranks started, failed to allocate, and the run exited
    1 with a rank's traceback."""
    argv = ["run", str(SCENARIOS / f"{scenario}.yaml"), "--mode", "local"]
    argv += ["--out", str(tmp_path / "out")]
    argv += ["--set", "sweeps=[{batch: [2]}, {batch: [1, 1000000]}]"]
    expect = ("field 'sweeps.1.batch'", "batch 1000000", "GiB is available")
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
def test_ranks_count_their_interpreters_as_well_as_the_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rank is an interpreter with torch before it builds the model: many ranks of a
    small model need more than their weights (a run of 100 ranks passed the check on
    weights alone, then met the OOM killer)."""
    path = SCENARIOS / "emu_smoke.yaml"
    items = ["model.blocks=1", "devices.0.count=8", "sweeps=[{devices: [8], batch: [1]}]"]
    scenario = load_scenario(path, items)
    weights = weight_bytes(scenario.encoder)
    rank = interpreter(VIT_WORKER)
    assert rank.own_bytes > weights  # torch's heap outweighs one block of ViT-B
    need = int(8 * (weights + rank.own_bytes) + rank.files_bytes)  # files mapped once
    monkeypatch.setattr(memory_check, "available_bytes", lambda: need - 1)
    with pytest.raises(InputError, match="on interpreters of") as raised:
        check_runnable(scenario, path)
    assert raised.value.field == "model"
    monkeypatch.setattr(memory_check, "available_bytes", lambda: need)
    with pytest.raises(InputError, match="batch 1") as raised:  # its activations on top
        check_runnable(scenario, path)
    assert raised.value.field == "sweeps.0.batch"
    batch_bytes = int(largest_batch_memory(scenario).activation_bytes)
    monkeypatch.setattr(memory_check, "available_bytes", lambda: need + batch_bytes)
    check_runnable(scenario, path)


@pytest.mark.timeout(60)
def test_a_decoder_trace_is_refused_naming_the_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real decoder writes no profiler trace: refused before any rank starts, naming
    the scenario (it named "<input>")."""
    argv = ["run", str(SCENARIOS / "llm_smoke.yaml"), "--mode", "local", "--trace"]
    argv += ["--out", str(tmp_path / "out")]
    for check in ([], ["--check"]):  # --check said "ok"
        expect = ("llm_smoke.yaml: --trace (trace=True in Python)", "no profiler")
        assert_clean_failure([*argv, *check], capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
def test_a_seed_is_one_32_bit_word(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """numpy splits a larger seed into several words, and the crowd twin's streams, keyed by
    entropy lists of different lengths, could then repeat another seed's: such a seed is
    refused, in a scenario and in a calibration spec, and the largest one is taken."""
    scenario = str(REPO / "scenarios/prism_jetson.yaml")
    assert main(["run", scenario, "--check", "--seed", str(2**32 - 1)]) == 0
    assert main(["run", scenario, "--check", "--seed", str(2**32)]) == 2
    assert "field 'seed'" in capsys.readouterr().err
    spec = yaml.safe_load((REPO / "edgetwin/calibration/specs/h200_loopback.yaml").read_text())
    spec["seed"] = 2**32
    spec["traces"] = str(REPO / "edgetwin/calibration/specs" / spec["traces"])
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["calibrate", str(path), "--out", str(tmp_path / "p.yaml")]) == 2
    assert "field 'seed'" in capsys.readouterr().err
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stopped_run_exits_128_plus_the_signal_and_keeps_the_old_folder(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """SIGTERM exited 130, Ctrl-C's status (128 + SIGINT), where the convention is 128 + the
    signal's number (143): a script or a scheduler could not tell them apart. A run with
    --force over a finished folder, stopped after its first step, leaves that folder as it
    was, says one line and leaves no staging folder."""
    out = tmp_path / "out"
    edgetwin.run(SCENARIOS / "prism_jetson.yaml", overrides=["sweeps=[{batch: [1]}]"], out=out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    argv = [sys.executable, "-m", "edgetwin", "run", str(SCENARIOS / "prism_jetson.yaml")]
    argv += ["--out", str(out), "--force", "--set", "repetitions=200"]  # 13,000 steps
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # a line per step: stderr is no terminal
    assert first.startswith("twin prism_jetson: 1/13,000 "), first
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + stop, err
    assert err.splitlines()[-1] == "edgetwin: interrupted; no output was published", err
    assert "Traceback" not in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
