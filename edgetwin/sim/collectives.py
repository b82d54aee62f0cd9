"""Collectives built from point-to-point transfers (ring algorithms, as GLOO's).

- allgather: P-1 steps; in step k rank i forwards piece (i - k) mod P to i+1.
- allreduce: reduce-scatter then allgather, 2(P-1) steps of 1/P of the tensor.
- scatter: the terminal (rank 0) sends every other rank its piece at once.
- broadcast: the one rank with a piece sends it to every other rank at once.
Within a step all transfers run concurrently and share their channels; a transfer
whose receiver also sends in that step is duplex (``NetworkParams.duplex_efficiency``).
No data leaves before its receiver's ready-to-receive notice has crossed (one latency
after the receiver posted its receive: as it arrived, or as its last ring step ended).
"""

from __future__ import annotations

from collections.abc import Generator, Hashable, Sequence
from dataclasses import dataclass

import simpy

from edgetwin.models.ring_steps import ring_steps
from edgetwin.sim.device import Device
from edgetwin.sim.network import Network


@dataclass
class _Meeting:
    arrived_ms: dict[int, float]  # rank -> when it joined (posted its receive)
    done: simpy.Event


@dataclass(frozen=True)
class _Replay:
    duration_ms: float
    bytes_sent: dict[str, float]
    bytes_received: dict[str, float]


class Rendezvous:
    """Ranks meeting at collectives: the last to arrive at ``key`` starts the collective,
    every rank waits for the event ``join`` returns. Each rank's arrival is when it posted
    its receive, so its ready-to-receive notice may have crossed before the last arrived.

    ``replay``: a collective that starts on a memoryless network (``Network.memoryless``)
    with the same kind, pieces and notices still to cross as one run before takes what
    that one took, so it is replayed (one timeout, the same bytes booked) instead of run
    transfer by transfer.
    Every rank waits inside it, so nothing else moves meanwhile; the result is the same.
    """

    def __init__(
        self,
        env: simpy.Environment,
        network: Network,
        devices: Sequence[Device],
        replay: bool = False,
    ) -> None:
        self.env, self.network, self.devices = env, network, devices
        self.replay = replay
        self._open: dict[Hashable, _Meeting] = {}
        self._replays: dict[tuple[str, tuple[float, ...], tuple[float, ...]], _Replay] = {}

    def join(
        self, key: Hashable, rank: int, kind: str, piece_bytes: Sequence[float]
    ) -> simpy.Event:
        meeting = self._open.setdefault(key, _Meeting({}, self.env.event()))
        meeting.arrived_ms[rank] = self.env.now
        if len(meeting.arrived_ms) == len(self.devices):
            del self._open[key]
            latency_ms = self.network.spec.latency_ms
            notice_ms = tuple(
                max(0.0, meeting.arrived_ms[rank] + latency_ms - self.env.now)
                for rank in range(len(self.devices))
            )
            finished = self.env.process(self._run(kind, tuple(piece_bytes), notice_ms))
            finished.callbacks.append(lambda _event: _succeed(meeting.done))
        return meeting.done

    def _run(
        self, kind: str, piece_bytes: tuple[float, ...], notice_ms: tuple[float, ...]
    ) -> Generator[simpy.Event, object, None]:
        network = self.network
        run = run_collective(self.env, network, self.devices, kind, piece_bytes, notice_ms)
        if not (self.replay and network.memoryless()):
            yield from run
            return
        seen = self._replays.get((kind, piece_bytes, notice_ms))
        if seen is not None:
            yield self.env.timeout(seen.duration_ms)
            for name, nbytes in seen.bytes_sent.items():
                network.bytes_sent[name] += nbytes
            for name, nbytes in seen.bytes_received.items():
                network.bytes_received[name] += nbytes
            return
        start, sent, received = self.env.now, dict(network.bytes_sent), dict(network.bytes_received)
        yield from run
        self._replays[kind, piece_bytes, notice_ms] = _Replay(
            self.env.now - start,
            {name: network.bytes_sent[name] - before for name, before in sent.items()},
            {name: network.bytes_received[name] - before for name, before in received.items()},
        )


def _succeed(event: simpy.Event) -> None:
    event.succeed()


def run_collective(
    env: simpy.Environment,
    network: Network,
    devices: Sequence[Device],
    kind: str,
    piece_bytes: Sequence[float],
    notice_ms: Sequence[float],
) -> Generator[simpy.Event, object, None]:
    """Run one collective to completion over ``devices`` (rank order), from the instant
    every rank is there (every sender ready).

    GLOO's TCP pair sends no data before the receiver's ready-to-receive notice has
    crossed, one latency after the receiver posted its receive: a transfer to rank r of
    the first step waits ``notice_ms[r]`` (what is left of that latency: 0 where r arrived
    a latency or more before the last); every later ring step's receivers post as the step
    before ends, so its data waits the whole latency (a one-segment ring step took 2.05
    one-way latencies in the emulator, docs/twin.md)."""
    for step in _steps(kind, piece_bytes):
        senders = {src for src, _dst, nbytes in step if nbytes > 0}
        transfers = [
            env.process(
                _after_notice(
                    env,
                    notice_ms[dst],
                    network.transfer(devices[src].name, devices[dst].name, nbytes, dst in senders),
                )
            )
            for src, dst, nbytes in step
            if nbytes > 0
        ]
        yield env.all_of(transfers)
        notice_ms = [network.spec.latency_ms] * len(devices)


def _after_notice(
    env: simpy.Environment, notice_ms: float, transfer: Generator[simpy.Event, object, None]
) -> Generator[simpy.Event, object, None]:
    """``transfer`` once the receiver's notice has crossed, ``notice_ms`` from now."""
    if notice_ms > 0:
        yield env.timeout(notice_ms)
    yield from transfer


def received_bytes(kind: str, piece_bytes: Sequence[float], rank: int) -> float:
    """Bytes ``rank`` receives from its peers over one collective, as its ring moves them:
    the other ranks' pieces of an all-gather, 2 (P-1) / P of an all-reduce's tensor (the
    reduce-scatter's chunks, which it sums, and the all-gather's), a broadcast's piece at
    every rank but the root."""
    steps = _steps(kind, piece_bytes)
    return sum(nbytes for step in steps for _src, dst, nbytes in step if dst == rank)


def _steps(kind: str, piece_bytes: Sequence[float]) -> list[list[tuple[int, int, float]]]:
    """The (src, dst, bytes) transfers of each step."""
    ranks = len(piece_bytes)
    if kind == "scatter":
        return [[(0, dst, piece_bytes[dst]) for dst in range(1, ranks)]]
    if kind == "broadcast":
        root = max(range(ranks), key=lambda rank: piece_bytes[rank])
        return [[(root, dst, piece_bytes[root]) for dst in range(ranks) if dst != root]]
    if kind == "allgather":
        return [
            [(i, (i + 1) % ranks, piece_bytes[(i - k) % ranks]) for i in range(ranks)]
            for k in range(ring_steps(kind, ranks))
        ]
    if kind == "allreduce":
        chunk = piece_bytes[0] / ranks
        return [
            [(i, (i + 1) % ranks, chunk) for i in range(ranks)]
            for _ in range(ring_steps(kind, ranks))
        ]
    raise ValueError(f"unknown collective {kind!r}")
