"""The emulator's pure builders: topology, tc commands, link checks, readiness (no root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from edgetwin import cli
from edgetwin.emu.mininet import mn
from edgetwin.emu.mininet.checks import client_argv, goodput_mbps, link_check, write_link_checks
from edgetwin.emu.mininet.crowd import crowd_topology
from edgetwin.emu.mininet.faults import timeline
from edgetwin.emu.mininet.medium import rate_commands_of, shaping_commands_of
from edgetwin.emu.mininet.net import Leftovers, leftover_processes
from edgetwin.emu.mininet.topology import (
    EmuTopology,
    TcCommand,
    build_topology,
    class_show_command,
    is_leftover_link,
    is_node_shell,
    netem_probe,
    parse_class_rate_mbps,
    path_queues,
    rate_commands,
    shaping_commands,
)
from edgetwin.emulator_spec import EmulatorSpec
from edgetwin.links import link_warnings, read_link_checks, worst_error_pct
from edgetwin.network_spec import BandwidthStep, NetworkSpec
from edgetwin.reports import write_report
from edgetwin.result_cells import read_results
from edgetwin.results import ResultRow, write_results
from edgetwin.run_folders import EMU, leftover_folders, run_folder

REPO = Path(__file__).resolve().parents[1]


def test_one_host_per_device_on_one_bridge() -> None:
    topology = build_topology(3)
    assert topology.bridge == "etws0"
    assert [h.name for h in topology.hosts] == ["etwh0", "etwh1", "etwh2"]
    assert [h.ip for h in topology.hosts] == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]
    assert [h.iface for h in topology.hosts] == ["etwh0-eth0", "etwh1-eth0", "etwh2-eth0"]
    assert [h.bridge_port for h in topology.hosts] == ["etws0-eth1", "etws0-eth2", "etws0-eth3"]
    assert all(len(h.iface) <= 15 and len(h.bridge_port) <= 15 for h in topology.hosts)
    with pytest.raises(ValueError):
        build_topology(0)


def test_only_mininets_own_shells_of_our_nodes_are_leftovers() -> None:
    """Any process whose command line held ``mininet:etw`` was SIGKILLed by every run's
    start and by emu-cleanup: a script given a node's name, a ``pgrep -f mininet:etwh0``."""
    shell = ["bash", "--norc", "--noediting", "-is"]
    assert is_node_shell([*shell, "mininet:etwh0"]) and is_node_shell([*shell, "mininet:etws0"])
    assert not is_node_shell([*shell, "mininet:h1"])  # another Mininet's node
    assert not is_node_shell(["pgrep", "-f", "mininet:etwh0"])
    assert not is_node_shell(["python3", "watch.py", *shell, "mininet:etwh0"])
    watcher = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "mininet:etwh0"]
    )
    try:
        assert watcher.pid not in leftover_processes()
    finally:
        watcher.kill()
        watcher.wait()


def test_leftover_names_are_only_ours() -> None:
    assert all(is_leftover_link(n) for n in ("etws0", "etwh1-eth0", "etws0-eth12"))
    assert not any(is_leftover_link(n) for n in ("eth0", "lo", "etwx", "ifb0", "etw", "etwh"))
    assert is_leftover_link("etwifb0")  # the shared medium's IFB


def test_what_a_cleanup_removed_reads_in_the_singular_and_plural() -> None:
    assert str(Leftovers((7,), ("a", "b"), ())) == (
        "1 process killed, 2 links, 0 cgroups and 0 folders removed"
    )
    one_group = Leftovers((), (), (Path("f"),), (Path("g"),))
    assert str(one_group) == "0 processes killed, 0 links, 1 cgroup and 1 folder removed"
    assert Leftovers((), (), (), (Path("g"),))  # a cgroup alone is a leftover said


def test_shaping_both_ends_of_every_link_with_htb() -> None:
    topology = build_topology(2)
    commands = shaping_commands(topology, NetworkSpec(), 200, netem=False)
    assert len(commands) == 2 * 2 * 2  # 2 links x 2 ends x (qdisc, class)
    assert commands[0].node == "etwh0"
    assert " ".join(commands[0].argv) == (
        "tc qdisc replace dev etwh0-eth0 root handle 5: htb default 1"
    )
    assert " ".join(commands[1].argv) == (
        "tc class replace dev etwh0-eth0 parent 5: classid 5:1 htb rate 200mbit ceil 200mbit"
    )
    assert (commands[3].node, commands[3].argv[4]) == ("etws0", "etws0-eth1")


