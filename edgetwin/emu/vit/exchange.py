"""One rank's GLOO transfers, staged through host memory as on a Jetson.

GLOO moves host tensors only: every tensor leaves the device before it is
sent (``stage_out``) and returns after it is received (``stage_in``). On a
CPU run the device copies vanish and staging is the host-side packing,
slicing and concatenation. ``bytes_sent`` counts what this rank puts into
sends and collectives (padding included: it crosses the wire).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from edgetwin.emu.vit.phases import PhaseClock
from edgetwin.models.layout import Layout

HOST = torch.device("cpu")


class GlooExchange:
    """Scatter of the embedded rows and the per-block all_gather of one rank."""

    def __init__(self, layout: Layout, rank: int, clock: PhaseClock) -> None:
        self.layout = layout
        self.rank = rank
        self.clock = clock
        self.bytes_sent = 0
        self._gather_buffers: dict[tuple[int, int], tuple[Tensor, list[Tensor]]] = {}

    def scatter(self, step: str, rows: Tensor) -> Tensor:
        """Terminal: send every other rank its partition of ``rows`` [B, N, D]; keep its own."""
        with self.clock.phase(step, "stage_out"):
            pieces = {}
            for peer in range(1, self.layout.world):
                start, stop = self.layout.bounds(peer)
                pieces[peer] = rows[:, start:stop].to(HOST).contiguous()
        with self.clock.phase(step, "comm"):
            for work in [dist.isend(piece, dst=peer) for peer, piece in pieces.items()]:
                if work is not None:  # None only when this rank is outside the group
                    work.wait()
        self.bytes_sent += sum(piece.nbytes for piece in pieces.values())
        return rows[:, : self.layout.partition_rows[0]]

    def receive_partition(self, step: str, batch: int, width: int, device: torch.device) -> Tensor:
        """Non-terminal: the rows of this rank's partition, from the terminal."""
        host = torch.empty(batch, self.layout.partition_rows[self.rank], width)
        with self.clock.phase(step, "comm"):
            dist.recv(host, src=0)
        with self.clock.phase(step, "stage_in"):
            return host.to(device)

    def gather_context(self, step: str, payload: Tensor, own_input: Tensor) -> Tensor:
        """All-gather every rank's ``payload`` rows; return the context in rank order.

        The context is the other ranks' contributions with ``own_input`` (this rank's full
        rows) in its own place. Contributions are padded to equal rows for all_gather and
        cut back to each rank's true row count, which every rank knows from the layout.
        """
        batch, rows, width = payload.shape
        send, received = self._buffers(batch, width)
        with self.clock.phase(step, "stage_out"):
            send[:, :rows].copy_(payload)
        with self.clock.phase(step, "comm"):
            dist.all_gather(received, send)
        self.bytes_sent += send.nbytes
        with self.clock.phase(step, "stage_in"):
            others = [
                received[peer][:, : self.layout.sent_rows(peer)]
                for peer in range(self.layout.world)
                if peer != self.rank
            ]
            on_device = torch.cat(others, dim=1).to(own_input.device)
            before = sum(self.layout.sent_rows(peer) for peer in range(self.rank))
            return torch.cat([on_device[:, :before], own_input, on_device[:, before:]], dim=1)

    def _buffers(self, batch: int, width: int) -> tuple[Tensor, list[Tensor]]:
        """Host buffers of one all_gather, [B, padded rows, D]: the send buffer and one per
        rank to receive into; reused across blocks."""
        key = (batch, width)
        if key not in self._gather_buffers:
            shape = (batch, self.layout.padded_rows, width)
            received = [torch.zeros(shape) for _ in range(self.layout.world)]
            self._gather_buffers[key] = (torch.zeros(shape), received)
        return self._gather_buffers[key]
