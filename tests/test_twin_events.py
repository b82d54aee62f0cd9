"""Exact event traces of tiny scenarios, worked out by hand (see conftest's toy numbers)."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy
import yaml

from edgetwin.network_spec import NetworkSpec
from edgetwin.profile import DeviceProfile
from edgetwin.sim.collectives import Rendezvous
from edgetwin.sim.device import Device
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.network import Network
from edgetwin.sim.runner import RunOutcome, simulate
from edgetwin.sweep_points import configurations
from tests.conftest import TOY_MODEL, toy_scenario

HEAD_MS = 32 / 3840  # classifier head: 2 x width 8 x 2 classes FLOPs on the terminal


def run_toy(profile_path: Path, **overrides: object) -> RunOutcome:
    scenario = toy_scenario(profile_path, **overrides)
    config = configurations(scenario)[0]
    return simulate(scenario, build_fleet(scenario, None), config, 0, record_intervals=True)


def timeline(outcome: RunOutcome, device: str) -> list[tuple[str, float, float]]:
    return [
        (i.state, round(i.start_ms, 9), round(i.end_ms, 9))
        for i in outcome.intervals
        if i.device == device and i.state != "idle"
    ]


def test_voltage_two_devices_one_block_exact_trace(toy_profile_path: Path) -> None:
    outcome = run_toy(toy_profile_path)
    # d2h 0.5 ms; allgather: 1 ms message overhead + 512 bits at 512 bit/ms;
    # h2d 0.5 ms; block 3840 FLOPs at 3840 FLOP/ms; the terminal adds the head.
    expected_both = [
        ("staging", 0.0, 0.5),
        ("comm", 0.5, 2.5),
        ("staging", 2.5, 3.0),
        ("compute", 3.0, 4.0),
    ]
    assert timeline(outcome, "dev-0") == [*expected_both, ("compute", 4.0, round(4 + HEAD_MS, 9))]
    assert timeline(outcome, "dev-1") == expected_both
    row = outcome.row
    assert row.total_ms == pytest.approx(4 + HEAD_MS)
    assert (row.compute_ms, row.staging_ms, row.comm_ms) == pytest.approx((1 + HEAD_MS, 1, 2))
    assert row.bytes_sent == 128  # each device sends its 2 rows x 8 x 4 bytes once
    # joules: staging 1 ms x 3 W, comm 2 ms x 4 W, compute x 10 W, dev-1 idles during the head
    expected_mj = 2 * (3 + 8 + 10) + 10 * HEAD_MS + 1 * HEAD_MS
    assert row.energy_j == pytest.approx(expected_mj / 1e3)


def test_shared_medium_halves_each_senders_rate(toy_profile_path: Path) -> None:
    outcome = run_toy(toy_profile_path, network={"bandwidth_mbps": 0.512, "medium": "shared"})
    # both 512-bit messages on one 512 bit/ms channel at once: 2 ms instead of 1
    assert timeline(outcome, "dev-1") == [
        ("staging", 0.0, 0.5),
        ("comm", 0.5, 3.5),
        ("staging", 3.5, 4.0),
        ("compute", 4.0, 5.0),
    ]


def test_prism_one_segment_exchanges_means_only(toy_profile_path: Path) -> None:
    outcome = run_toy(toy_profile_path, strategies=[{"name": "prism", "segments": 1}])
    # 1 row (256 bits) each way: 1 ms overhead + 0.5 ms; block over q=2, kv=3 rows
    # is 3520 FLOPs plus 8 additions for the mean.
    compute_ms = 3528 / 3840
    assert timeline(outcome, "dev-1") == [
        ("staging", 0.0, 0.5),
        ("comm", 0.5, 2.0),
        ("staging", 2.0, 2.5),
        ("compute", 2.5, round(2.5 + compute_ms, 9)),
    ]
    assert outcome.row.bytes_sent == 64


def test_a_ring_step_waits_for_the_notice_then_latency_and_overhead(toy_profile_path: Path) -> None:
    """The all-gather's one ring step: the receiver's ready-to-receive notice crosses
    (2 ms: GLOO sends no data before it, and both ranks post at once), then the message
    waits the latency (2 ms) and its overhead (1 ms) and moves its 512 bits (1 ms). It took
    4 ms without the notice; the emulator's one-segment step takes 2.05 latencies."""
    outcome = run_toy(toy_profile_path, network={"bandwidth_mbps": 0.512, "latency_ms": 2.0})
    assert timeline(outcome, "dev-1")[1] == ("comm", 0.5, 6.5)