def test_burst_and_latency_when_netem() -> None:
    network = NetworkSpec(burst_kb=64, latency_ms=3)
    commands = shaping_commands(build_topology(1), network, 400, netem=True)
    assert commands[1].argv[-4:] == ("burst", "64kb", "cburst", "64kb")
    assert " ".join(commands[2].argv) == (
        "tc qdisc replace dev etwh0-eth0 parent 5:1 handle 10: netem delay 1.5ms"
    )  # two queues on the way: half the one-way latency each
    without = shaping_commands(build_topology(1), network, 400, netem=False)
    assert not any("netem" in c.argv for c in without)
    add, remove = netem_probe("etwh0-eth0")
    assert add.node == remove.node == "etwh0" and "netem" in add.argv


def test_rate_change() -> None:
    topology = build_topology(2)
    change = rate_commands(topology, 800)
    assert len(change) == 4 and all(c.argv[:3] == ("tc", "class", "change") for c in change)
    assert all("800mbit" in c.argv for c in change)


def test_a_crowds_foreman_is_a_server_its_link_not_shaped() -> None:
    """A crowd's foreman (host 0) had its link shaped like every phone's, so its broadcasts
    to several phones shared one shaped link, which the twin does not have. Now the
    shaping, every rate change (sweeps, schedule steps) and the link check's queues leave
    its interface and bridge port alone; a ViT run's rank 0 is a device, shaped as before."""
    host_0 = {("etwh0", "etwh0-eth0"), ("etws0", "etws0-eth1")}
    network = NetworkSpec(schedule=(BandwidthStep(at_ms=100, bandwidth_mbps=2),))

    def queues(commands: list[TcCommand]) -> set[tuple[str, str]]:
        return {(c.node, c.argv[c.argv.index("dev") + 1]) for c in commands}

    def every_rate_command(topology: EmuTopology) -> list[TcCommand]:
        steps = [c for action in timeline(topology, network) for c in action.commands]
        return [*shaping_commands_of(topology, network, 10, False),
                *rate_commands_of(topology, network, 5), *steps]  # fmt: skip

    crowd, vit = crowd_topology(3), build_topology(4)
    phones = {q for host in crowd.hosts[1:] for q in [(host.name, host.iface),
                                                      ("etws0", host.bridge_port)]}  # fmt: skip
    assert queues(every_rate_command(crowd)) == phones
    assert queues(every_rate_command(vit)) == phones | host_0
    assert path_queues(crowd, 0, 2) == [("etws0", "etws0-eth3")]  # the phone's end alone
    assert path_queues(crowd, 2, 0) == [("etwh2", "etwh2-eth0")]
    assert path_queues(vit, 2, 0) == [("etwh2", "etwh2-eth0"), ("etws0", "etws0-eth1")]
    # its queues still add their half of the latency: foreman to phone is latency_ms
    delayed = NetworkSpec(latency_ms=4)
    on_host_0 = [c for c in shaping_commands_of(crowd, delayed, 10, True) if queues([c]) <= host_0]
    assert {" ".join(c.argv[4:]) for c in on_host_0} == {
        f"{iface} root netem delay 2ms" for iface in ("etwh0-eth0", "etws0-eth1")
    }
    # the shared medium is as it was: the foreman's host is a station on it
    shared = NetworkSpec(medium="shared")
    assert shaping_commands_of(crowd, shared, 10, False) == shaping_commands_of(
        vit, shared, 10, False
    )
    assert rate_commands_of(crowd, shared, 5) == rate_commands_of(vit, shared, 5)
    # the foreman's link down still cuts every worker off
    faults = EmulatorSpec.model_validate({"faults": [{"kind": "link_down", "host": 0, "at_s": 1}]})
    (down,) = timeline(crowd, NetworkSpec(), faults.faults)
    assert [" ".join(c.argv) for c in down.commands] == ["ip link set dev etws0-eth1 down"]


def test_link_check_compares_the_wire_rate() -> None:
    check = link_check(200, "etwh1", "etwh0", goodput_mbps=191.2)
    assert check.wire_mbps == pytest.approx(191.2 * 1514 / 1448)
    assert abs(check.error_pct) < 0.1 and check.within_tolerance
    assert not link_check(800, "a", "b", goodput_mbps=700).within_tolerance
    report = json.dumps({"end": {"sum_received": {"bits_per_second": 1.5e8}}})
    assert goodput_mbps(report) == 150
    with pytest.raises(ValueError, match="unable to connect"):
        goodput_mbps(json.dumps({"error": "unable to connect to server"}))
    assert client_argv("10.77.0.1", 2, port=5202)[:5] == [
        *("iperf3", "--client", "10.77.0.1", "--port", "5202"),
    ]


def test_emu_without_root_exits_2_naming_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(mn.os, "geteuid", lambda: 1000)
    out = tmp_path / "out"
    code = cli.main(
        ["run", str(REPO / "scenarios/emu_smoke.yaml"), "--mode", "emu", "--out", str(out)]
    )
    message = capsys.readouterr().err
    assert code == 2 and "Traceback" not in message
    assert "field 'mode'" in message and "root" in message
    assert not out.exists()


