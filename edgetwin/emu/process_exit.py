"""How a real process ended, in words, for the errors of the launchers."""

from __future__ import annotations

import signal

# Nothing of ours sends SIGKILL while a run goes on, but a kill_worker fault: from outside
# it is most often the kernel's out-of-memory killer (``dmesg`` says so).
SIGKILL_HINT = "SIGKILL: the out-of-memory killer (see dmesg), unless a fault sent it"


def describe_exit(code: int) -> str:
    """``killed by SIGTERM`` or ``exited with status 1``: a ``Popen.returncode``."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def killed_hint(codes: list[int]) -> str:
    """`` (SIGKILL: ...)`` if any of ``codes`` is a SIGKILL, else nothing."""
    return f" ({SIGKILL_HINT})" if -signal.SIGKILL in codes else ""
