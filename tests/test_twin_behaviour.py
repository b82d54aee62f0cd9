"""Conservation, determinism, churn, battery and RAM in the twin."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import simpy

from edgetwin.availability_spec import LognormalDist
from edgetwin.profile import MB, DeviceProfile
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.sim.device import Device, draw_ms
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.network import Channel
from edgetwin.sim.runner import run_scenario, simulate
from edgetwin.sweep_points import configurations
from tests.conftest import REPO, toy_scenario


def jetson_scenario(**overrides: object) -> Scenario:
    scenario = load_scenario(REPO / "scenarios/prism_jetson.yaml")
    return scenario.model_copy(update=overrides)


def rows_of(scenario: Scenario) -> list[dict[str, object]]:
    fleet = build_fleet(scenario, REPO / "scenarios/prism_jetson.yaml")
    return [asdict(o.row) for o in run_scenario(scenario, fleet)]


def test_values_of_l_or_cr_that_run_the_same_l_run_once() -> None:
    """ViT-B/16's 197 tokens on 2 devices: L 100 and 1000 are capped to the 99 rows of the
    larger partition, as L 99 is, and CR 4.96 resolves to L 20, as 4.95 does. Each ran and
    wrote the same row again, so results.csv held one key three times."""
    scenario = load_scenario(
        REPO / "scenarios/prism_jetson.yaml",
        [
            "strategies=[{name: prism, segments: [99, 100, 1000]},"
            " {name: prism, cr: [4.95, 4.96]}]",
            "sweeps=[{batch: [1, 2], bandwidth_mbps: [400]}]",
        ],
    )
    asked = [(c.segments, c.cr) for c in configurations(scenario) if c.batch == 1]
    assert asked == [(99, None), (None, 4.95)]  # the first asked of each
    rows = rows_of(scenario)
    assert [(r["batch"], r["segments"], r["cr"]) for r in rows] == [
        (1, 99, 0.99),
        (2, 99, 0.99),
        (1, 20, 4.92),
        (2, 20, 4.92),
    ]


def test_energy_is_power_times_time_in_each_state() -> None:
    scenario = load_scenario(REPO / "scenarios/prism_jetson.yaml", ["devices.0.count=4"])
    fleet = build_fleet(scenario, REPO / "scenarios/prism_jetson.yaml")
    for strategy, devices in (("voltage", 4), ("prism", 3), ("tensor_parallel", 2)):
        config = configurations(scenario)[0].model_copy(
            update={"strategy": strategy, "devices": devices, "batch": 4, "segments": 10}
        )
        outcome = simulate(scenario, fleet, config, 0)
        power = fleet[0].profile.power
        total = 0.0
        for name, times in outcome.time_by_state_ms.items():
            assert sum(times.values()) == pytest.approx(outcome.row.total_ms)  # no time lost
            for state, ms in times.items():
                joules = power.of(state) * ms / 1e3
                assert outcome.energy_by_state_j[name][state] == pytest.approx(joules)
                total += joules
        assert outcome.row.energy_j == pytest.approx(total)


def test_bytes_sent_equal_bytes_received_and_match_the_exchange() -> None:
    scenario = jetson_scenario()
    fleet = build_fleet(scenario, REPO / "scenarios/prism_jetson.yaml")
    config = configurations(scenario)[0].model_copy(
        update={"strategy": "prism", "devices": 2, "batch": 2, "segments": 10}
    )
    outcome = simulate(scenario, fleet, config, 0)
    assert outcome.row.bytes_sent == outcome.bytes_received  # 2 ranks: a ring forwards nothing
    # P = 2, L = 10: each rank sends 10 rows x 768 x 4 bytes x batch 2 per block, 12 blocks
    assert outcome.row.bytes_sent == 2 * 12 * 10 * 768 * 4 * 2


def test_bytes_received_count_the_runs_bytes_sent_count() -> None:
    """``bytes_received`` (what the network brought the devices) summed every batch, the
    warm-ups and a lost one included, while ``bytes_sent`` counts the measured batch of a
    run that finished: with two warm-up batches it said three times the exchange, and a
    lost run what it had carried before the device left."""
    path = REPO / "scenarios/prism_jetson.yaml"
    exchange = 2 * 12 * 10 * 768 * 4 * 2  # as above: 2 ranks, L 10, batch 2, 12 blocks
    for settings in (["warmup_batches=2"], []):
        scenario = load_scenario(path, settings)
        config = configurations(scenario)[0].model_copy(
            update={"strategy": "prism", "devices": 2, "batch": 2, "segments": 10}
        )
        outcome = simulate(scenario, build_fleet(scenario, path), config, 0)
        assert outcome.bytes_received == outcome.row.bytes_sent == exchange, settings
    away = "{up: {kind: constant, value_s: 0.05}, down: {kind: constant, value_s: 1}}"
    lost = load_scenario(path, [f"devices.0.availability={away}"])
    lost_config = config.model_copy(update={"strategy": "voltage", "segments": None})
    outcome = simulate(lost, build_fleet(lost, path), lost_config, 0)
    assert outcome.row.status.startswith("device lost")
    assert outcome.bytes_received == outcome.row.bytes_sent == 0


def test_bytes_sent_count_each_ranks_pieces_while_the_rings_carry_more() -> None:
    """3 devices, batch 2, 12 blocks: voltage's ring all-gather forwards each rank's
    piece (66 rows, padded) twice, tensor parallel's ring all-reduce sends 4/3 of the
    [197, 768] tensor per rank, twice a block; ``bytes_sent`` counts what each rank puts
    in (docs/llm.md), as the real code does, and the network carries the ring's bytes."""
    scenario = load_scenario(REPO / "scenarios/prism_jetson.yaml", ["devices.0.count=3"])
    fleet = build_fleet(scenario, REPO / "scenarios/prism_jetson.yaml")
    row_bytes = 2 * 768 * 4  # batch 2, fp32; the input is replicated: no scatter
    expected = {  # strategy: (pieces, wire) in rows per block
        "voltage": (3 * 66, 3 * 2 * 66),
        "tensor_parallel": (2 * 3 * 197, 2 * 4 * 197),
    }
    for strategy, (pieces, wire) in expected.items():
        config = configurations(scenario)[0].model_copy(
            update={"strategy": strategy, "devices": 3, "batch": 2}
        )
        outcome = simulate(scenario, fleet, config, 0)
        assert outcome.row.bytes_sent == 12 * pieces * row_bytes, strategy
        assert outcome.bytes_received == pytest.approx(12 * wire * row_bytes), strategy


