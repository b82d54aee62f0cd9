"""Co-located ranks (docs/twin.md, "Co-located ranks"): a shared accelerator and one board's
power, in real SimPy runs; default placement leaves every row as it was; bad hosts exit 2."""

from __future__ import annotations

import copy
from collections.abc import Generator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import simpy
import yaml

from edgetwin.cli import main
from edgetwin.device_spec import HostSpec
from edgetwin.models import registry
from edgetwin.number_text import exact_text
from edgetwin.profile import MB
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.host import Host
from edgetwin.sim.runner import run_scenario, simulate
from edgetwin.sweep_points import Configuration, configurations
from tests.conftest import REPO, toy_scenario
from tests.test_twin_events import HEAD_MS, timeline

pytestmark = pytest.mark.timeout(120)
ON_ONE_GPU: dict[str, Any] = {"hosts": [{"name": "gpu0"}]}


def finish_ms(spec: HostSpec, pieces: list[tuple[float, float]]) -> list[float]:
    """When each piece (start ms, alone ms of work) is done on one shared host."""
    env = simpy.Environment()
    host = Host(env, spec)
    done = [0.0] * len(pieces)

    def piece(i: int, start_ms: float, work_ms: float) -> Generator[simpy.Event, object, None]:
        yield env.timeout(start_ms)
        yield host.accelerator.run(work_ms)
        done[i] = env.now

    for i, (start_ms, work_ms) in enumerate(pieces):
        env.process(piece(i, start_ms, work_ms))
    env.run()
    return done


def test_two_equal_pieces_at_once_take_twice_as_long() -> None:
    assert finish_ms(HostSpec(name="gpu"), [(0, 3.0)]) == [3.0]
    assert finish_ms(HostSpec(name="gpu"), [(0, 3.0), (0, 3.0)]) == pytest.approx([6.0, 6.0])


def test_when_one_piece_ends_the_other_speeds_up() -> None:
    # 1 ms and 3 ms at once: both at half speed until 2 ms, then the long one alone: 2 ms left
    assert finish_ms(HostSpec(name="gpu"), [(0, 1.0), (0, 3.0)]) == pytest.approx([2.0, 4.0])
    # a second piece arriving at 1 ms halves the first one's rate from then on
    assert finish_ms(HostSpec(name="gpu"), [(0, 2.0), (1, 2.0)]) == pytest.approx([3.0, 4.0])


def test_slots_and_other_load_set_the_rate() -> None:
    two_cores = HostSpec(name="cpu", compute_slots=2)
    assert finish_ms(two_cores, [(0, 3.0), (0, 3.0)]) == pytest.approx([3.0, 3.0])
    assert finish_ms(two_cores, [(0, 3.0)] * 4) == pytest.approx([6.0] * 4)
    busy_phone = HostSpec(name="phone", other_load=1)  # another app always busy
    assert finish_ms(busy_phone, [(0, 3.0)]) == pytest.approx([6.0])
    # with a second piece the three share: 1/3 each
    assert finish_ms(busy_phone, [(0, 3.0), (0, 3.0)]) == pytest.approx([9.0, 9.0])


@pytest.mark.timeout(20)
def test_a_host_slowed_a_millionfold_late_in_a_run_finishes() -> None:
    """What float rounding leaves of a piece, a hair of alone-time, took longer at the
    slow rate than the clock could still add to now: the wake-up landed on now and
    advanced nothing, forever (prism_jetson with other_load 1e6 hung)."""
    slowed = HostSpec(name="gpu", other_load=1e6)
    pieces = [(1e9 + k, 0.3 + k / 7) for k in range(5)]
    finished = finish_ms(slowed, pieces)
    assert all(f > 1e9 for f in finished)
    assert finished[0] == pytest.approx(1e9 + 0.3 * 1e6, rel=0.05)


def run_toy(toy_profile_path: Path, **overrides: Any) -> Any:
    scenario = toy_scenario(toy_profile_path, **overrides)
    fleet = build_fleet(scenario, None)
    return simulate(scenario, fleet, configurations(scenario)[0], 0, record_intervals=True)


def on_one_gpu(toy_profile_path: Path) -> dict[str, Any]:
    device = {"name": "dev", "profile": str(toy_profile_path), "count": 2, "host": "gpu0"}
    return {**ON_ONE_GPU, "devices": [device]}


