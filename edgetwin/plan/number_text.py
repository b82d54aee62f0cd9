"""Numbers as a plan's answers print them for a person: thousands separated, never with
an exponent (a 1,000,000 ms target printed ``1e+06``)."""

from __future__ import annotations

from decimal import Decimal


def exact_text(value: float) -> str:
    """A value as the question or the sweep gave it, every digit: ``600``, ``1,000,000``,
    ``0.5``, ``1,234.5``, ``0.00001``."""
    return f"{Decimal(repr(float(value))).normalize():,f}"


def figure_text(value: float) -> str:
    """A measured figure to four significant digits, a large one whole: ``67.04``,
    ``21,500``, ``0.0001235``."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return exact_text(float(f"{value:.4g}"))
