"""Self-contained HTML reports of run directories."""

from __future__ import annotations

from edgetwin.reports.html import write_report

__all__ = ["write_report"]