def test_colocated_ranks_compute_in_turn_and_the_board_is_powered_once(
    toy_profile_path: Path,
) -> None:
    outcome = run_toy(toy_profile_path, **on_one_gpu(toy_profile_path))
    # as test_voltage_two_devices_one_block_exact_trace, but both blocks (1 ms each alone)
    # on one GPU at once: 2 ms; the terminal's head then runs alone at full speed
    shared = [("staging", 0.0, 0.5), ("comm", 0.5, 2.5), ("staging", 2.5, 3.0)]
    assert timeline(outcome, "dev-1") == [*shared, ("compute", 3.0, 5.0)]
    head = ("compute", 5.0, round(5 + HEAD_MS, 9))
    assert timeline(outcome, "dev-0") == [*shared, ("compute", 3.0, 5.0), head]
    row = outcome.row
    assert row.total_ms == pytest.approx(5 + HEAD_MS)
    assert row.compute_ms == pytest.approx(2 + HEAD_MS)
    # one board at its most active state's power: staging 3 W, comm 4 W, compute 10 W
    # (both ranks, or one with the other idle), instead of two boards' worth
    expected_mj = 3 * 0.5 + 4 * 2 + 3 * 0.5 + 10 * 2 + 10 * HEAD_MS
    assert row.energy_j == pytest.approx(expected_mj / 1e3)
    # the board's energy is split over the ranks: the idle rank books none during the head
    assert outcome.energy_by_state_j["dev-1"]["idle"] == 0.0
    assert sum(sum(e.values()) for e in outcome.energy_by_state_j.values()) == pytest.approx(
        row.energy_j
    )


def rows(scenario: Scenario, path: Path) -> list[dict[str, Any]]:
    return [asdict(o.row) for o in run_scenario(scenario, build_fleet(scenario, path))]


def test_one_rank_per_host_changes_no_row() -> None:
    """A host with one rank and no other load is that rank's own device: rows identical."""
    path = REPO / "scenarios" / "prism_jetson.yaml"
    alone = load_scenario(path)
    (boards,) = alone.devices
    devices = tuple(
        boards.model_copy(update={"name": f"{boards.name}-{k}", "count": 1, "host": f"board{k}"})
        for k in range(boards.count)
    )
    hosts = tuple(HostSpec(name=f"board{k}") for k in range(boards.count))
    placed = alone.model_copy(update={"devices": devices, "hosts": hosts})
    assert repr(rows(placed, path)) == repr(rows(alone, path))  # to the last bit, NaN too


def test_h200_scenarios_put_both_ranks_on_one_gpu() -> None:
    for name in ("h200_loopback", "h200_bw"):
        scenario = load_scenario(REPO / "scenarios" / f"{name}.yaml")
        assert [d.host for d in scenario.devices] == ["h200"]
        assert [(h.name, h.compute_slots) for h in scenario.hosts] == [("h200", 1.0)]
    path = REPO / "scenarios" / "h200_loopback.yaml"
    shared = load_scenario(path, ["sweeps.0.batch=[1]"])
    own = shared.model_copy(
        update={"hosts": (), "devices": (shared.devices[0].model_copy(update={"host": None}),)}
    )
    by_strategy = {
        (s["strategy"], o["strategy"]): (s, o)
        for s, o in zip(rows(shared, path), rows(own, path), strict=True)
    }
    single, single_own = by_strategy["single", "single"]
    assert repr(single) == repr(single_own)  # one rank: nothing to share
    prism, prism_own = by_strategy["prism", "prism"]
    assert prism["compute_ms"] > 1.8 * prism_own["compute_ms"]  # both ranks compute at once
    assert prism["staging_ms"] == prism_own["staging_ms"]  # the traces' staging: as fitted
    assert prism["total_ms"] > prism_own["total_ms"]
    assert prism["energy_j"] < prism_own["energy_j"]  # the board's idle power once


BAD_HOSTS = [
    ({"devices__0__host": "gpu1"}, "field 'devices.0.host': unknown host 'gpu1' (hosts: gpu0)"),
    ({"hosts": [{"name": "gpu0"}, {"name": "gpu0"}]}, "host names must be unique"),
    ({"hosts": [{"name": "gpu0"}, {"name": "spare"}]}, "field 'hosts.1': no device class runs on"),
    ({"hosts__0__compute_slots": 0}, "hosts.0.compute_slots"),
    ({"hosts__0__other_load": -1}, "hosts.0.other_load"),
    ({"devices__0__battery_wh": 5}, "field 'devices.0.battery_wh': a device on a shared host"),
    (
        {"model": {"preset": "gpt2_small"}, "strategies": [{"name": "single"}]},
        "field 'devices.0.host': co-located ranks run encoder models only",
    ),
]


