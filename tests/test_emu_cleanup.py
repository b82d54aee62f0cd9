"""After SIGKILL of a whole ``edgetwin run --mode emu`` (root, Mininet), ``edgetwin emu-cleanup``
leaves no process (delay lines included), interface, network namespace (with the hosts'
iptables rules), iptables rule here, cgroup or file of the run; a ViT rank whose launcher
is killed exits by itself (no emulator needed).

The run gets a temporary folder of its own as ``$TMPDIR`` (emu-cleanup the same), so that
every file it makes there is its own, whatever other runs do in the system's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from emu_checks import links, needs_emulator, root_rules

from edgetwin.emu.mininet.cgroups import leftover_groups
from edgetwin.emu.mininet.lock import emulator_busy, emulator_lock
from edgetwin.emu.mininet.medium import MEDIUM_DEVICE
from edgetwin.emu.mininet.net import leftover_links, leftover_processes
from edgetwin.emu.vit.launcher import free_port
from edgetwin.run_folders import EMU, leftover_folders, removed_if_killed

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
START_WAIT_S = 600.0  # another engineer's emulator run may hold the lock first


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _net_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _namespaces_in_use() -> set[str]:
    return {
        ns
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and (ns := _net_namespace(int(p.name)))
    }


def _mid_run(run: subprocess.Popen[bytes], module: bytes) -> list[int]:
    """Wait until ``run`` holds the emulator lock and a process running ``module`` is up in
    a host; the run's processes in hosts then (and its interfaces are all up)."""
    deadline = time.monotonic() + START_WAIT_S
    while True:
        assert run.poll() is None, f"the run exited with {run.returncode} before it was killed"
        assert time.monotonic() < deadline, "the run never got going"
        if emulator_busy() == f"pid {run.pid}":
            pids = leftover_processes()
            if any(module in _cmdline(pid) for pid in pids):
                return pids
        time.sleep(0.2)


def _run(
    scenario: str, tmp_path: Path, sets: tuple[str, ...] = (), **popen: Any
) -> subprocess.Popen[bytes]:
    """``edgetwin run`` of ``scenario`` (``--set`` each of ``sets``, no link checks) in the
    emulator, ``$TMPDIR`` ``tmp_path/tmp`` and ``--out`` ``tmp_path/out/D``, in a session of
    its own."""
    command = [sys.executable, "-m", "edgetwin", "run", str(SCENARIOS / scenario)]
    sets = ("emulator.link_check_s=0", *sets)  # what is left is the subject, not the links
    command += [arg for value in sets for arg in ("--set", value)]
    return subprocess.Popen(
        [*command, "--mode", "emu", "--out", str(tmp_path / "out" / "D"), "--quiet"],
        env=_env(tmp_path),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        **popen,
    )


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp")}


@dataclass(frozen=True)
class Killed:
    """A run SIGKILLed mid-run: its processes in hosts and their network namespaces then."""

    pids: list[int]
    namespaces: set[str]


def _killed_mid_run(
    scenario: str, module: bytes, tmp_path: Path, sets: tuple[str, ...] = ()
) -> Killed:
    run = _run(scenario, tmp_path, sets)
    try:
        pids = _mid_run(run, module)
        if "network.medium=shared" in sets:
            assert MEDIUM_DEVICE in links()  # the shared medium's IFB is there to be left
        ours = _net_namespace(os.getpid())
        namespaces = {ns for pid in pids if (ns := _net_namespace(pid)) and ns != ours}
        assert namespaces  # the hosts' namespaces
        ranks = [pid for pid in pids if b"edgetwin.emu.vit.worker" in _cmdline(pid)]
        for rank in ranks:  # in a host too, the run started it and it watches the run
            with suppress(psutil.NoSuchProcess):
                assert psutil.Process(rank).ppid() == run.pid
            assert f"\0--parent-pid\0{run.pid}\0".encode() in _cmdline(rank)
        time.sleep(1.0)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # no teardown at all
        run.wait()
    assert all(_gone(pid) for pid in ranks)  # ViT ranks see their launcher go, and exit
    return Killed(pids, namespaces)


def _made_by_a_run(tmp: Path) -> list[Path]:
    """What is in the run's TMPDIR but a hidden plain file: the run makes folders and
    named files there, and a process outside it was seen to drop a `.ses` stamp into
    TMPDIR now and then (CI runs on such a machine)."""
    return sorted(p for p in tmp.iterdir() if p.is_dir() or not p.name.startswith("."))


def _assert_nothing_left(killed: Killed, tmp_path: Path) -> None:
    with emulator_lock():  # no run is live: whatever is there is left over
        assert not [alive for pid in killed.pids if (alive := _alive(pid))]
        assert not leftover_processes() and not leftover_links() and not leftover_groups()
        assert not {name for name in links() if name.startswith("etw")}
        assert not [r for r in root_rules() if "etw-" in r]  # the hosts' rules stay in them
        assert not killed.namespaces & _namespaces_in_use()
        assert _made_by_a_run(tmp_path / "tmp") == []  # the run's temporary folders
        assert sorted((tmp_path / "out").iterdir()) == []  # the staging folder beside --out


