"""A physical device that several ranks share (docs/twin.md, "Co-located ranks").

Compute: the device's accelerator (a GPU time-sliced between processes, or a CPU's
cores) is a fluid processor-sharing server, as the network's channels are
(``sim/network.py``). A rank's piece of compute is work in milliseconds alone (what
its profile says, on the otherwise idle host); while k pieces run at once, beside other
work as busy as ``other_load`` ranks, each progresses at
min(1, slots / (k + other_load)) / min(1, slots) of its alone rate (fair time-slicing),
and the shares are recomputed whenever a piece starts or ends.

Memory: the ranks hold their weights and activations in the device's one memory (its
ranks' ``ram_mb``, which the fleet checks they agree on).

Power: the board is powered once. It draws the power of its most active rank's state
(the largest of the ranks' state powers: a time-sliced GPU busy for two ranks draws
what it draws busy for one), booked to the ranks in that state in equal parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count

import simpy

from edgetwin.device_spec import HostSpec
from edgetwin.sim.network import TOLERANCE_MS  # a piece this close to done is done


@dataclass
class _Piece:
    remaining_ms: float  # alone-time work left
    slowed: bool  # it ran below its alone rate at some point
    done: simpy.Event


class SharedAccelerator:
    """Pieces of compute sharing one accelerator (processor sharing, capped at full speed)."""

    def __init__(self, env: simpy.Environment, slots: float, other_load: float = 0.0) -> None:
        self.env = env
        self.slots = slots
        self.other_load = other_load
        self._pieces: dict[int, _Piece] = {}
        self._ids = count()
        self._last_update_ms = env.now
        self._wakeup: simpy.Timeout | None = None  # the one standing wake-up

    def run(self, work_ms: float) -> simpy.Event:
        """An event that fires when ``work_ms`` of alone-time work is done; its value says
        whether the piece ever ran slower than alone (else it took exactly ``work_ms``)."""
        done = self.env.event()
        if work_ms <= 0:
            done.succeed(False)
            return done
        self._advance()
        self._pieces[next(self._ids)] = _Piece(work_ms, False, done)
        self._reschedule()
        return done

    def rate(self) -> float:
        """Alone-milliseconds of work each running piece does per millisecond (alone: a
        piece on the otherwise idle host, as its profile was measured)."""
        competing = max(1.0, len(self._pieces) + self.other_load)
        return min(1.0, self.slots / competing) / min(1.0, self.slots)

    def _advance(self) -> None:
        now = self.env.now
        elapsed_ms = now - self._last_update_ms
        self._last_update_ms = now
        rate = self.rate()
        for piece in self._pieces.values():
            piece.remaining_ms -= elapsed_ms * rate
            piece.slowed = piece.slowed or (elapsed_ms > 0 and rate < 1.0)

    def _reschedule(self) -> None:
        rate, now = self.rate(), self.env.now
        for key, piece in list(self._pieces.items()):
            wait_ms = piece.remaining_ms / rate
            # done when what is left is below the tolerance, or below what the clock can
            # still add to now (else a wake-up at now + wait_ms == now advances nothing,
            # forever: a host slowed a millionfold, late in a run)
            if wait_ms <= TOLERANCE_MS or now + wait_ms == now:
                del self._pieces[key]
                piece.done.succeed(piece.slowed)
        self._wakeup = None  # a wake-up scheduled before stands no more
        if not self._pieces:
            return
        rate = self.rate()
        first_ms = min(piece.remaining_ms for piece in self._pieces.values()) / rate
        wakeup = self._wakeup = self.env.timeout(first_ms)
        wakeup.callbacks.append(self._on_wakeup)

    def _on_wakeup(self, wakeup: simpy.Event) -> None:
        if wakeup is self._wakeup:
            self._advance()
            self._reschedule()


class Host:
    """The physical device of co-located ranks: their shared accelerator and board power.

    Each rank joins with its name and a function that books its time and energy so far;
    a rank about to change state calls ``book_all`` first (so every rank's last stretch
    had one board power), then ``set_power`` with its new state's power."""

    def __init__(self, env: simpy.Environment, spec: HostSpec) -> None:
        self.name = spec.name
        self.accelerator = SharedAccelerator(env, spec.compute_slots, spec.other_load)
        self._power_w: dict[str, float] = {}
        self._bookers: list[Callable[[], None]] = []
        self.ram_mb = math.inf  # its ranks' (one figure: the fleet checks they agree)
        self.resident_mb = 0.0

    def join(self, rank: str, book: Callable[[], None], power_w: float, ram_mb: float) -> None:
        self._power_w[rank] = power_w
        self._bookers.append(book)
        self.ram_mb = min(self.ram_mb, ram_mb)

    def load(self, size_mb: float) -> bool:
        """Make ``size_mb`` resident in the memory its ranks share; False (nothing changes)
        when it does not fit beside what the others hold."""
        if self.resident_mb + size_mb > self.ram_mb:
            return False
        self.resident_mb += size_mb
        return True

    def unload(self, size_mb: float) -> None:
        self.resident_mb = max(0.0, self.resident_mb - size_mb)

    def book_all(self) -> None:
        for book in self._bookers:
            book()

    def set_power(self, rank: str, power_w: float) -> None:
        self._power_w[rank] = power_w

    def share_w(self, rank: str) -> float:
        """The part of the board's power booked to ``rank`` now."""
        board_w = max(self._power_w.values())
        if self._power_w[rank] < board_w:
            return 0.0
        return board_w / sum(1 for watts in self._power_w.values() if watts == board_w)