@pytest.mark.parametrize("change, expected", BAD_HOSTS, ids=[b[1][:24] for b in BAD_HOSTS])
def test_bad_host_exits_2_naming_file_and_field(
    change: dict[str, Any], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw: dict[str, Any] = copy.deepcopy(
        {
            "name": "coloc",
            "model": {"preset": "vit_b16"},
            "devices": [{"name": "rank", "profile": "h200_loopback", "count": 2, "host": "gpu0"}],
            **ON_ONE_GPU,
            "strategies": [{"name": "prism", "segments": 10}],
        }
    )
    for dotted, value in change.items():
        *parents, last = dotted.split("__")
        node: Any = raw
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] = value
    scenario = tmp_path / "coloc.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    code = main(["run", str(scenario), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert str(scenario) in err and expected in err
    assert not (tmp_path / "out").exists()


def test_a_profile_with_a_battery_on_a_shared_host_exits_2(
    toy_profile_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = yaml.safe_load(toy_profile_path.read_text())
    toy_profile_path.write_text(yaml.safe_dump({**profile, "battery_wh": 1.0}))
    scenario = tmp_path / "phone.yaml"
    raw = toy_scenario(toy_profile_path, **on_one_gpu(toy_profile_path)).model_dump(mode="json")
    scenario.write_text(yaml.safe_dump(raw))
    code = main(["run", str(scenario), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and str(scenario) in err
    assert "devices.0.host" in err and "profile toy has a battery" in err
    assert not (tmp_path / "out").exists()


def _h200_status(ram_mb: float, strategy: str, sets: tuple[str, ...] = ()) -> str:
    """h200_loopback's two ranks on one GPU of ``ram_mb``, batch 32."""
    path = REPO / "scenarios" / "h200_loopback.yaml"
    scenario = load_scenario(path, [f"devices.0.ram_mb={ram_mb}", *sets])
    devices = 1 if strategy == "single" else 2
    config = Configuration(strategy=strategy, devices=devices, batch=32, bandwidth_mbps=100000)
    return simulate(scenario, build_fleet(scenario, path), config, 0).row.status


def test_ranks_on_one_host_hold_their_memory_in_its_one_memory() -> None:
    """Each rank of Voltage holds the whole model's weights and its activations: on one GPU
    they hold them in its one memory. A GPU that holds one rank's (and single's) but not
    two ranks' is out of memory for Voltage on the second rank to load; each rank was
    held against the whole GPU's memory, and the run was ok. Ranks on hosts of their own
    each have their own."""
    model = load_scenario(REPO / "scenarios" / "h200_loopback.yaml").encoder
    plan = registry.cost_plan(model, "voltage", 2)
    weights = plan.weight_bytes_per_device
    need_mb = [(weights + plan.activation_bytes(rank, 32, 4)) / MB for rank in (0, 1)]
    ram_mb = max(need_mb) + 0.5 * min(need_mb)
    assert _h200_status(ram_mb, "single") == "ok"
    assert _h200_status(ram_mb, "voltage") == (
        f"out of memory on rank-1: weights and activations need {need_mb[1]:,.1f} MB beside "
        f"the {need_mb[0]:,.1f} MB its host's other ranks hold, of {exact_text(ram_mb)} MB"
    )
    assert _h200_status(sum(need_mb) * 1.001, "voltage") == "ok"
    gpu = f"profile: h200_loopback, ram_mb: {ram_mb}"
    apart = ("hosts=[]", f"devices=[{{name: a, {gpu}}}, {{name: b, {gpu}}}]")
    assert _h200_status(ram_mb, "voltage", apart) == "ok"


def test_classes_of_different_ram_on_one_host_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = yaml.safe_load((REPO / "scenarios" / "h200_loopback.yaml").read_text())
    raw["devices"] = [
        {"name": "a", "profile": "h200_loopback", "host": "h200"},
        {"name": "b", "profile": "h200_loopback", "host": "h200", "ram_mb": 80000},
    ]
    scenario = tmp_path / "two_rams.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    code = main(["run", str(scenario), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{scenario}: field 'devices.1.ram_mb': 80,000 MB, where devices.0 on the same " in err
    assert "host 'h200' has 143,360 MB: ranks on one host share its memory" in err
    assert not (tmp_path / "out").exists()
