"""A decoder's generation as SimPy processes: the prefill, then one decode step per token.

Each rank walks the ops of its plan (``models.decoder_costs``), phase after phase: a
piece of work takes the launch floor plus the larger of its FLOP time and its memory
traffic time; a collective stages the rank's piece GPU->host, meets the other ranks
(the last to arrive starts the ring) and stages the result back; a send stages, moves
the bytes and leaves them in the receiver's mailbox, where the receiver waits and
stages them in. After a receive, a rank of a distributed run pays the host side of
the bytes its peers sent it (``collectives.received_bytes``: an all-reduce's ring brings
2 (P-1) / P of the tensor, which the host receives and half of which it sums), as a
synchronised encoder block does. Ranks run on their own:
with micro-batches, pipeline stages overlap.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field

import simpy

from edgetwin.models.decoder_costs import Ops, Transfer, Work
from edgetwin.sim.collectives import Rendezvous, received_bytes
from edgetwin.sim.device import Device
from edgetwin.sim.forward import RankTimes
from edgetwin.sim.network import Network

_Piece = tuple[str, str, float, str]  # phase, device state, milliseconds, label


@dataclass
class Generation:
    """The phases (rank-indexed ops, in order) of one generation over ``devices``."""

    env: simpy.Environment
    phases: Sequence[Ops]
    devices: list[Device]
    network: Network
    jitter: Callable[[], float] = lambda: 1.0
    replay_collectives: bool = True  # see ``Rendezvous``: the same result, far fewer events
    # a rank's consecutive local phases in one wait (``Device.book_ahead``): the same
    # bookings, far fewer events; only where nothing interrupts a device
    book_ahead: bool = False
    start_ms: float = 0.0
    times: list[RankTimes] = field(default_factory=list)
    phase_end_ms: list[list[float]] = field(default_factory=list)  # [rank][phase]

    def __post_init__(self) -> None:
        self.times = [RankTimes() for _ in self.devices]
        self.phase_end_ms = [[] for _ in self.devices]
        self._rendezvous = Rendezvous(self.env, self.network, self.devices, self.replay_collectives)
        world = range(len(self.devices))
        self._mailboxes = {(s, d): simpy.Store(self.env) for s in world for d in world if s != d}

    def rank_process(self, rank: int) -> Generator[simpy.Event, object, None]:
        """Everything rank ``rank`` does in the generation."""
        device, times = self.devices[rank], self.times[rank]
        local: list[_Piece] = []  # local phases not yet waited for
        # bytes the last transfer brought in, until the next work, in this phase or the
        # next (the prefill's token ids are received at its end, used by decode step 0)
        received: float | None = None
        try:
            for index, ops in enumerate(self.phases):
                collectives = 0
                for op in ops[rank]:
                    if isinstance(op, Work):
                        local += self._work(rank, op, received)
                        received = None
                        continue
                    local += self._stage_out(rank, op)
                    yield from self._wait(rank, local)
                    start = self.env.now
                    if op.kind == "send":
                        device.enter("comm", "send" if rank == op.root else "recv")
                        yield self.env.process(self._point_to_point(rank, op))
                        received = op.piece_bytes[op.root] if rank != op.root else None
                    else:
                        device.enter("comm", op.kind)
                        yield self._rendezvous.join(
                            (index, collectives), rank, op.kind, op.piece_bytes
                        )
                        collectives += 1
                        received = received_bytes(op.kind, op.piece_bytes, rank)
                    device.enter("idle")
                    times.add("comm", self.env.now - start)
                    local += self._stage_in(rank, op)
                yield from self._wait(rank, local)
                self.phase_end_ms[rank].append(self.env.now)
        finally:
            device.enter("idle")
        times.finished_ms = self.env.now

    def _wait(self, rank: int, local: list[_Piece]) -> Generator[simpy.Event, object, None]:
        """Spend the local phases (jittered, booked to their phase), then forget them."""
        device, times = self.devices[rank], self.times[rank]
        stretches = []
        for phase, state, duration_ms, label in local:
            duration_ms *= self.jitter()
            times.add(phase, duration_ms)
            stretches.append((state, duration_ms, label))
        local.clear()
        if self.book_ahead and stretches:
            yield self.env.timeout(device.book_ahead(stretches))
            return
        for state, duration_ms, label in stretches:
            device.enter(state, label)
            yield self.env.timeout(duration_ms)

    def _work(self, rank: int, work: Work, received: float | None) -> list[_Piece]:
        """The work on the GPU, then the host side of what was just received beyond it."""
        profile = self.devices[rank].profile
        gpu_ms = profile.work_ms(work.flops, work.memory_bytes, work.rows)
        pieces = [("compute", "compute", gpu_ms, work.label)]
        if received is not None and len(self.devices) > 1:
            host_ms = profile.compute.sync_host_ms_for(received)
            if host_ms > gpu_ms:
                pieces.append(("compute", "host", host_ms - gpu_ms, work.label))
        return pieces

    def _stage_out(self, rank: int, op: Transfer) -> list[_Piece]:
        """GPU->host copy of the rank's piece (a broadcast's or send's root only)."""
        if op.kind in ("send", "broadcast") and rank != op.root:
            return []
        copy_ms = self.devices[rank].profile.staging.copy_ms(op.piece_bytes[rank])
        return [("staging", "staging", copy_ms, f"d2h {op.kind}")] if copy_ms > 0 else []

    def _stage_in(self, rank: int, op: Transfer) -> list[_Piece]:
        """Host->GPU copy of what arrived: the reduced piece, the gathered pieces, or the
        root's piece (a broadcast's and send's receivers)."""
        staging = self.devices[rank].profile.staging
        if op.kind == "allreduce":
            copy_ms = staging.copy_ms(op.piece_bytes[rank])
        elif op.kind == "allgather":
            copy_ms = staging.gathered_ms(sum(op.piece_bytes))
        elif rank == op.root or (op.peers is not None and rank != op.peers[1]):
            copy_ms = 0.0
        else:
            copy_ms = staging.copy_ms(op.piece_bytes[op.root])
        return [("staging", "staging", copy_ms, f"h2d {op.kind}")] if copy_ms > 0 else []

    def _point_to_point(self, rank: int, op: Transfer) -> Generator[simpy.Event, object, None]:
        """The sender moves the bytes into the receiver's mailbox; the receiver waits there."""
        assert op.peers is not None
        src, dst = op.peers
        mailbox = self._mailboxes[src, dst]
        if rank == src:
            names = self.devices[src].name, self.devices[dst].name
            yield from self.network.transfer(*names, op.piece_bytes[src])
            yield mailbox.put(op.piece_bytes[src])
        else:
            yield mailbox.get()
