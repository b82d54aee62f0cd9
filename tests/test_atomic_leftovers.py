"""Staging folders left by a killed command: a run SIGKILLed while its output was staged
left its hidden ``.out-*`` folder beside ``--out`` for good (and ``init``, ``calibrate``
and every other atomic file write its temp file). The next command that stages output into
the same folder removes them, and only them: a live writer's staging folder (another
command's, this process's own) and anything that is not a stale staging folder of edgetwin
are left alone.

The commands are real (subprocesses running ``edgetwin.cli.main``), held where they put
their output in place (the test sends a line to go on) or in a plan's pool workers, and
killed there with SIGKILL; nothing waits on the clock.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pytest

import edgetwin
from edgetwin.atomic import remove_stale_staging, write_text_atomic
from edgetwin.cli import main
from edgetwin.workbench.output import output_folder

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "edgetwin" / "workbench" / "templates" / "scenario.yaml"
SCENARIOS = REPO / "scenarios"

# Runs edgetwin's command line (ARGS) held where its output is put in place of OUT (the
# rename of a staged folder onto it, the replace of a temp file): it writes the source's
# path to TOLD and reads a line from stdin before it goes on.
_HELD = """
import os, pathlib, sys
told, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def held(rename):
    def renamed(source, target):
        if pathlib.Path(target) == out:
            told.with_name("telling").write_text(str(source))
            os.rename(told.with_name("telling"), told)
            sys.stdin.readline()
        return rename(source, target)
    return renamed
pathlib.Path.rename = held(pathlib.Path.rename)
os.replace = held(os.replace)
from edgetwin.cli import main
sys.exit(main(sys.argv[3:]))
"""


@contextmanager
def _held(tmp_path: Path, out: Path, *argv: str) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """``edgetwin ARGV`` in a subprocess, held just before it puts its output in place of
    ``out``; the process and the staged folder or file it was about to put there."""
    told = tmp_path / "told"
    command = [sys.executable, "-c", _HELD, str(told), str(out), *argv]
    pipe = subprocess.PIPE
    proc = subprocess.Popen(command, cwd=REPO, text=True, stdin=pipe, stdout=pipe, stderr=pipe)
    try:
        while not told.exists():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        yield proc, Path(told.read_text())
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _killed(proc: subprocess.Popen[str]) -> None:
    proc.kill()  # SIGKILL: no handler, no finally runs
    proc.wait()


def _run(out: Path, *more: str) -> list[str]:
    return ["run", str(TEMPLATE), "--out", str(out), "--quiet", *more]


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.timeout(120)
def test_a_killed_run_s_staging_folder_is_removed_by_the_next_run(tmp_path: Path) -> None:
    work = tmp_path / "work"
    with _held(tmp_path, work / "out", *_run(work / "out")) as (proc, staged):
        _killed(proc)
    leftover = staged.parent
    assert leftover.parent == work and leftover.name.startswith(".out-")
    assert (staged / "results.csv").is_file()  # the whole output, never published
    assert main(_run(work / "other")) == 0
    assert _names(work) == ["other"]


@pytest.mark.timeout(120)
def test_a_run_killed_between_its_two_renames_gets_the_old_folder_back(tmp_path: Path) -> None:
    """--force onto an earlier run's folder sets it aside, then renames the new one in; a
    run killed in between left no --out at all, the old output inside a hidden folder."""
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "out" / "results.csv").write_text("the earlier run\n")
    (work / "out" / "provenance.json").write_text("{}\n")
    with _held(tmp_path, work / "out", *_run(work / "out", "--force")) as (proc, _):
        _killed(proc)
    assert not (work / "out").exists()
    assert main(_run(work / "other")) == 0
    assert _names(work) == ["other", "out"]
    assert _names(work / "out") == ["provenance.json", "results.csv"]
    assert (work / "out" / "results.csv").read_text() == "the earlier run\n"


@pytest.mark.timeout(120)
def test_a_live_run_s_staging_folder_is_left_alone(tmp_path: Path) -> None:
    """Another command writing into the same folder now keeps its staging folder, and
    publishes it when it goes on."""
    work = tmp_path / "work"
    with _held(tmp_path, work / "out", *_run(work / "out")) as (proc, staged):
        files = _names(staged)
        assert main(_run(work / "other")) == 0
        assert remove_stale_staging(work) == []
        assert _names(staged) == files
        _, err = proc.communicate("go on\n")
        assert proc.returncode == 0, err
    assert _names(work) == ["other", "out"]
    assert _names(work / "out") == files


def _killed_runs(tmp_path: Path, *outs: Path) -> None:
    """A run onto each of ``outs``, all held where they publish at once (each would remove
    an earlier one's leftover), then killed: their staging folders left."""
    with ExitStack() as stack:
        procs = []
        for k, out in enumerate(outs):
            (tmp_path / f"held{k}").mkdir(parents=True)
            procs.append(stack.enter_context(_held(tmp_path / f"held{k}", out, *_run(out)))[0])
        for proc in procs:
            _killed(proc)


@pytest.mark.timeout(180)
def test_the_next_command_says_on_stderr_what_it_removed(tmp_path: Path) -> None:
    """The next command removed what killed ones left without a word: it says so on stderr,
    once, with --quiet too (which stops the progress, not the warnings and notices)."""
    work = tmp_path / "work"
    _killed_runs(tmp_path, work / "a", work / "b")
    assert len(list(work.glob(".*.edgetwin"))) == 2
    command = [sys.executable, "-m", "edgetwin", *_run(work / "next")]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = f"edgetwin: removed 2 folders left by killed edgetwin commands in {work}"
    assert done.stderr.splitlines().count(said) == 1, done.stderr
    assert _names(work) == ["next"]
    command = [sys.executable, "-m", "edgetwin", *_run(work / "again")]
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "removed" not in again.stderr  # nothing left to remove, nothing said


# An API caller's script: edgetwin.run of SCENARIO into OUT, logging left as Python sets it.
_API_RUN = """
import sys, edgetwin
edgetwin.run(sys.argv[1], out=sys.argv[2])
"""


@pytest.mark.timeout(180)
def test_an_api_caller_is_told_what_was_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The API logs it (logger edgetwin.atomic, a warning): Python shows it on stderr to a
    caller who set up no logging, and a caller's own handlers get it."""
    work = tmp_path / "work"
    _killed_runs(tmp_path, work / "a")
    command = [sys.executable, "-c", _API_RUN, str(TEMPLATE), str(work / "next")]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = f"removed 1 folder left by a killed edgetwin command in {work}"
    assert done.stderr.splitlines() == [said], done.stderr
    _killed_runs(tmp_path / "second", work / "b")
    with caplog.at_level(logging.WARNING, logger="edgetwin"):
        edgetwin.run(TEMPLATE, out=work / "last")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("edgetwin.atomic", said)]
    assert _names(work) == ["last", "next"]