@pytest.mark.parametrize("devices", [2, 3])
def test_a_tensor_parallel_block_pays_the_host_side_of_what_its_all_reduce_brought(
    devices: int,
) -> None:
    """A ring all-reduce brings each rank 2 (P-1) / P of the [N, D] tensor, which its host
    receives and sums: the step after it pays sync_host_ms_per_mb of those MB, as a
    position-wise block pays for the rows its all-gather brought (and the decoder for
    its all-reduces). 12 blocks of two all-reduces: 23 steps follow one (it paid none)."""
    scenario = load_scenario(REPO / "scenarios/prism_jetson.yaml", [f"devices.0.count={devices}"])
    config = configurations(scenario)[0].model_copy(
        update={"strategy": "tensor_parallel", "devices": devices, "batch": 2}
    )
    host_ms = []
    for per_mb in (0.0, 10.0):
        fleet = [
            dataclasses.replace(member, profile=_host_bound(member.profile, per_mb))
            for member in build_fleet(scenario, REPO / "scenarios/prism_jetson.yaml")
        ]
        outcome = simulate(scenario, fleet, config, 0)
        host_ms.append(outcome.time_by_state_ms[fleet[0].name]["host"])
    received_mb = 2 * (devices - 1) / devices * 2 * 197 * 768 * 4 / MB
    assert host_ms[1] - host_ms[0] == pytest.approx(23 * 10.0 * received_mb, rel=1e-9)


def _host_bound(profile: DeviceProfile, per_mb: float) -> DeviceProfile:
    """``profile`` whose synchronising host side outlasts every block's GPU work."""
    compute = profile.compute.model_copy(
        update={"sync_host_ms": 1e4, "sync_host_ms_per_mb": per_mb}
    )
    return profile.model_copy(update={"compute": compute})


def test_same_seed_same_rows_and_noise_follows_the_seed() -> None:
    noisy = jetson_scenario(noise_cv=0.1, repetitions=2)
    first, second = rows_of(noisy), rows_of(noisy)
    assert first == second
    reseeded = rows_of(noisy.model_copy(update={"seed": 1}))
    assert [r["total_ms"] for r in reseeded] != [r["total_ms"] for r in first]
    reps = [r["total_ms"] for r in first if r["strategy"] == "single" and r["batch"] == 1]
    assert len(set(reps)) == 2  # repetitions differ under noise


