"""The link check of an emulator run (``link_check.csv``) as a figure: what each link carried."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

import plotly.graph_objects as go

from edgetwin.links import TOLERANCE_PCT, within_tolerance
from edgetwin.reports.style import categories, color, styled, title_text


def read_link_checks(path: Path) -> list[dict[str, str]]:
    """The rows of ``link_check.csv`` ([] without one)."""
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def link_check_figure(checks: Sequence[Mapping[str, str]]) -> go.Figure | None:
    """Wire rate error against the set rate per direction, the tolerance band around 0."""
    if not checks:
        return None
    rates = sorted({float(row["bandwidth_mbps"]) for row in checks})
    fig = go.Figure()
    for index, (name, inside, marker) in enumerate(
        (("within tolerance", True, "circle"), ("outside tolerance", False, "x"))
    ):
        rows = [r for r in checks if within_tolerance(float(r["error_pct"])) is inside]
        fig.add_trace(
            go.Scatter(
                x=[f"{float(r['bandwidth_mbps']):g}" for r in rows],
                y=[float(r["error_pct"]) for r in rows],
                text=[_direction(r) for r in rows],
                customdata=[float(r["wire_mbps"]) for r in rows],
                mode="markers",
                marker={"color": color(2 * index), "size": 9, "symbol": marker},
                name=name,
                hovertemplate="%{text}, set %{x} Mbit/s: %{customdata:.1f} Mbit/s on the "
                "wire (%{y:+.1f} %)<extra></extra>",
            )
        )
    for bound in (-TOLERANCE_PCT, TOLERANCE_PCT):
        fig.add_hline(y=bound, line={"dash": "dash", "color": "#888"})
    title = title_text(
        "Link check: wire rate against set rate, each direction (iperf3)",
        f"dashed: the {TOLERANCE_PCT:g} % tolerance; outside it the emulator's times at "
        "that rate are not the link's alone",
    )
    fig.update_layout(title=title)
    fig.update_xaxes(title="Set rate (Mbit/s)", type="category", categoryarray=categories(rates))
    fig.update_yaxes(title="Wire rate error (%)", zeroline=True)
    return styled(fig)


def _direction(row: Mapping[str, str]) -> str:
    """Sender -> receiver, and the senders beside it on a shared medium (``flows`` > 1)."""
    flows = int(row.get("flows") or 1)  # files before the shared medium have no flows
    beside = "" if flows == 1 else f" (one of {flows} senders, against its share)"
    return f"{row['sender']} -> {row['receiver']}{beside}"