def test_a_scatter_waits_for_the_notice_of_a_receiver_that_posted_first(
    toy_profile_path: Path,
) -> None:
    """The terminal's scatter: dev-1 embeds nothing and posts its receive at 0; its notice
    crosses by 2 ms, after the terminal's 0.5 ms copy, so the rows leave at 2 ms, not 0.5,
    then wait the latency (2 ms) and overhead (1 ms) and move 512 bits (1 ms): 6.0, was 4.5.
    The all-gather's step waits for the notice of dev-1, the last to arrive (7.0 + 2 ms)."""
    outcome = run_toy(
        toy_profile_path,
        input_source="terminal",
        network={"bandwidth_mbps": 0.512, "latency_ms": 2.0},
    )
    assert timeline(outcome, "dev-1")[:4] == [
        ("comm", 0.0, 6.0),
        ("staging", 6.0, 6.5),
        ("staging", 6.5, 7.0),
        ("comm", 7.0, 13.0),
    ]
    assert outcome.row.comm_ms == pytest.approx(5.5 + 6.5)


def test_each_receiver_of_a_broadcast_waits_for_its_own_notice(
    toy_profile: DeviceProfile,
) -> None:
    """A broadcast of 512 bits from rank 2 (0.512 Mbps, latency 2 ms, overhead 1 ms): rank 1
    posted at 0, its notice is back by 2, so its copy leaves as the root comes, at 3.5; rank
    0 posted at 3, its copy leaves at 5. The root's uplink carries rank 1's copy alone from
    6.5 to 7.5, rank 0's from 8 to 9: the broadcast ends at 9. Without notices both copies
    left at 3.5 and shared the uplink to 8.5; a whole latency for each would end it at 10.5."""
    env = simpy.Environment()
    devices = [Device(env, f"dev-{rank}", toy_profile, 1000) for rank in range(3)]
    stacks = {device.name: toy_profile.network for device in devices}
    network = Network(env, NetworkSpec(bandwidth_mbps=0.512, latency_ms=2), 0.512, stacks)
    rendezvous = Rendezvous(env, network, devices)
    ended: dict[int, float] = {}

    def rank(index: int, arrives_ms: float) -> simpy.events.ProcessGenerator:
        yield env.timeout(arrives_ms)
        yield rendezvous.join("broadcast", index, "broadcast", [0, 0, 64])
        ended[index] = env.now

    for index, arrives_ms in enumerate((3.0, 0.0, 3.5)):
        env.process(rank(index, arrives_ms))
    env.run()
    assert ended == {0: pytest.approx(9.0), 1: pytest.approx(9.0), 2: pytest.approx(9.0)}
    assert network.bytes_received == {"dev-0": 64, "dev-1": 64, "dev-2": 0}


def test_bandwidth_schedule_applies_during_the_transfer(toy_profile_path: Path) -> None:
    network = {"bandwidth_mbps": 0.512, "schedule": [{"at_ms": 2.0, "bandwidth_mbps": 0.256}]}
    outcome = run_toy(toy_profile_path, network=network)
    # bits start at 1.5 ms; 256 bits by 2.0 ms, the other 256 at 256 bit/ms: done at 3.0 ms
    assert timeline(outcome, "dev-1")[1] == ("comm", 0.5, 3.0)


def test_host_bound_block_waits_for_the_host(toy_profile_path: Path, tmp_path: Path) -> None:
    profile = toy_profile_path.read_text().replace("sync_host_ms: 0.0", "sync_host_ms: 3.0")
    path = tmp_path / "host_bound.yaml"
    path.write_text(profile)
    outcome = run_toy(path)
    # the block needs 1 ms of GPU but 3 ms on the host: 1 ms compute, then 2 ms host-bound
    states = timeline(outcome, "dev-1")[-2:]
    assert states == [("compute", 3.0, 4.0), ("host", 4.0, 6.0)]
    assert outcome.row.compute_ms == pytest.approx(3 + HEAD_MS)