def test_a_configurations_noisy_rows_do_not_depend_on_the_sweep_around_it() -> None:
    """Its runs are seeded from what it is, not where it stands: the same rows from the
    whole sweep, from a scenario listing its strategy alone, and from a sweep in another
    order (a plan's axes); the streams were keyed by the configuration's index."""
    noisy = jetson_scenario(noise_cv=0.1, repetitions=2)

    def by_key(rows: list[dict[str, object]]) -> dict[tuple[object, ...], object]:
        keys = ("strategy", "devices", "batch", "bandwidth_mbps", "cr", "rep")
        return {tuple(r[k] for k in keys): r["total_ms"] for r in rows}

    whole = by_key(rows_of(noisy))
    alone = by_key(rows_of(noisy.model_copy(update={"strategies": noisy.strategies[1:2]})))
    reordered = noisy.model_copy(update={"sweeps": noisy.sweeps[::-1]})
    assert alone and all(whole[key] == value for key, value in alone.items())
    assert by_key(rows_of(reordered)) == whole
    assert len(set(alone.values())) == len(alone)  # noise is drawn: no two runs alike


def test_device_that_leaves_mid_batch_loses_it() -> None:
    scenario = load_scenario(
        REPO / "scenarios/prism_jetson.yaml",
        [
            "devices.0.availability={up: {kind: constant, value_s: 0.05}, "
            "down: {kind: constant, value_s: 1}}"
        ],
    )
    rows = rows_of(scenario)
    voltage = [r for r in rows if r["strategy"] == "voltage"]
    assert voltage and all(str(r["status"]).startswith("device lost") for r in voltage)
    assert all(r["total_ms"] != r["total_ms"] for r in voltage)  # NaN: no latency for a lost batch
    assert all(r["bytes_sent"] == 0 for r in voltage)  # nor bytes, as for a decoder


def test_battery_that_empties_ends_the_run(toy_profile_path: Path) -> None:
    scenario = toy_scenario(
        toy_profile_path,
        devices=[{"name": "dev", "profile": str(toy_profile_path), "count": 2, "battery_wh": 1e-6}],
    )
    fleet = build_fleet(scenario, None)
    outcome = simulate(scenario, fleet, configurations(scenario)[0], 0)
    assert outcome.row.status == "device lost: dev-0: battery empty"
    # 3.6 mJ at 3 W of staging lasts 1.2 ms... but staging takes only 0.5 ms,
    # then comm at 4 W: 1.5 mJ + 2.1 mJ at 4 W = 0.525 ms more: empty at 1.025 ms
    assert sum(outcome.time_by_state_ms["dev-0"].values()) == pytest.approx(1.025)


def test_no_battery_timer_past_the_end_of_the_run(toy_profile: DeviceProfile) -> None:
    """3.6 J at 1 W of idle empties at 3.6 s: a run over by 3 s schedules no timer for it."""
    for until_ms, empties in ((3000.0, False), (4000.0, True)):
        env = simpy.Environment()
        device = Device(env, "dev", toy_profile, toy_profile.ram_mb, 1e-3, drain_until_ms=until_ms)
        env.run()
        assert device.up is not empties
        assert env.now == pytest.approx(3600.0 if empties else 0.0)


def test_the_battery_empties_on_time_through_many_state_changes_with_one_timer(
    toy_profile: DeviceProfile,
) -> None:
    """36.1 J through cycles of 100 ms of comm (4 W) and 100 ms idle (1 W), 0.5 J a cycle:
    72 cycles, then 0.1 J lasts 25 ms of comm: empty at 14,425 ms. Every state change
    moves the moment the battery empties, sooner or later; the device keeps one timer
    standing for it (a replaced one waits out its time), so SimPy's queue holds a few
    events, not one per change (92 here when every change set a timer)."""
    env = simpy.Environment()
    device = Device(env, "dev", toy_profile, toy_profile.ram_mb, 36.1 / 3600)
    left: list[tuple[float, float | None]] = []  # (when, battery joules left)
    device.on_leave.append(lambda _cause: left.append((env.now, device.battery_j)))
    queue_lengths: list[int] = []

    def cycles() -> simpy.events.ProcessGenerator:
        while device.up:
            for state in ("comm", "idle"):
                device.enter(state)
                queue_lengths.append(len(env._queue))
                yield env.timeout(100.0)

    env.process(cycles())
    env.run()
    assert left == [(pytest.approx(14_425.0), 0.0)]
    assert len(queue_lengths) == 146 and max(queue_lengths) <= 6, queue_lengths


def test_model_that_does_not_fit_in_ram_fails(toy_profile_path: Path) -> None:
    scenario = load_scenario(REPO / "scenarios/prism_jetson.yaml", ["devices.0.ram_mb=300"])
    rows = rows_of(scenario)
    assert all(str(r["status"]).startswith("out of memory") for r in rows)
    roomy = load_scenario(REPO / "scenarios/prism_jetson.yaml", ["devices.0.ram_mb=1000"])
    assert all(r["status"] == "ok" for r in rows_of(roomy))


