"""One rank's GLOO transfers, staged through host memory as on a board without a GPU path.

GLOO moves host tensors: every tensor leaves the device before it is sent
(``stage_out``) and returns after it is received (``stage_in``); on a CPU run staging is
the host-side copy and packing. ``bytes_sent`` counts, per part (prefill, decode), what
this rank puts into sends and collectives (padding included: it crosses the wire; a
broadcast counts at its root only).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from edgetwin.emu.llm.timing import DECODE, PREFILL, GenerationClock, Part

HOST = torch.device("cpu")


class Exchange:
    """Point-to-point sends (asynchronous until ``flush``) and collectives of one rank."""

    def __init__(self, clock: GenerationClock, device: torch.device) -> None:
        self.clock = clock
        self.device = device
        self.bytes_sent: dict[str, int] = {PREFILL: 0, DECODE: 0}
        self._pending: list[tuple[dist.Work, Tensor]] = []

    def reset(self) -> None:
        self.bytes_sent = {PREFILL: 0, DECODE: 0}

    def _out(self, part: Part, tensor: Tensor) -> Tensor:
        with self.clock.phase(part, "stage_out"):
            return tensor.detach().to(HOST).contiguous()

    def _in(self, part: Part, tensor: Tensor) -> Tensor:
        with self.clock.phase(part, "stage_in"):
            return tensor.to(self.device)

    def send(self, part: Part, tensor: Tensor, dst: int) -> None:
        """Start sending ``tensor`` to ``dst``; ``flush`` waits for it."""
        host = self._out(part, tensor)
        with self.clock.phase(part, "comm"):
            work = dist.isend(host, dst=dst)
        if work is not None:  # None only when this rank is outside the group
            self._pending.append((work, host))
        self.bytes_sent[part] += host.nbytes

    def flush(self, part: Part) -> None:
        """Wait until every started send has gone."""
        with self.clock.phase(part, "comm"):
            for work, _ in self._pending:
                work.wait()
        self._pending = []

    def recv(self, part: Part, shape: tuple[int, ...], dtype: torch.dtype, src: int) -> Tensor:
        host = torch.empty(shape, dtype=dtype)
        with self.clock.phase(part, "comm"):
            dist.recv(host, src=src)
        return self._in(part, host)

    def all_reduce(self, part: Part, tensor: Tensor) -> Tensor:
        """The sum over ranks of ``tensor``."""
        host = self._out(part, tensor)
        with self.clock.phase(part, "comm"):
            dist.all_reduce(host)
        self.bytes_sent[part] += host.nbytes
        return self._in(part, host)

    def all_gather(self, part: Part, tensor: Tensor) -> Tensor:
        """Every rank's ``tensor`` (equal shapes), stacked in rank order: [P, ...]."""
        host = self._out(part, tensor)
        received = [torch.empty_like(host) for _ in range(dist.get_world_size())]
        with self.clock.phase(part, "comm"):
            dist.all_gather(received, host)
        self.bytes_sent[part] += host.nbytes
        with self.clock.phase(part, "stage_in"):
            return torch.stack(received).to(self.device)

    def all_gather_rows(self, part: Part, rows: Tensor, padded: int) -> Tensor:
        """Every rank's ``rows`` [B, n_p, D], each padded to ``padded`` rows on the wire:
        [P, B, padded, D] (the caller cuts each back to its true rows)."""
        batch, count, width = rows.shape
        with self.clock.phase(part, "stage_out"):
            padded_rows = torch.zeros(batch, padded, width, dtype=rows.dtype, device=rows.device)
            padded_rows[:, :count] = rows
        return self.all_gather(part, padded_rows)

    def broadcast(self, part: Part, tensor: Tensor, src: int) -> Tensor:
        """``src``'s ``tensor``; the others pass a buffer of the same shape and dtype."""
        host = self._out(part, tensor)
        with self.clock.phase(part, "comm"):
            dist.broadcast(host, src=src)
        if dist.get_rank() == src:
            self.bytes_sent[part] += host.nbytes
        return self._in(part, host)