@needs_emulator
@pytest.mark.timeout(900)  # mostly the wait for another engineer's run; the test itself ~30 s
@pytest.mark.parametrize(
    ("scenario", "module", "sets"),
    [
        ("emu_smoke.yaml", b"edgetwin.emu.vit.worker", ()),
        ("emu_smoke.yaml", b"edgetwin.emu.vit.worker", ("network.medium=shared",)),
        ("emu_crowdio.yaml", b"edgetwin.emu.crowdio.worker", ()),
        (  # killed once its delay lines run: latency without netem, and loss
            "emu_smoke.yaml",
            b"edgetwin.emu.mininet.delayline",
            ("network.latency_ms=2", "network.loss_pct=1"),
        ),
    ],
    ids=["vit", "vit_shared_medium", "crowdio", "loss-and-delay-lines"],
)
def test_emu_cleanup_leaves_nothing_of_a_sigkilled_run(
    tmp_path: Path, scenario: str, module: bytes, sets: tuple[str, ...]
) -> None:
    killed = _killed_mid_run(scenario, module, tmp_path, sets)
    cleanup = subprocess.run(
        [sys.executable, "-m", "edgetwin", "emu-cleanup"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if cleanup.returncode == 2 and "is live" in cleanup.stderr:
        pytest.skip("another emulator run started first (and removed the leftovers itself)")
    assert cleanup.returncode == 0, cleanup.stderr
    assert "0 folders" not in cleanup.stdout, cleanup.stdout
    if module == b"edgetwin.emu.crowdio.worker":  # its hosts' CPU and memory groups, said
        assert re.search(r"[1-9]\d* cgroups? ", cleanup.stdout), cleanup.stdout
    _assert_nothing_left(killed, tmp_path)


REMOVED = "edgetwin: removed what a killed emulator run left: "


@needs_emulator
@pytest.mark.timeout(900)
def test_the_next_run_removes_what_a_sigkilled_run_left_and_says_so(tmp_path: Path) -> None:
    """A killed CROWDio run (memory groups too) is cleaned up by the next run, which need
    not be the same: the ViT smoke run has a rank up sooner than this one."""
    killed = _killed_mid_run("emu_crowdio.yaml", b"edgetwin.emu.crowdio.worker", tmp_path)
    next_run = _run("emu_smoke.yaml", tmp_path, stderr=subprocess.PIPE)  # the same $TMPDIR
    try:
        assert next_run.stderr is not None
        said = ""  # (a line before it may say that the killed run's staging folder went too)
        while not said.startswith(REMOVED) and next_run.poll() is None:
            said = next_run.stderr.readline().decode()
        _mid_run(next_run, b"edgetwin.emu.vit.worker")
    finally:
        next_run.terminate()  # SIGTERM: it tears down after itself
        next_run.communicate()
    assert said.startswith(REMOVED), said
    _assert_nothing_left(killed, tmp_path)


def _gone(pid: int, within_s: float = 30.0) -> bool:
    """Whether process ``pid`` exits (a zombie counts) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def _alive(pid: int) -> str | None:
    """What process ``pid`` runs, if it has not exited."""
    return None if _gone(pid) else _cmdline(pid).replace(b"\0", b" ").decode()


LAUNCHER = """
import os, subprocess, sys, time
argv = [sys.executable, "-m", "edgetwin.emu.vit.worker", "--parent-pid", str(os.getpid())]
with open(sys.argv[1], "wb") as log:
    rank = subprocess.Popen(argv + sys.argv[2:], stdout=log, stderr=log)
print(rank.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(120)
def test_a_vit_rank_exits_when_its_launcher_is_killed(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    rank_args = ["--rank", "0", "--world", "2", "--master-port", str(free_port())]
    rank_args += ["--strategy", "voltage", "--width", "64", "--heads", "2", "--blocks", "1"]
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(log), *rank_args], stdout=subprocess.PIPE, text=True
    )
    assert launcher.stdout is not None
    rank = psutil.Process(int(launcher.stdout.readline()))  # waits for rank 1, which never comes
    launcher.kill()
    launcher.wait()
    assert _gone(rank.pid)
    assert f"rank: its parent (pid {launcher.pid}) is gone" in log.read_text()


KILLED_RUN = """
import os, sys, tempfile
from pathlib import Path
from edgetwin.run_folders import EMU, removed_if_killed
staging = Path(tempfile.mkdtemp(prefix=".D-", dir=sys.argv[1]))
(staging / "results.csv").write_text("half")
tracked = removed_if_killed(EMU, staging)
tracked.__enter__()
print(staging, flush=True)
os._exit(0)  # killed: no clean-up, as after SIGKILL
"""


def test_a_folder_elsewhere_is_a_leftover_once_its_run_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    tmp.mkdir()
    out.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    env = {**os.environ, "TMPDIR": str(tmp)}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(out)], env=env, capture_output=True, text=True
    )
    staging = Path(killed.stdout.strip())
    (record,) = tmp.iterdir()
    live = out / ".D-live"
    live.mkdir()
    with removed_if_killed(EMU, live):
        found = leftover_folders(EMU)
    assert found == [staging, record]  # the folder before the record that names it
    assert live not in found  # a live run's folder stays
    staging.rename(tmp_path / "moved")  # what the record names is a symlink now: left alone
    staging.symlink_to(tmp_path / "moved")
    assert leftover_folders(EMU) == [record]
