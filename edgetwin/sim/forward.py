"""One batch's forward through a partitioned model, as SimPy processes.

Each rank is a process walking the blocks of the plan: staging GPU->host,
the collective over the network, staging host->GPU, then the block's
compute. Collectives are rendezvous: the last rank to arrive starts a ring
of transfers, every rank waits for it to finish. Per rank, the time in each
phase is kept (compute, staging, comm), as a profiler would split it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import simpy

from edgetwin.models.costs import CostPlan, Exchange
from edgetwin.sim.collectives import Rendezvous, received_bytes
from edgetwin.sim.device import Device
from edgetwin.sim.network import Network


@dataclass
class RankTimes:
    """Milliseconds one rank spent in each phase."""

    compute_ms: float = 0.0
    staging_ms: float = 0.0
    comm_ms: float = 0.0
    finished_ms: float = 0.0

    def add(self, phase: str, duration_ms: float) -> None:
        setattr(self, f"{phase}_ms", getattr(self, f"{phase}_ms") + duration_ms)


@dataclass
class Forward:
    """A forward of ``batch`` samples of ``plan`` over ``devices`` (rank order)."""

    env: simpy.Environment
    plan: CostPlan
    devices: list[Device]
    network: Network
    batch: int
    blocks: int
    row_bytes: int  # bytes of one token row (width x bytes per element)
    jitter: Callable[[], float] = lambda: 1.0
    start_ms: float = 0.0
    times: list[RankTimes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.times = [RankTimes() for _ in self.devices]
        self._rendezvous = Rendezvous(self.env, self.network, self.devices)

    @property
    def distributed(self) -> bool:
        return len(self.devices) > 1

    def rank_process(self, rank: int) -> Generator[simpy.Event, object, None]:
        """Everything rank ``rank`` does in one forward."""
        device = self.devices[rank]
        rows = self.plan.partition_tokens[rank]
        if self.plan.embed_flops_per_sample[rank] > 0:
            embed_rows = self.plan.embed_rows[rank]
            yield from self._compute(
                rank, self.plan.embed_flops_per_sample[rank], embed_rows, "embed"
            )
        if self.plan.scatter is not None:
            yield from self._distribute_input(rank, self.plan.scatter)
        for block in range(self.blocks):
            if self.plan.exchange_before_block is not None:
                yield from self._exchange(rank, (block, 0), self.plan.exchange_before_block)
            for index, step in enumerate(self.plan.block_steps[rank]):
                host_ms = self._block_host_ms(rank, block, index)
                label = f"block {block}"
                yield from self._compute(rank, step.flops_per_sample, rows, label, host_ms)
                if step.exchange_after is not None:
                    yield from self._exchange(rank, (block, index + 1), step.exchange_after)
        if rank == 0:
            yield from self._compute(rank, self.plan.head_flops_per_sample, 1, "head")
        self.times[rank].finished_ms = self.env.now
        device.enter("idle")

    # ------------------------------------------------------------ phases
    def _phase(
        self, rank: int, phase: str, state: str, duration_ms: float, label: str
    ) -> Generator[simpy.Event, object, float]:
        """Spend ``duration_ms`` (jittered) in ``state``; return the time it took."""
        duration_ms *= self.jitter()
        taken_ms = yield from self.devices[rank].busy(state, duration_ms, label)
        self.times[rank].add(phase, taken_ms)
        return taken_ms

    def _compute(
        self,
        rank: int,
        flops_per_sample: float,
        rows_per_sample: int,
        label: str,
        host_ms: float = 0.0,
    ) -> Generator[simpy.Event, object, None]:
        """GPU work, then whatever the host side needs beyond it (the block takes the max;
        on a shared host the GPU work takes longer than alone)."""
        compute = self.devices[rank].profile.compute
        gpu_ms = compute.gpu_ms(flops_per_sample * self.batch, rows_per_sample * self.batch)
        taken_ms = yield from self._phase(rank, "compute", "compute", gpu_ms, label)
        if self.devices[rank].host is not None:
            gpu_ms = taken_ms  # the shared GPU took longer; the host side ran alongside
        if host_ms > gpu_ms:
            yield from self._phase(rank, "compute", "host", host_ms - gpu_ms, label)

    def _block_host_ms(self, rank: int, block: int, step_index: int) -> float:
        """Host time of a block step on a rank that synchronises with peers (0 when alone):
        the fixed part and the part per MB of what the exchange before the step brought."""
        if not self.distributed:
            return 0.0
        received = self._received_bytes(rank, self._exchange_before(rank, block, step_index))
        return self.devices[rank].profile.compute.sync_host_ms_for(received)

    def _exchange_before(self, rank: int, block: int, step_index: int) -> Exchange | None:
        """The exchange whose result a block step works on: the block's own (position-wise),
        or the one after the step before it (tensor parallel's all-reduces)."""
        steps = self.plan.block_steps[rank]
        if step_index > 0:
            return steps[step_index - 1].exchange_after
        if self.plan.exchange_before_block is not None:
            return self.plan.exchange_before_block
        return steps[-1].exchange_after if block > 0 else None

    def _staging(
        self, rank: int, nbytes: float, label: str
    ) -> Generator[simpy.Event, object, None]:
        copy_ms = self.devices[rank].profile.staging.copy_ms(nbytes)
        if copy_ms > 0:
            yield from self._phase(rank, "staging", "staging", copy_ms, label)

    def _exchange(
        self, rank: int, key: tuple[int, int], exchange: Exchange
    ) -> Generator[simpy.Event, object, None]:
        """Stage own piece to host, join the collective, stage the result back."""
        own_bytes = exchange.rows_per_rank[rank] * self.batch * self.row_bytes
        staging = self.devices[rank].profile.staging
        source_bytes = self.plan.partition_tokens[rank] * self.batch * self.row_bytes
        d2h_ms = staging.d2h_ms(own_bytes, source_bytes)
        if d2h_ms > 0:
            yield from self._phase(rank, "staging", "staging", d2h_ms, f"d2h {exchange.collective}")
        yield from self._collective(rank, key, exchange)
        if exchange.collective == "allreduce":
            h2d_ms = staging.copy_ms(own_bytes)
        else:
            h2d_ms = staging.gathered_ms(sum(exchange.rows_per_rank) * self.batch * self.row_bytes)
        if h2d_ms > 0:
            yield from self._phase(rank, "staging", "staging", h2d_ms, f"h2d {exchange.collective}")

    def _collective(
        self, rank: int, key: tuple[int, int], exchange: Exchange
    ) -> Generator[simpy.Event, object, None]:
        device = self.devices[rank]
        start = self.env.now
        device.enter("comm", exchange.collective)
        piece_bytes = [
            exchange.wire_rows(piece) * self.batch * self.row_bytes
            for piece in range(len(self.devices))
        ]
        yield self._rendezvous.join(key, rank, exchange.collective, piece_bytes)
        device.enter("idle")
        self.times[rank].add("comm", self.env.now - start)

    def _distribute_input(
        self, rank: int, scatter: Exchange
    ) -> Generator[simpy.Event, object, None]:
        """The terminal sends each rank its input rows (its partition, or all rows)."""
        rows = scatter.rows_per_rank
        if rank == 0:
            outgoing = scatter.contributed_rows() * self.batch * self.row_bytes
            yield from self._staging(0, outgoing, "d2h scatter")
        yield from self._collective(rank, (-1, 0), scatter)
        if rank > 0:
            yield from self._staging(rank, rows[rank] * self.batch * self.row_bytes, "h2d scatter")

    def _received_bytes(self, rank: int, exchange: Exchange | None) -> float:
        """Bytes the rank's peers sent it over ``exchange``: the other ranks' rows of an
        all-gather, 2 (P-1) / P of an all-reduce's tensor (its ring's chunks)."""
        if exchange is None:
            return 0.0
        if exchange.collective == "allreduce":
            tensor_bytes = exchange.rows_per_rank[rank] * self.batch * self.row_bytes
            return received_bytes("allreduce", [tensor_bytes] * len(self.devices), rank)
        others = sum(exchange.rows_per_rank) - exchange.rows_per_rank[rank]
        return float(others * self.batch * self.row_bytes)
