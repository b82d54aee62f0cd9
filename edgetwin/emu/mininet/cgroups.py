"""Memory limits of hosts: cgroup-v1 memory groups nested under this process's own.

Mininet limits CPU (``CPULimitedHost``: a CFS quota in a ``cpu,cpuacct,cpuset`` group
named after the host) but not memory. A host's memory group is a child of the memory
group this process runs in (so a limit never escapes the one around the run), named
after the host; a process started in the host joins it right after it starts.
"""

from __future__ import annotations

import re
from contextlib import suppress
from pathlib import Path

from edgetwin.emu.mininet.topology import PREFIX

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_CONTROLLERS = ("cpu", "cpuacct", "cpuset")  # where Mininet makes its host groups
_HOST_GROUP = re.compile(rf"^{PREFIX}h\d+$")


def memory_parent() -> Path | None:
    """This process's cgroup-v1 memory group, or None where there is none (cgroup v2 only)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = CGROUP_ROOT / "memory" / path.lstrip("/")
            return folder if (folder / "memory.limit_in_bytes").is_file() else None
    return None


def limit_memory(host: str, memory_mb: float) -> Path:
    """A memory group for ``host`` capped at ``memory_mb`` (OSError where none can be made)."""
    parent = memory_parent()
    if parent is None:
        raise OSError("no cgroup-v1 memory controller for this process")
    group = parent / host
    group.mkdir(exist_ok=True)
    (group / "memory.limit_in_bytes").write_text(str(int(memory_mb * 2**20)))
    return group


def join(group: Path, pid: int) -> None:
    """Move process ``pid`` into ``group``."""
    (group / "cgroup.procs").write_text(str(pid))


def leftover_groups() -> list[Path]:
    """Host groups of this package: memory ones under our memory group, Mininet's CPU ones."""
    parents = [CGROUP_ROOT / name for name in CPU_CONTROLLERS]
    memory = memory_parent()
    if memory is not None:
        parents.append(memory)
    return [
        group
        for parent in parents
        if parent.is_dir()
        for group in parent.iterdir()
        if group.is_dir() and _HOST_GROUP.match(group.name)
    ]


def remove_groups(groups: list[Path]) -> list[Path]:
    """Remove empty groups (their processes gone); a busy one stays. The groups removed."""
    removed = []
    for group in groups:
        with suppress(OSError):
            group.rmdir()
            removed.append(group)
    return removed