def test_single_device_has_no_staging_or_comm(toy_profile_path: Path) -> None:
    outcome = run_toy(toy_profile_path, strategies=[{"name": "single"}])
    # whole block on one device: q = kv = 4 rows: 2 x (640 x 4 + 512 x 2 + 256) FLOPs
    block_ms = 2 * (640 * 4 + 64 * 2 * 4 + 2 * 4 * 4 * 8) / 3840
    assert timeline(outcome, "dev-0") == [
        ("compute", 0.0, round(block_ms, 9)),
        ("compute", round(block_ms, 9), round(block_ms + HEAD_MS, 9)),
    ]
    assert outcome.row.staging_ms == 0 and outcome.row.comm_ms == 0


def _toy_with(toy_profile_path: Path, tmp_path: Path, **staging: float) -> Path:
    profile = yaml.safe_load(toy_profile_path.read_text())
    profile["staging"].update(staging)
    path = tmp_path / "staged.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def test_d2h_copy_waits_for_the_kernel_building_its_tensor(
    toy_profile_path: Path, tmp_path: Path
) -> None:
    # each rank's partition: 2 rows x 8 x 4 bytes = 64 bytes; 0.25 ms of wait for them
    path = _toy_with(toy_profile_path, tmp_path, d2h_wait_ms_per_mb=0.25 * 1e6 / 64)
    voltage = timeline(run_toy(path), "dev-1")
    assert voltage == [
        ("staging", 0.0, 0.75),
        ("comm", 0.75, 2.75),
        ("staging", 2.75, 3.25),  # host->GPU: no kernel to wait for
        ("compute", 3.25, 4.25),
    ]
    # prism sends one mean row, but the kernel that builds it reads the whole partition
    prism = timeline(run_toy(path, strategies=[{"name": "prism", "segments": 1}]), "dev-1")
    assert prism[0] == ("staging", 0.0, 0.75)


def test_only_copies_above_the_large_copy_size_pay_its_extra(
    toy_profile_path: Path, tmp_path: Path
) -> None:
    # own piece 64 bytes (below 102.4), gathered tensor 128 bytes (above)
    path = _toy_with(toy_profile_path, tmp_path, large_copy_kb=0.1, large_copy_ms=0.25)
    assert timeline(run_toy(path), "dev-1") == [
        ("staging", 0.0, 0.5),
        ("comm", 0.5, 2.5),
        ("staging", 2.5, 3.25),
        ("compute", 3.25, 4.25),
    ]


def test_the_terminal_embeds_the_whole_input_over_all_its_rows(
    toy_profile_path: Path, tmp_path: Path
) -> None:
    """Patches of 1 pixel x 8 channels: 3 patches x 8 x 8 x 2 = 384 FLOPs, 0.1 ms at 3840
    FLOP/ms; rows_half_util 4. The terminal of a terminal-input run embeds the whole input
    (4 rows): 0.1 x (1 + 4 / 4) = 0.2 ms, as one device alone does; its partition's 2 rows
    gave 0.3 ms. With the input replicated each rank embeds its own 2 rows: 192 FLOPs x
    (1 + 4 / 2) = 0.15 ms."""
    profile = yaml.safe_load(toy_profile_path.read_text())
    profile["compute"]["rows_half_util"] = 4.0
    path = tmp_path / "under_used.yaml"
    path.write_text(yaml.safe_dump(profile))
    model = {**TOY_MODEL, "patch_size": 1, "channels": 8}
    for strategy, source, embed_ms in (
        ("voltage", "terminal", 0.2),
        ("single", "terminal", 0.2),
        ("voltage", "replicated", 0.15),
    ):
        outcome = run_toy(path, model=model, input_source=source, strategies=[{"name": strategy}])
        first = next(i for i in outcome.intervals if i.device == "dev-0")
        assert (first.state, first.label, first.start_ms) == ("compute", "embed", 0.0)
        assert first.end_ms == pytest.approx(embed_ms)
