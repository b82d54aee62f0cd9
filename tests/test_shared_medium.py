"""The shared medium shares its airtime per station, as WiFi's DCF, then per flow."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy

from edgetwin.sim.network import Channel
from tests.test_crowd_events import STAGE, gantt, simulate, toy_crowd, toy_phone_file

# 1 Mbit/s: 1000 bits per ms. The access point sends three 1000-bit flows, a phone one
# of 2000 bits. Per station: the phone 1/2 (500 bit/ms, done at 4 ms), each of the
# access point's flows 1/6 (667 bits by 4 ms, then 333 bits each at 1/3: 5 ms). Per
# flow: 1/4 each (the access point 3/4): its flows done at 4 ms, the phone's 1000 bits
# left alone: 5 ms.
SENDS = [("ap", 125), ("ap", 125), ("ap", 125), ("phone", 250)]


def finish_ms(channel: Channel, sends: list[tuple[str | None, float]]) -> list[float]:
    """Start every (station, nbytes) send at 0 ms; the time each one finishes."""
    env = channel.env
    done: list[float] = [0.0] * len(sends)
    for i, (station, nbytes) in enumerate(sends):
        event = channel.send(nbytes, station=station)
        event.callbacks.append(lambda _e, i=i: done.__setitem__(i, env.now))
    env.run()
    return done


def test_each_sending_station_gets_an_equal_share_split_among_its_flows() -> None:
    channel = Channel(simpy.Environment(), capacity_mbps=1.0, per_station=True)
    assert finish_ms(channel, SENDS) == pytest.approx([5.0, 5.0, 5.0, 4.0])


def test_a_link_shares_per_flow_whoever_sends() -> None:
    channel = Channel(simpy.Environment(), capacity_mbps=1.0)
    assert finish_ms(channel, SENDS) == pytest.approx([4.0, 4.0, 4.0, 5.0])


def test_flows_without_a_station_are_each_a_station_of_their_own() -> None:
    channel = Channel(simpy.Environment(), capacity_mbps=1.0, per_station=True)
    anonymous: list[tuple[str | None, float]] = [(None, nbytes) for _, nbytes in SENDS]
    assert finish_ms(channel, anonymous) == pytest.approx([4.0, 4.0, 4.0, 5.0])


def test_a_cancelled_flow_leaves_its_stations_share_to_its_other_flows() -> None:
    channel = Channel(simpy.Environment(), capacity_mbps=1.0, per_station=True)
    env = channel.env
    ap = [channel.send(125, station="ap") for _ in range(2)]
    phone = channel.send(250, station="phone")
    env.run(until=1.0)  # the access point's flows 250 bits each, the phone 500
    channel.cancel(ap[1])
    env.run(until=ap[0])  # 750 bits left at 500 bit/ms: 2.5 ms
    assert env.now == pytest.approx(2.5)
    env.run(until=phone)  # 2000 - 1250 at 500 bit/ms to 2.5 ms: 750 left, alone: 3.25 ms
    assert env.now == pytest.approx(3.25)


def test_a_phones_result_takes_half_the_medium_beside_the_foremans_two_inputs(
    tmp_path: Path,
) -> None:
    fast = toy_phone_file(tmp_path)
    slow = toy_phone_file(tmp_path, "slow_phone", session__floor_s=1.125)
    raw = toy_crowd(
        [
            {"name": "fast", "profile": fast, "count": 1},
            {"name": "slow", "profile": slow, "count": 2},
        ],
        inputs=3,
        stages=[{"name": "s0", **STAGE}],
    )
    raw["network"]["medium"] = "shared"  # 10 bytes/ms of airtime for every station
    outcome = simulate(raw)
    # fast: i0's input alone (10 ms + 100 B), inference to 1120 ms, its result's message
    # cost to 1130 and 50 B alone until the slow phones' inputs (loaded at 1125, their
    # message cost to 1135) start. Then the foreman's two inputs share the foreman's
    # half: the result's last 50 B at 5 B/ms end at 1145 (per flow, 10/3 B/ms: 1150);
    # the inputs have 75 B left each, at 5 B/ms: 1160.
    assert gantt(outcome, "fast")[-1] == ("transfer", 1120, 1145, "i0 s0 out")
    assert [a[:3] for a in gantt(outcome, "slow-0")[1:2]] == [("transfer", 1125, 1160)]
