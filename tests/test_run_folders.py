"""A local run killed outright (SIGKILL) leaves its temporary folder, named after its pid and
start time (``edgetwin/run_folders.py``); the next local run and ``emu-cleanup`` remove it,
never the folder of a live process. It stayed in the temporary folder for good (rank logs,
exported ONNX stages and worker caches: over 1 GB for the full DistilBERT)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from edgetwin.run_folders import EMU, LOCAL, Kind, leftover_folders, remove_leftovers
from tests.conftest import REPO

SMOKE = REPO / "scenarios/emu_smoke.yaml"
# emu_smoke cut to one short launch: 2 Voltage ranks, a 1-block ViT of width 64, batch 1
SHORT = [
    *("--set", "repetitions=1", "--set", "strategies=[{name: voltage}]"),
    *("--set", "sweeps=[{batch: [1], bandwidth_mbps: [200], devices: [2]}]"),
    *("--set", "model.blocks=1", "--set", "model.width=64", "--set", "model.heads=2"),
]
HOLDS_A_FOLDER = (  # a process that holds a local run folder until killed
    "import time\n"
    "from edgetwin.run_folders import LOCAL, run_folder\n"
    "folder = run_folder(LOCAL, 'held')\n"
    "print(folder.name, flush=True)  # its path\n"
    "time.sleep(600)\n"
)


@contextmanager
def _holding_a_folder(argv: list[str], env: dict[str, str]) -> Iterator[tuple[int, Path]]:
    """A process (``argv`` then python) holding a local run folder: its pid and folder; it
    is SIGKILLed on the way out."""
    code = [sys.executable, "-c", HOLDS_A_FOLDER]
    holder = subprocess.Popen([*argv, *code], env=env, cwd="/", stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        yield holder.pid, Path(holder.stdout.readline().strip())
    finally:
        holder.kill()
        holder.wait()


def _env(tmp: Path) -> dict[str, str]:
    path = os.pathsep.join(sys.path)  # this checkout's edgetwin, from any folder
    return {**os.environ, "PYTHONPATH": path, "TMPDIR": str(tmp)}


@pytest.mark.timeout(180)
def test_the_next_local_run_removes_what_a_killed_one_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    argv = [sys.executable, "-m", "edgetwin", "run", str(SMOKE), "--mode", "local", "--quiet"]
    killed = subprocess.Popen(
        [*argv, "--out", str(tmp_path / "killed"), *SHORT],
        env=_env(tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not list(tmp.glob("edgetwin-local-*-vit-*/rank0.log")):  # its ranks are starting
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    killed.kill()
    killed.wait()
    (left,) = tmp.glob("edgetwin-local-*-vit-*")
    assert left.name.startswith(f"edgetwin-local-{killed.pid}.") and (left / "rank0.log").exists()
    (record,) = tmp.glob("edgetwin-local-*-elsewhere-*")  # it names the staging beside --out
    assert record.name.startswith(f"edgetwin-local-{killed.pid}.")
    (staging,) = tmp_path.glob(".killed-*")
    with _holding_a_folder([], _env(tmp)) as (_, live):
        assert sorted(leftover_folders(LOCAL)) == sorted([left, staging, record])  # not live's
        done = subprocess.run(  # into another folder: the staging one there is not beside it
            [*argv, "--out", str(tmp_path / "elsewhere" / "next"), *SHORT],
            env=_env(tmp),
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert done.returncode == 0, done.stderr
        said = f"edgetwin: removed 3 folders left by killed local runs in {tmp} and {tmp_path}\n"
        assert said in done.stderr
        assert sorted(tmp.iterdir()) == [live]  # the live one stays; the run's own went
        assert not staging.exists()  # though the run wrote elsewhere


def _as_nobody() -> list[str]:
    """The command prefix that runs as nobody when root (emu-cleanup without root), else
    nothing."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is needed to drop root")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.timeout(60)
