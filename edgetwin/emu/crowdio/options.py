"""Command-line value types of the foreman and the worker: finite numbers in range, a port.

Each is an argparse ``type``: a value out of range is refused with exit 2 and the
option named (argparse adds it), before anything starts. ``float('nan')`` and
``float('inf')`` parse, so a plain ``type=float`` let them through: a NaN timeout
never fires, an infinite limit made a traceback.
"""

from __future__ import annotations

import argparse
import math

from edgetwin.errors import shown

PORT_MAX = 65535


def positive_float(text: str) -> float:
    """A finite number greater than 0."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {shown(text)}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number of at least 0."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {shown(text)}")
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {shown(text)}")
    return value


def port_number(text: str) -> int:
    """A TCP port, 0 to 65535 (0: any free one)."""
    value = _integer(text)
    if not 0 <= value <= PORT_MAX:
        raise argparse.ArgumentTypeError(f"must be a port, 0 to {PORT_MAX}, not {shown(text)}")
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {shown(text)}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {shown(text)}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {shown(text)}") from None
