"""An override of a scenario key that the sweeps stand in for (no run reads it) is refused:
``--set network.bandwidth_mbps=200`` on a scenario whose every sweep gives its bandwidths
ran nothing at 200 Mbps and said nothing."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.network_spec import NetworkSpec
from edgetwin.scenario import load_scenario
from edgetwin.sweep_points import swept_keys
from edgetwin.sweep_spec import SWEEP_OPTIONAL_LISTS, SWEPT_SCENARIO_KEYS

ROOT = Path(__file__).resolve().parents[1]
JETSON = ROOT / "scenarios" / "prism_jetson.yaml"
LLM = ROOT / "scenarios" / "llm_smoke.yaml"
CROWD = ROOT / "scenarios" / "crowd_city.yaml"
PLAN = ROOT / "scenarios" / "plan_crossover.plan.yaml"
ONE_SWEEP = "sweeps=[{batch: [1]}]"
ITEM = "network.bandwidth_mbps=200"  # no bandwidths: the network's is run


def test_every_list_a_sweep_may_leave_out_stands_in_for_one_scenario_key() -> None:
    assert set(SWEPT_SCENARIO_KEYS) == set(SWEEP_OPTIONAL_LISTS)


def test_the_keys_the_sweeps_stand_in_for() -> None:
    assert set(swept_keys(load_scenario(JETSON))) == {"network.bandwidth_mbps"}
    assert swept_keys(load_scenario(JETSON, [ONE_SWEEP])) == {}
    two = load_scenario(JETSON, ["sweeps=[{bandwidth_mbps: [100]}, {batch: [2]}]"])
    assert swept_keys(two) == {}  # the second sweep runs the network's bandwidth


@pytest.mark.timeout(60)
def test_the_command_refuses_a_bandwidth_every_sweep_replaces(tmp_path: Path) -> None:
    out = tmp_path / "out"
    err = io.StringIO()
    argv = ["run", str(JETSON), "--set", "network.bandwidth_mbps=200", "--out", str(out)]
    with contextlib.redirect_stderr(err):
        assert main([*argv, "--quiet"]) == 2
    message = err.getvalue()
    assert "field 'network.bandwidth_mbps'" in message
    assert "'network.bandwidth_mbps=200' has no effect" in message
    assert "sweeps.0.bandwidth_mbps, sweeps.1.bandwidth_mbps" in message
    assert "Traceback" not in message
    assert not out.exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("item", ["network.bandwidth_mbps=200", "~network.bandwidth_mbps"])
def test_the_api_refuses_it_and_runs_it_once_a_sweep_reads_it(item: str) -> None:
    with pytest.raises(InputError) as caught:
        edgetwin.run(JETSON, overrides=[item])
    assert caught.value.field == "network.bandwidth_mbps"
    scenario = edgetwin.load_scenario(JETSON, [ONE_SWEEP])
    with pytest.raises(InputError, match=r"sweeps\.0\.bandwidth_mbps"):  # from memory too
        edgetwin.run(scenario, overrides=["sweeps.0.bandwidth_mbps=[300]", item])
    results = edgetwin.run(JETSON, overrides=[item, ONE_SWEEP])  # the sweeps left it read
    expected = 200 if "=" in item else NetworkSpec.model_fields["bandwidth_mbps"].default
    assert {row.bandwidth_mbps for row in results.rows} == {expected}


@pytest.mark.timeout(60)
def test_a_decoder_workload_every_sweep_replaces_is_refused() -> None:
    sweeps = "sweeps=[{batch: [1], prompt_tokens: [16]}]"
    with pytest.raises(InputError) as caught:
        edgetwin.load_scenario(LLM, [sweeps, "workload.prompt_tokens=32"])
    assert caught.value.field == "workload.prompt_tokens"
    assert "sweeps.0.prompt_tokens" in caught.value.problem
    edgetwin.load_scenario(LLM, [sweeps, "workload.output_tokens=2"])  # no sweep gives it


@pytest.mark.timeout(60)
def test_a_crowd_runs_its_sweeps_bandwidths_if_one_gives_them() -> None:
    sweeps = "sweeps=[{bandwidth_mbps: [10]}, {}]"
    with pytest.raises(InputError, match="a crowd runs its sweeps'") as caught:
        edgetwin.load_scenario(CROWD, [sweeps, "network.bandwidth_mbps=5"])
    assert caught.value.field == "network.bandwidth_mbps"


@pytest.mark.timeout(60)
def test_a_plan_refuses_a_set_item_its_axes_replace(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(InputError) as caught:  # the axes run 4 devices
        edgetwin.run_plan(PLAN, out=out, overrides=[f"set=[devices.0.count=4, {ITEM}]"])
    assert caught.value.field == "set.1"
    assert "network.bandwidth_mbps has no effect: the axes give bandwidth_mbps" in str(caught.value)
    assert not out.exists()