def _unprivileged(argv: list[str]) -> list[str]:
    """``argv`` as this user if not root, else as nobody (root's lock file then exists)."""
    if os.geteuid() != 0:
        return argv
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is needed to drop root")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]


def test_emu_cleanup_without_root_exits_2_saying_so() -> None:
    """Not root: exit 2 saying that root is needed (it raised a PermissionError on the
    emulator lock, a traceback, when root's lock file was there)."""
    argv = _unprivileged([sys.executable, "-m", "edgetwin", "emu-cleanup"])
    done = subprocess.run(argv, capture_output=True, text=True, cwd="/", check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("edgetwin: error: emu-cleanup: needs root")


def test_emu_cleanup_without_ip_exits_2_naming_it_and_its_package(tmp_path: Path) -> None:
    """No ``ip`` on PATH (no iproute2): exit 2 naming the program and its Debian package, before
    anything of root's is touched (it died listing the links, a FileNotFoundError traceback)."""
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "PATH": str(tmp_path), "PYTHONPATH": str(REPO)}
    env["TMPDIR"] = str(tmp_path / "tmp")  # the local runs' folders it removes: none
    argv = [sys.executable, "-m", "edgetwin", "emu-cleanup"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("edgetwin: error: emu-cleanup: needs ")
    assert "the program ip (apt-get install -y iproute2)" in done.stderr


def test_missing_mininet_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mn, "_mininet_found", lambda: False)
    monkeypatch.setattr(mn.shutil, "which", lambda _tool: None)
    missing = " ".join(mn.missing_requirements())
    assert "Mininet" in missing and "apt-get install -y mininet bridge-utils iperf3" in missing
    assert "iptables" in missing and "ethtool" in missing  # loss and latency without netem


def test_a_shaping_class_reads_back_as_its_rate() -> None:
    listing = "class htb 5:1 root prio 0 rate 200Mbit ceil 200Mbit burst 1600b cburst 1600b"
    assert parse_class_rate_mbps(listing) == 200
    assert parse_class_rate_mbps("class htb 5:1 root rate 1500Kbit ceil 1500Kbit") == 1.5
    assert parse_class_rate_mbps("class htb 5:1 root rate 1Tbit ceil 1Tbit") == 1e6
    with pytest.raises(ValueError, match="no rate"):
        parse_class_rate_mbps("")
    topology = build_topology(3)
    assert path_queues(topology, 2, 0) == [("etwh2", "etwh2-eth0"), ("etws0", "etws0-eth1")]
    assert class_show_command("etwh2", "etwh2-eth0").argv[:4] == ("tc", "class", "show", "dev")


def test_a_link_short_of_its_rate_is_a_warning_in_the_csv_and_the_report(tmp_path: Path) -> None:
    short = link_check(200, "etwh1", "etwh0", goodput_mbps=170, shaped_mbps=200)
    fine = link_check(200, "etwh0", "etwh1", goodput_mbps=191)
    assert fine.warning() is None and not short.within_tolerance
    assert short.warning() == (
        "link etwh1 -> etwh0 set to 200 Mbps carried 177.7 Mbps on the wire (-11.1 %, "
        "tolerance 5 %): times at 200 Mbps are not the link's alone"
    )
    write_link_checks(tmp_path / "link_check.csv", [short, fine])
    assert link_warnings(read_link_checks(tmp_path / "link_check.csv")) == [short.warning()]
    assert worst_error_pct([fine.error_pct, short.error_pct]) == short.error_pct
    assert worst_error_pct([]) is None
    row = ResultRow("s", "emu", "voltage", 2, 1, 200, None, None, 0, 1, 0, 1, 2, 2, None)
    write_results(tmp_path / "results.csv", [replace(row, link_error_pct=short.error_pct)])
    assert read_results(tmp_path / "results.csv")[0].link_error_pct == pytest.approx(-11.1, abs=0.1)
    html = (write_report(tmp_path)).read_text()
    assert html.count("<b>Warning:</b> link etwh1 -&gt; etwh0 set to 200 Mbps") == 1


def test_a_run_folder_is_a_leftover_once_its_process_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # a run killed before its folder is removed (os._exit: no clean-up, as after SIGKILL)
    code = "import os\nfrom edgetwin.run_folders import EMU, run_folder\nf = run_folder(EMU, 'x')\n"
    code += "os._exit(0)"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    child = subprocess.run([sys.executable, "-c", code], env=env, check=False)
    (gone,) = tmp_path.iterdir()
    with run_folder(EMU, "mine") as mine:
        found = leftover_folders(EMU)
        assert Path(mine) not in found  # a live run's folder stays
        # a folder named after this pid but another start time: a process that had the pid
        reused = tmp_path / f"edgetwin-emu-{os.getpid()}.1-x-abc"
        reused.mkdir()
        assert reused in leftover_folders(EMU)
    assert child.returncode == 0 and gone in found