def test_emu_cleanup_without_root_removes_the_folders_of_killed_local_runs() -> None:
    """Without root, ``emu-cleanup`` removes what killed local runs left, says how many,
    and exits 2 saying that root is needed for the rest, as before."""
    tmp = Path(tempfile.mkdtemp(prefix="run-folders-test-"))  # nobody's too when root
    try:
        tmp.chmod(0o1777)
        env = _env(tmp)
        with _holding_a_folder(_as_nobody(), env) as (_, killed):
            pass  # SIGKILLed: its folder stays
        assert (tmp / killed).is_dir()
        with _holding_a_folder(_as_nobody(), env) as (_, live):
            argv = [*_as_nobody(), sys.executable, "-m", "edgetwin", "emu-cleanup"]
            done = subprocess.run(argv, env=env, cwd="/", capture_output=True, text=True)
            assert done.returncode == 2 and "Traceback" not in done.stderr
            assert done.stderr.startswith("edgetwin: error: emu-cleanup: needs root")
            assert done.stdout == "emu-cleanup: 1 folder of killed local runs removed\n"
            assert sorted(tmp.iterdir()) == [live]
    finally:
        shutil.rmtree(tmp)


API_CLEANUP = (  # edgetwin.emu_cleanup() from Python: what it raises and removed
    "import edgetwin\n"
    "try:\n"
    "    edgetwin.emu_cleanup()\n"
    "except edgetwin.EmulatorNotCleaned as exc:\n"
    "    print(exc.message)\n"
    "    print(*exc.local_folders, sep='\\n')\n"
)


@pytest.mark.timeout(60)
def test_the_api_cleans_up_as_the_command_does() -> None:
    """``edgetwin.emu_cleanup()`` without root removes the same folders of killed local runs
    and raises what the command says (exit 2), the folders it removed on the error."""
    tmp = Path(tempfile.mkdtemp(prefix="run-folders-test-"))  # nobody's too when root
    try:
        tmp.chmod(0o1777)
        env = _env(tmp)
        said, left = [], []  # what each side said; the folders of runs killed before it
        for argv in (["-m", "edgetwin", "emu-cleanup"], ["-c", API_CLEANUP]):
            with _holding_a_folder(_as_nobody(), env) as (_, killed):
                pass  # SIGKILLed: its folder stays
            left.append(sorted(tmp.iterdir()))  # the command's live one is killed by now
            assert killed in left[-1]
            with _holding_a_folder(_as_nobody(), env) as (_, live):
                done = subprocess.run(
                    [*_as_nobody(), sys.executable, *argv],
                    env=env,
                    cwd="/",
                    capture_output=True,
                    text=True,
                )
                assert "Traceback" not in done.stderr, done.stderr
                assert sorted(tmp.iterdir()) == [live]  # the killed ones went
                said.append(done)
        command, api = said
        message, *removed = api.stdout.splitlines()
        assert command.stderr == f"edgetwin: error: {message}\n"
        assert message.startswith("emu-cleanup: needs root")
        assert sorted(tmp / name for name in removed) == left[1] and len(left[1]) == 2
    finally:
        shutil.rmtree(tmp)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", [LOCAL, EMU])
def test_a_record_of_another_user_is_not_followed(
    kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anyone may make a folder named like a dead run's in the temporary folder: one of
    another user, naming a folder to remove (``removed_if_killed``'s record), made root's
    ``emu-cleanup`` delete that folder. Only this user's records count; the same record of
    this user is followed."""
    if os.geteuid() != 0:
        pytest.skip("making a folder of another user needs root")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    gone = _a_gone_pid()
    victim = tmp_path / "victim"
    (victim / "precious").mkdir(parents=True)
    record = tmp / f"edgetwin-{kind}-{gone}.1-elsewhere-planted"
    record.mkdir()
    (record / "folder").write_text(str(victim))
    os.chown(record, 65534, 65534)  # nobody's
    assert leftover_folders(kind) == []
    assert remove_leftovers(kind) == [] and (victim / "precious").is_dir() and record.is_dir()
    os.chown(record, os.geteuid(), os.getegid())  # this user's own record is followed
    assert remove_leftovers(kind) == [victim, record]
    assert not victim.exists() and not record.exists()


def _a_gone_pid() -> int:
    """The pid of a process that has exited."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid
