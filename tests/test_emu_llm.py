"""The real decoder in the emulator (root, Mininet): ranks on hosts over a shaped link."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgetwin.emu.mininet.mn import missing_requirements
from edgetwin.emu.mininet.net import leftover_links, leftover_processes
from edgetwin.emu.mininet.runner import run_emu
from edgetwin.scenario import load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import run_scenario

pytestmark = pytest.mark.skipif(
    bool(missing_requirements()), reason=f"emulator needs: {missing_requirements()}"
)

SMOKE = Path(__file__).resolve().parents[1] / "scenarios/llm_smoke.yaml"
# llm_smoke cut down (1024-token vocabulary, prompt 16, 4 tokens, batch 2) at 20 Mbps
SMALL = [
    *("model.vocab=1024", "workload.prompt_tokens=16", "workload.output_tokens=4"),
    *("sweeps.0.batch=[2]", "network.bandwidth_mbps=20", "mode=emu", "real_warmups=1"),
    'strategies=[{"name": "pipeline"}, {"name": "voltage"}]',
]


@pytest.mark.timeout(600)
def test_decoder_ranks_run_on_hosts_over_the_shaped_link() -> None:
    scenario = load_scenario(SMOKE, SMALL)
    result = run_emu(scenario, SMOKE, link_check_s=1)
    assert not leftover_links() and not leftover_processes()
    twin = {
        o.row.strategy: o.row.bytes_sent
        for o in run_scenario(
            scenario.model_copy(update={"mode": "twin"}), build_fleet(scenario, SMOKE)
        )
    }
    assert [r.strategy for r in result.rows] == ["pipeline", "voltage"]
    for row in result.rows:
        assert row.mode == "emu" and row.status == "ok" and row.bandwidth_mbps == 20
        assert row.prefix_agreement_vs_single == 1.0 and row.max_abs_diff_vs_single is not None
        assert row.max_abs_diff_vs_single <= 1e-4
        assert row.bytes_sent == twin[row.strategy] > 0
        assert row.link_error_pct is not None
    # voltage's rank 0 cannot finish before rank 1's half of the bytes crossed the link
    voltage = result.rows[1]
    assert voltage.total_ms > 0.9 * (voltage.bytes_sent / 2) * 8 / 20e3