def test_channel_shares_capacity_between_concurrent_flows() -> None:
    env = simpy.Environment()
    channel = Channel(env, capacity_mbps=1.0)  # 1000 bits per ms
    done: dict[str, float] = {}
    for name, nbytes in (("short", 125), ("long", 375)):  # 1000 and 3000 bits
        event = channel.send(nbytes)
        event.callbacks.append(lambda _e, n=name: done.__setitem__(n, env.now))
    env.run()
    # both at 500 bit/ms until the short one ends at 2 ms; then 2000 bits alone: 4 ms
    assert done == pytest.approx({"short": 2.0, "long": 4.0})
    assert channel.bits_delivered == pytest.approx(4000)


def test_device_books_idle_time_and_energy(toy_profile: DeviceProfile) -> None:
    env = simpy.Environment()
    device = Device(env, "d", toy_profile, toy_profile.ram_mb)

    def work() -> simpy.events.ProcessGenerator:
        yield env.timeout(2)
        yield from device.busy("compute", 3)

    env.process(work())
    env.run()
    device.close()
    assert device.time_ms["idle"] == pytest.approx(2) and device.time_ms["compute"] == 3
    assert device.total_energy_j == pytest.approx((2 * 1 + 3 * 10) / 1e3)


def test_channel_finishes_late_in_a_long_run_despite_clock_rounding() -> None:
    env = simpy.Environment(initial_time=1e9)  # a million seconds in: ms clock has ~1e-7 ms grain
    channel = Channel(env, capacity_mbps=1e-3)
    done = channel.send(1.0)  # 8 bits at 1 bit/ms
    env.run(until=done)
    assert env.now == pytest.approx(1e9 + 8)


def finish_times(
    channel: Channel, sends: list[tuple[float, float]], **kwargs: float
) -> list[float]:
    """Send (at_ms, nbytes) pairs on ``channel``; the time each one finishes."""
    env = channel.env
    done: list[float] = [0.0] * len(sends)

    def sender(i: int, at_ms: float, nbytes: float) -> simpy.events.ProcessGenerator:
        yield env.timeout(at_ms)
        yield channel.send(nbytes, **kwargs)
        done[i] = env.now

    for i, (at_ms, nbytes) in enumerate(sends):
        env.process(sender(i, at_ms, nbytes))
    env.run()
    return done


def test_stack_rate_caps_a_faster_link() -> None:
    channel = Channel(simpy.Environment(), capacity_mbps=1.0, stack_mbps=0.5)
    assert finish_times(channel, [(0, 125)]) == pytest.approx([2.0])  # 1000 bits at 500 bit/ms


def test_token_bucket_bursts_at_the_stack_rate_then_refills() -> None:
    channel = Channel(simpy.Environment(), 1.0, burst_bytes=250, stack_mbps=4.0)
    # 8000 bits: 4000 bit/ms while 2000 bits of tokens drain at 3000 bit/ms (2/3 ms,
    # 2667 bits sent), the other 5333 bits at 1000 bit/ms: done at 6 ms, not 8.
    # Idle until 7 ms refills 1000 bits; the next 1000 bits go at 4000 bit/ms: 0.25 ms.
    assert finish_times(channel, [(0, 1000), (7, 125)]) == pytest.approx([6.0, 7.25])


def test_loss_window_slows_what_a_message_sends_beyond_it() -> None:
    channel = Channel(simpy.Environment(), capacity_mbps=1.0)
    # 800 bits inside the window at 1000 bit/ms, the next 800 at half goodput
    times = finish_times(channel, [(0, 200)], window_bytes=100, loss_goodput=0.5)
    assert times == pytest.approx([2.4])


def test_warmup_batches_are_run_but_not_measured(toy_profile_path: Path) -> None:
    cold = toy_scenario(toy_profile_path)
    warm = toy_scenario(toy_profile_path, warmup_batches=2)
    fleet = build_fleet(cold, None)
    config = configurations(cold)[0]
    cold_out = simulate(cold, fleet, config, 0, record_intervals=True)
    warm_out = simulate(warm, fleet, config, 0, record_intervals=True)
    assert warm_out.row.total_ms == pytest.approx(cold_out.row.total_ms)
    assert warm_out.row.energy_j == pytest.approx(cold_out.row.energy_j)
    assert warm_out.row.bytes_sent == cold_out.row.bytes_sent  # the measured batch's only
    assert min(i.start_ms for i in warm_out.intervals) == pytest.approx(2 * cold_out.row.total_ms)


def test_a_draw_beyond_what_a_float_holds_is_a_time_that_never_comes() -> None:
    """A lognormal up time of sigma 1e308 printed numpy's overflow warning on stderr."""
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        draws = [
            draw_ms(LognormalDist(kind="lognormal", median_s=1, sigma=1e308), rng) for _ in range(4)
        ]
    assert float("inf") in draws  # a normal draw above 0 (one in two) overflows
    assert all(d >= 0 for d in draws)
