"""How a real process ended, in words, for the errors of the launchers."""

from __future__ import annotations

import signal

# Nothing of edgetwin's sends SIGKILL while a run goes on, but a kill_worker fault: from
# outside it is most often the kernel's out-of-memory killer (``dmesg`` says so).
SIGKILL_HINT = "SIGKILL: most often the out-of-memory killer (see dmesg)"


def describe_exit(code: int) -> str:
    """``was killed by SIGTERM`` or ``exited with status 1``: a ``Popen.returncode``."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def killed_hint(codes: list[int], faults: bool = False) -> str:
    """`` (SIGKILL: ...)`` if any of ``codes`` is a SIGKILL, else nothing; ``faults``: the
    run may have sent it itself (a kill_worker fault)."""
    if -signal.SIGKILL not in codes:
        return ""
    return f" ({SIGKILL_HINT}{', unless a kill_worker fault sent it' if faults else ''})"
