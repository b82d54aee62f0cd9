"""Numbers as a person reads them, on every page, answer and progress line: thousands
separated, never with an exponent (a 1,000,000 ms target printed ``1e+06``, a TTFT of
13,200 ms hovered ``1.320e+4``). ``exact_text``, ``figure_text``, ``count_text`` and
``counted`` (a count and its noun) write them in Python; ``hover_number`` asks plotly.js
(d3-format) for the same in a figure's hover."""

from __future__ import annotations

import math
from decimal import Decimal

# a number's digits are read from one in a billion to a thousand million million; one
# outside (a value given as 1e300 in a file, an infinity) is written with its exponent:
# 300 zeros would hide it, and cut to fit a message, misstate it
READABLE_MAGNITUDES = (1e-9, 1e15)
HOVER_EXACT = ","  # d3-format: every digit (up to 12), separated, no exponent
HOVER_FIGURE = ",.4~r"  # four significant digits, separated, no exponent


def exact_text(value: float) -> str:
    """A value as the question or the sweep gave it, every digit: ``600``, ``1,000,000``,
    ``0.5``, ``1,234.5``, ``0.00001``, to 15 significant digits (a sum's last bit of float
    noise, 0.30000000000000004, left out); one past reading (``READABLE_MAGNITUDES``) with
    its exponent: ``1e+15``, ``1e+300``, ``inf``."""
    if not _readable(value):
        return f"{value:.15g}"
    return f"{Decimal(f'{value:.15g}').normalize():,f}"


def figure_text(value: float) -> str:
    """A measured figure to four significant digits, a large one whole: ``67.04``,
    ``21,500``, ``0.0001235``."""
    if not _readable(value):
        return f"{value:.4g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return exact_text(float(f"{value:.4g}"))


def count_text(value: float) -> str:
    """A count worked out as a float (the jobs a horizon brings at a mean interarrival), whole:
    ``86,400,000``; one past reading (``READABLE_MAGNITUDES``) as ``figure_text`` writes it:
    ``8.64e+304``."""
    if abs(value) >= READABLE_MAGNITUDES[1] or not math.isfinite(value):
        return figure_text(value)
    return f"{value:,.0f}"


def counted(count: int, noun: str) -> str:
    """A count with separators and its noun, singular for one: ``1 token``,
    ``1,000 tokens``; what every message, status and progress line says of a count."""
    return f"{exact_text(count)} {noun}{'' if count == 1 else 's'}"


def _readable(value: float) -> bool:
    low, high = READABLE_MAGNITUDES
    return value == 0 or (math.isfinite(value) and low <= abs(value) < high)


def hover_number(field: str, *, exact: bool = False) -> str:
    """``field`` (``x``, ``y``, ``customdata``) in a plotly hovertemplate, written as
    ``exact_text`` writes a swept value (``exact``) or as ``figure_text`` a measured one:
    d3-format keeps a large one's four significant digits (21,540), so a page puts each
    point's ``figure_text`` in its place (``reports.hover_text``: 21,537)."""
    return "%{" + field + ":" + (HOVER_EXACT if exact else HOVER_FIGURE) + "}"
