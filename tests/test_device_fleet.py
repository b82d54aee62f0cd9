"""A fleet's members, defined once (``device_fleet``): what the twin's devices run on and
what a real decoder run's launcher splits the layers on (``configuration.fleet_layers``)."""

from __future__ import annotations

from edgetwin.calibration.reference_twin import simulate_config
from edgetwin.configuration import fleet_layers
from edgetwin.device_fleet import fleet_members
from edgetwin.device_spec import DeviceSpec
from edgetwin.profile import load_profile
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import simulate
from edgetwin.sweep_points import configurations
from tests.conftest import REPO

JETSON = REPO / "scenarios/llm_jetson.yaml"
BOARDS = (
    "devices=[{name: lead, profile: jetson_orin_nano},"
    " {name: jetson, profile: jetson_orin_nano, count: 2}]"
)
PIPELINE = ["strategies=[{name: pipeline}]", "sweeps=[{devices: [3], prompt_tokens: [512]}]"]


def _boards(*overrides: str) -> Scenario:
    """A lead board, then a class of two boards with ``overrides`` (``devices.1.KEY=V``)."""
    return load_scenario(JETSON, [BOARDS, *overrides, *PIPELINE])


def test_a_class_expanded_by_count_gives_each_member_its_ram_and_memory_bandwidth() -> None:
    scenario = _boards("devices.1.ram_mb=900", "devices.1.memory_bandwidth_gbps=200")
    members = fleet_members(scenario, JETSON)
    profile = load_profile("jetson_orin_nano")
    assert profile.memory is not None and profile.memory.bandwidth_gbps != 200
    assert [m.name for m in members] == ["lead", "jetson-0", "jetson-1"]
    assert [m.ram_mb for m in members] == [profile.ram_mb, 900, 900]
    bandwidths = [m.profile.memory.bandwidth_gbps for m in members if m.profile.memory]
    assert bandwidths == [profile.memory.bandwidth_gbps, 200, 200]
    assert build_fleet(scenario, JETSON) == members  # the twin's, checked


def test_the_twin_and_a_real_runs_launcher_split_the_layers_on_the_same_members() -> None:
    """Two boards with less RAM and faster memory than their profile's, after a lead board:
    each override moves the pipeline's split, and the twin's row and ``fleet_layers`` (what
    a local or emulator run's launcher gives its ranks) split alike on both."""
    splits = {}
    for overrides in (
        (),
        ("devices.1.memory_bandwidth_gbps=200",),
        ("devices.1.ram_mb=900", "devices.1.memory_bandwidth_gbps=200"),
    ):
        scenario = _boards(*overrides)
        (config,) = configurations(scenario)
        row = simulate(scenario, build_fleet(scenario, JETSON), config, rep=0).row
        layers = fleet_layers(scenario, config)
        assert layers is not None and row.ok
        assert row.layer_split == "+".join(map(str, layers))
        splits[overrides] = layers
    assert len(set(splits.values())) == 3, splits  # each override plays


def test_a_bootstrap_variant_keeps_the_class_s_memory_bandwidth() -> None:
    """``sample_profiles`` runs each repetition on a bootstrap variant of the profile; a
    memory bandwidth the class gives stays in place of a sampled one."""
    profile = load_profile("jetson_orin_nano")
    assert profile.memory is not None
    sampled = {"memory": [{"bandwidth_gbps": 3.0}, {"bandwidth_gbps": 5.0}]}
    fitted = profile.model_copy(update={"fit": {**profile.fit, "bootstrap_samples": sampled}})
    scenario = load_scenario(JETSON)
    for given, want in ((None, 5.0), (200.0, 200.0)):
        update = {"profile": fitted, "memory_bandwidth_gbps": given}
        spec = scenario.devices[0].model_copy(update=update)
        members = fleet_members(scenario.model_copy(update={"devices": (spec,)}), None)
        variants = [member.variant(1).profile.memory for member in members]
        assert [m.bandwidth_gbps for m in variants if m] == [want] * spec.count


def test_a_reference_fit_s_twin_runs_on_the_members_a_scenario_s_class_gives() -> None:
    """A measured table's configuration through the twin (``reference_twin``, what a
    reference fit and its held-out refits predict) ran on members built by hand,
    ``dev-0``, ``dev-1``, ...: one board was ``dev-0`` where a class of one is ``dev``."""
    scenario = load_scenario(REPO / "scenarios/prism_jetson.yaml")
    profile = load_profile("jetson_orin_nano")
    by_devices = {config.devices: config for config in configurations(scenario)}
    assert set(by_devices) == {1, 2}
    for devices, config in by_devices.items():
        spec = DeviceSpec(name="dev", profile=profile, count=devices)
        members = fleet_members(scenario.model_copy(update={"devices": (spec,)}), None)
        outcome = simulate_config(scenario, profile, config)
        assert list(outcome.energy_by_state_j) == [member.name for member in members]
