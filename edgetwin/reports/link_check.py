"""The link check of an emulator run (``link_check.csv``) as a figure: what each link carried."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from edgetwin.links import TOLERANCE_PCT, CheckedLink
from edgetwin.number_text import exact_text
from edgetwin.reports.style import categories, color, styled, title_text


def link_check_figure(checks: Sequence[CheckedLink]) -> go.Figure | None:
    """Wire rate error against the set rate per direction, the tolerance band around 0."""
    checks = [check for check in checks if check.error_pct is not None]  # old files: none
    if not checks:
        return None
    rates = sorted({check.bandwidth_mbps for check in checks})
    fig = go.Figure()
    for index, (name, inside, marker) in enumerate(
        (("within tolerance", True, "circle"), ("outside tolerance", False, "x"))
    ):
        rows = [c for c in checks if (c.warning() is None) is inside]
        fig.add_trace(
            go.Scatter(
                x=[exact_text(c.bandwidth_mbps) for c in rows],
                y=[c.error_pct for c in rows],
                text=[_direction(c) for c in rows],
                customdata=[c.wire_mbps for c in rows],
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
        f"dashed: the {exact_text(TOLERANCE_PCT)} % tolerance; outside it the emulator's times at "
        "that rate are not the link's alone",
    )
    fig.update_layout(title=title)
    fig.update_xaxes(title="Set rate (Mbit/s)", type="category", categoryarray=categories(rates))
    fig.update_yaxes(title="Wire rate error (%)", zeroline=True)
    return styled(fig)


def _direction(check: CheckedLink) -> str:
    """Sender -> receiver, and the senders beside it on a shared medium (``flows`` > 1)."""
    beside = "" if check.flows == 1 else f" (one of {check.flows} senders, against its share)"
    return f"{check.sender} -> {check.receiver}{beside}"
