"""``python -m edgetwin ...`` and the ``edgetwin`` command (its entry point).

The command line's modules take most of a second to import (plotly, pandas, pydantic);
a Ctrl-C or SIGTERM meanwhile stops it as it stops a running command: one line, exit
128 + the signal's number (130, 143), not a traceback of the import."""

import gc
import io
import os
import signal
import sys

from edgetwin.errors import sigterm_interrupts, stopped, stopped_exit_code

SIGPIPE_EXIT = 141  # a command that writes to a closed pipe: 128 + SIGPIPE, as the shell says


def main() -> int:
    """Import the command line, then run it on ``sys.argv``."""
    try:
        with sigterm_interrupts():
            from edgetwin.cli import main as command_line
    except KeyboardInterrupt:
        print("edgetwin: interrupted while starting; nothing was written", file=sys.stderr)
        return stopped_exit_code()
    if isinstance(sys.stdout, io.TextIOWrapper):  # a path an ASCII locale cannot print
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        code = command_line()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader of the output left (`| head`); the work is done
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error
        code = SIGPIPE_EXIT
    if stopped():  # it said so and exits with the stop's status: another stop killed it
        for stop in (signal.SIGINT, signal.SIGTERM):  # (SIGTERM) without a word meanwhile
            signal.signal(stop, signal.SIG_IGN)
    # Leave what the command made to the exit, not to a last pass of the cyclic collector:
    # the objects of a 300,000-phone crowd run took that pass 20 s after the command had
    # finished (or been stopped). atexit handlers and file flushes run as before.
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(main())
