"""Teardown checks for emulator tests that hold while other emulator runs come and go,
the mark that skips emulator tests where root or Mininet is missing, and a progress that
records what it was told.

``teardown_checked`` wraps the emulator lock: interfaces (veths, the bridge, the shared
medium's IFB) and this namespace's iptables rules are listed right after a run takes the
lock (no other run is live then) and again after it has torn its network down, before it
lets the lock go, so another run's interfaces and rules never count.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from edgetwin.emu.mininet import net
from edgetwin.emu.mininet.cgroups import leftover_groups
from edgetwin.emu.mininet.lock import emulator_lock
from edgetwin.emu.mininet.mn import missing_requirements

needs_emulator = pytest.mark.skipif(
    bool(missing_requirements()), reason=f"emulator needs: {missing_requirements()}"
)


def root_rules() -> set[str]:
    """This namespace's iptables rules (``iptables-save``, counters left out)."""
    out = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    return {line for line in out.splitlines() if line.startswith("-A")}


def links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip() for line in out.splitlines()}


@dataclass
class Teardown:
    """Interfaces and iptables rules added by each network, and what was left (empty: all
    clean)."""

    networks: int = 0
    added: set[str] | None = None
    leftovers: list[object] | None = None
    rules: set[str] | None = None

    def assert_clean(self, networks: int = 1) -> None:
        assert self.networks == networks
        assert self.added == set() and self.leftovers == [], (self.added, self.leftovers)
        assert self.rules == set(), self.rules


@contextmanager
def teardown_checked() -> Iterator[Teardown]:
    """Every emulated network built inside is checked when it has been torn down."""
    seen = Teardown(added=set(), leftovers=[], rules=set())

    @contextmanager
    def checking_lock() -> Iterator[None]:
        with emulator_lock():
            before, rules_before = links(), root_rules()
            try:
                yield
            finally:
                seen.networks += 1
                assert seen.added is not None and seen.leftovers is not None
                assert seen.rules is not None
                seen.added |= links() - before
                seen.rules |= root_rules() - rules_before
                seen.leftovers += [*net.leftover_links(), *net.leftover_processes()]
                seen.leftovers += leftover_groups()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(net, "emulator_lock", checking_lock)
        yield seen


class RecordedSteps:
    """A ``progress`` (edgetwin.progress.Progress) that records, for each context opened,
    its label, its total and how many steps were done in it, and the steps' names by
    label."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []
        self.names: dict[str, list[str]] = {}

    @contextmanager
    def __call__(self, label: str, total: int) -> Iterator[Callable[[str], None]]:
        done: list[str] = []
        yield lambda name="": done.append(name)
        self.seen.append((label, total, len(done)))
        self.names.setdefault(label, []).extend(done)
