"""A child process exits as soon as the process that started it is gone, so that none
outlives a killed command (a rank of a killed run, a worker of a killed plan's pool)."""

from __future__ import annotations

import os
import sys
import threading
import time

PARENT_POLL_S = 0.2
ORPHANED_EXIT = 3  # the exit status of a child whose parent died


def exit_with_parent(parent_pid: int, who: str) -> None:
    """Exit (status ORPHANED_EXIT) once ``parent_pid`` is not this process's parent: it died
    and this process was handed to another. Checked now and every PARENT_POLL_S, in a
    daemon thread (it exits while the main thread is blocked); ``who`` names this process
    in the line it prints."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        print(f"{who}: its parent (pid {parent_pid}) is gone; exiting", file=sys.stderr)
        os._exit(ORPHANED_EXIT)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
