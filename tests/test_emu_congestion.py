"""TCP congestion control in the emulator's hosts (root, Mininet): the machine's unless
``network.congestion_control`` names one, which every host's connections then use."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from emu_checks import needs_emulator

import edgetwin
from edgetwin.cli import main
from edgetwin.emu.mininet import congestion
from edgetwin.emu.mininet.net import EmuNetwork, emulated_network
from edgetwin.emu.mininet.topology import TcCommand, build_topology
from edgetwin.network_spec import NetworkSpec

pytestmark = needs_emulator

PORT = 5301
# each end prints the congestion control its socket of the connection uses
_SERVER = f"""
import socket, sys
server = socket.create_server((sys.argv[1], {PORT}))
print("ready", flush=True)
conn, _ = server.accept()
print(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\\0").decode())
"""
_CLIENT = f"""
import socket, sys
conn = socket.create_connection((sys.argv[1], {PORT}), timeout=10)
print(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\\0").decode())
"""


def _machines() -> str:
    return Path(congestion.DEFAULT).read_text().strip()


def _connection_uses(net: EmuNetwork) -> tuple[str, str]:
    """The congestion control of a connection from host 0 to host 1, at each end."""
    host0, host1 = net.topology.hosts[:2]
    server = net.popen(1, [sys.executable, "-c", _SERVER, host1.ip], None)
    assert server.stdout is not None
    assert server.stdout.readline().strip() == b"ready"
    client = net.output(TcCommand(host0.name, (sys.executable, "-c", _CLIENT, host1.ip)))
    accepted, _ = server.communicate(timeout=10)
    return client.strip(), accepted.decode().strip()


@pytest.mark.timeout(120)
def test_the_named_congestion_control_is_every_connections() -> None:
    """The machine's (bbr here) was the hosts' with no way to change it; a name sets it on
    each host's route, both ends of a connection use it, and the network says so."""
    other = next(name for name in ("cubic", "reno") if name != _machines())
    with emulated_network(build_topology(2), NetworkSpec(), 200) as net:
        assert net.congestion_control == _machines()
        assert _connection_uses(net) == (_machines(), _machines())
    with emulated_network(build_topology(2), NetworkSpec(congestion_control=other), 200) as net:
        assert net.congestion_control == other
        assert _connection_uses(net) == (other, other)


# a ViT of one block at half ViT-B/16's width, batch 1, on 2 hosts: a few seconds
SMALL = {
    "name": "cc",
    "mode": "emu",
    "repetitions": 1,
    "real_warmups": 0,
    "model": {"tokens": 197, "width": 384, "heads": 6, "blocks": 1},
    "devices": [{"name": "board", "profile": "jetson_orin_nano", "count": 2}],
    "strategies": [{"name": "voltage"}],
    "sweeps": [{"batch": [1], "devices": [2]}],
    "emulator": {"link_check_s": 1},
}


@pytest.mark.timeout(120)
def test_a_run_records_the_congestion_control_its_hosts_used(tmp_path: Path) -> None:
    """Nothing a run wrote said which congestion control its hosts had: the resolved
    scenario names the one they used where the scenario left it to the machine."""
    path = tmp_path / "cc.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    results = edgetwin.run(path, mode=None, out=tmp_path / "out")
    assert results.scenario is not None
    assert results.scenario.network.congestion_control == _machines()
    resolved = yaml.safe_load((tmp_path / "out" / "scenario.resolved.yaml").read_text())
    assert resolved["network"]["congestion_control"] == _machines()


def test_a_congestion_control_the_kernel_lacks_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before anything starts, naming the file and the field (exit 2)."""
    scenario = {**SMALL, "network": {"congestion_control": "nosuchcc"}}
    path = tmp_path / "cc.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "network.congestion_control" in err, err
    assert "nosuchcc: this kernel has" in err, err
    assert not (tmp_path / "out").exists()
