"""ViT hosts with CPU limits for real (root, Mininet): a rank's compute time grows as its
host's CPU quota shrinks."""

from __future__ import annotations

from pathlib import Path

from emu_checks import needs_emulator, teardown_checked
from test_emu_run import SMALL

from edgetwin.emu.mininet.runner import run_emu
from edgetwin.scenario import validate_scenario

pytestmark = needs_emulator


def _single_compute_ms(host_cpu_cores: float) -> float:
    """The fastest of three single-device forwards on host 0 at that many cores."""
    raw = {
        **SMALL,
        "repetitions": 3,
        "strategies": [{"name": "single"}],  # on host 0
        "sweeps": [{"batch": [4], "bandwidth_mbps": [100], "devices": [2]}],
        "emulator": {"host_cpu_cores": [host_cpu_cores]},
    }
    scenario = validate_scenario(raw, Path("emu_vit_cpu.yaml"))
    with teardown_checked() as teardown:
        run = run_emu(scenario, warmup=1, link_check_s=0)
    teardown.assert_clean()
    assert all(row.status == "ok" for row in run.rows)
    return min(row.compute_ms for row in run.rows)


def test_a_ranks_compute_grows_as_its_cpu_share_drops() -> None:
    whole, quarter = _single_compute_ms(1.0), _single_compute_ms(0.25)
    # a quarter of a core: 4x in theory; more than 2x here, where other work shares the cores
    assert quarter > 2.0 * whole, (whole, quarter)