# Runs edgetwin's command line (ARGS) with every chunk of a plan's sweep held in its pool
# worker, which writes a file named by its pid into TOLD first.
_HELD_SWEEP = """
import os, pathlib, signal, sys
import edgetwin.plan.executors as executors
told = pathlib.Path(sys.argv[1])
def held_chunk(payload, chunk):
    (told / str(os.getpid())).write_text("")
    signal.pause()
executors.run_chunk = held_chunk
from edgetwin.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    """``pid`` is a process that has not ended (a zombie, ended and not yet reaped by
    whoever adopted it, has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.timeout(120)
def test_a_killed_plan_s_pool_workers_exit_and_leave_its_staging_folder(
    tmp_path: Path,
) -> None:
    """A plan SIGKILLed mid-sweep left its pool workers blocked for good (one per core,
    each holding a copy of the staging folder's lock, so it was never removed either):
    they now exit once their parent is gone, and the next run removes the folder."""
    work, told = tmp_path / "work", tmp_path / "told"
    (work / "out").mkdir(parents=True)
    told.mkdir()
    argv = ["plan", str(SCENARIOS / "plan_fleet.plan.yaml"), "--out", str(work / "out")]
    argv += ["--force", "--quiet", "--workers", "2"]
    proc = subprocess.Popen([sys.executable, "-c", _HELD_SWEEP, str(told), *argv], cwd=REPO)
    workers: list[int] = []
    try:
        while not any(told.iterdir()):
            assert proc.poll() is None
            time.sleep(0.02)
        workers = _children(proc.pid)
        assert workers and all(_running(pid) for pid in workers)
        _killed(proc)
        while any(_running(pid) for pid in workers):  # the test's time limit bounds this
            time.sleep(0.05)
        assert len(list(work.glob(".out-*"))) == 1
        assert main(_run(work / "other")) == 0
        assert _names(work) == ["other", "out"]
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in workers:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(60)
def test_a_killed_atomic_file_write_s_temp_file_is_removed_by_the_next(tmp_path: Path) -> None:
    """A file written atomically (``init``, a profile, every file of a run) goes to a temp
    file in a staging folder beside it first: the same rule removes it."""
    work = tmp_path / "work"
    work.mkdir()
    with _held(tmp_path, work / "s.yaml", "init", "scenario", str(work / "s.yaml")) as held:
        _killed(held[0])
    temp = held[1]
    assert temp.parent.parent == work and temp.parent.name.startswith(".s.yaml-")
    assert temp.is_file()
    write_text_atomic(work / "notes.txt", "mine\n")
    assert _names(work) == ["notes.txt"]


@pytest.mark.timeout(60)
def test_this_process_s_own_staging_folder_is_live(tmp_path: Path) -> None:
    """Two output folders of one process, the second made while the first is staged."""
    with output_folder(tmp_path / "a") as first:
        (first / "a.txt").write_text("a\n")
        with output_folder(tmp_path / "b") as second:
            (second / "b.txt").write_text("b\n")
    assert _names(tmp_path) == ["a", "b"]
    assert _names(tmp_path / "a") == ["a.txt"]


def _stale(folder: Path, machine: str) -> Path:
    """A staging folder by hand: a lock file naming ``machine``, held by no process."""
    folder.mkdir()
    (folder / "lock").write_text(f"{machine}\n1\n")
    (folder / "new").mkdir()
    return folder


@pytest.mark.timeout(60)
def test_only_stale_staging_folders_of_this_machine_are_removed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _stale(work / ".out-abc123.edgetwin", os.uname().nodename)  # removed
    _stale(work / ".far-abc123.edgetwin", "another-machine")  # its lock may be its own
    (work / ".out-ab12cd34").mkdir()  # an older edgetwin's, or the user's: no lock
    (work / ".bare-abc.edgetwin").mkdir()  # no lock file (being made)
    (work / ".file-abc.edgetwin").write_text("a file\n")
    linked = _stale(work / ".linked-abc.edgetwin", os.uname().nodename)
    (linked / "lock").rename(tmp_path / "elsewhere")
    (linked / "lock").symlink_to(tmp_path / "elsewhere")
    (work / ".link-abc.edgetwin").symlink_to(_stale(tmp_path / "target", os.uname().nodename))
    (work / ".cache").mkdir()
    (work / "results").mkdir()
    before = _names(work)
    assert main(_run(work / "out")) == 0
    assert _names(work) == sorted({*before, "out"} - {".out-abc123.edgetwin"})
    assert _names(tmp_path / "target") == ["lock", "new"]
