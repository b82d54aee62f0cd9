"""A rank process exits as soon as its launcher is gone, so no rank outlives a killed run."""

from __future__ import annotations

import os
import sys
import threading
import time

PARENT_POLL_S = 0.2
ORPHANED_EXIT = 3  # the exit status of a rank whose launcher died


def exit_with_parent(parent_pid: int) -> None:
    """Exit (status ORPHANED_EXIT) once ``parent_pid`` is not this process's parent: it died
    and this process was handed to another. Checked now and every PARENT_POLL_S."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        print(f"rank: its launcher (pid {parent_pid}) is gone; exiting", file=sys.stderr)
        os._exit(ORPHANED_EXIT)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
