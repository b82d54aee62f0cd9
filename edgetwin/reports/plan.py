"""The page of a plan question: the answer in words and its figures (``plan.html``)."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from edgetwin.atomic import write_text_atomic
from edgetwin.plan.answers import describe
from edgetwin.plan.questions import PlanQuestion
from edgetwin.reports.html import figure_html, page

PLAN_REPORT = "plan.html"


def fleet_figures(result: dict[str, Any]) -> list[go.Figure]:
    """Per batch: p95 latency over devices x bandwidth, and the frontier meeting the target."""
    figures = []
    for entry in result["per_batch"]:
        fig = go.Figure(
            go.Heatmap(
                x=result["bandwidths_mbps"],
                y=result["devices"],
                z=entry["p95_ms"],
                colorbar={"title": "p95 ms"},
                hovertemplate="%{y} devices, %{x} Mbit/s: p95 %{z:.1f} ms<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=entry["min_bandwidth_mbps_by_devices"],
                y=result["devices"],
                mode="lines+markers",
                name=f"least bandwidth with p95 <= {result['target_p95_ms']:g} ms",
                line={"color": "white"},
            )
        )
        fig.update_layout(
            title=f"p95 latency, batch {entry['batch']}, {result['strategy']}",
            xaxis_title="bandwidth (Mbit/s)",
            yaxis_title="devices",
        )
        figures.append(fig)
    return figures


def crossover_figures(result: dict[str, Any]) -> list[go.Figure]:
    """Crossover bandwidth vs batch per fleet size, and the latency curves behind it."""
    crossing = go.Figure()
    curves = go.Figure()
    for devices in sorted({c["devices"] for c in result["curves"]}):
        mine = [c for c in result["curves"] if c["devices"] == devices]
        crossing.add_trace(
            go.Scatter(
                x=[c["batch"] for c in mine],
                y=[c["crossover_mbps"] for c in mine],
                mode="lines+markers",
                name=f"{devices} devices",
            )
        )
        for c in mine:
            name = f"batch {c['batch']}, {devices} devices"
            curves.add_trace(
                go.Scatter(x=c["bandwidths_mbps"], y=c["distributed_ms"], name=name, mode="lines")
            )
    for c in result["curves"]:
        if c["devices"] == min(x["devices"] for x in result["curves"]):
            curves.add_trace(
                go.Scatter(
                    x=c["bandwidths_mbps"],
                    y=c["single_ms"],
                    name=f"single, batch {c['batch']}",
                    mode="lines",
                    line={"dash": "dot"},
                )
            )
    crossing.update_layout(
        title=f"Bandwidth from which {result['strategy']} beats one device",
        xaxis={"title": "batch", "type": "log"},
        yaxis_title="crossover bandwidth (Mbit/s)",
    )
    curves.update_layout(
        title=f"Latency vs bandwidth: best {result['strategy']} variant and single",
        xaxis_title="bandwidth (Mbit/s)",
        yaxis={"title": "latency per batch (ms)", "type": "log"},
    )
    return [crossing, curves]


def best_mode_figures(result: dict[str, Any]) -> list[go.Figure]:
    """Heatmap of the fastest candidate over batch x bandwidth; latency-energy Pareto front."""
    names = sorted({str(n) for row in result["best"] for n in row})
    code = {name: i for i, name in enumerate(names)}
    steps = max(1, len(names))
    palette = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6"]
    scale = []
    for i in range(steps):
        colour = palette[i % len(palette)]
        scale += [[i / steps, colour], [(i + 1) / steps, colour]]
    heat = go.Figure(
        go.Heatmap(
            x=[f"{bw:g}" for bw in result["bandwidths_mbps"]],
            y=[str(b) for b in result["batches"]],
            z=[[code[str(n)] for n in row] for row in result["best"]],
            text=result["best"],
            texttemplate="%{text}",
            zmin=-0.5,
            zmax=steps - 0.5,
            colorscale=scale,
            showscale=False,
            hovertemplate="batch %{y}, %{x} Mbit/s: %{text}<extra></extra>",
        )
    )
    heat.update_layout(title="Fastest mode", xaxis_title="bandwidth (Mbit/s)", yaxis_title="batch")
    pareto = go.Figure()
    points = result["pareto"]
    pareto.add_trace(
        go.Scatter(
            x=[p["latency_ms"] for p in points],
            y=[p["energy_j_per_sample"] for p in points],
            text=[f"{p['candidate']}, batch {p['batch']}, {p['bandwidth_mbps']:g}" for p in points],
            mode="lines+markers",
            name="Pareto front",
            line={"shape": "hv"},
        )
    )
    pareto.update_layout(
        title="Pareto front: latency per batch vs energy per sample",
        xaxis={"title": "latency per batch (ms)", "type": "log"},
        yaxis_title="energy per sample (J)",
    )
    return [heat, pareto]


def capacity_figures(result: dict[str, Any]) -> list[go.Figure]:
    """p95 job latency and the largest backlog of every run against the fleet size."""
    fleets = result["fleets"]
    runs = [(fleet["fleet_size"], run) for fleet in fleets for run in fleet["runs"]]
    keeps = ["keeps up" if run["keeps_up"] else "falls behind" for _, run in runs]
    latency = go.Figure()
    for what, symbol in (("keeps up", "circle"), ("falls behind", "x")):
        mine = [(n, run) for (n, run), k in zip(runs, keeps, strict=True) if k == what]
        latency.add_trace(
            go.Scatter(
                x=[n for n, _ in mine],
                y=[run["p95_s"] for _, run in mine],
                text=[f"rep {run['rep']}, {run['unfinished']} unfinished" for _, run in mine],
                mode="markers",
                marker={"symbol": symbol, "size": 9},
                name=f"run: {what}",
            )
        )
    sizes = [fleet["fleet_size"] for fleet in fleets]
    latency.add_trace(  # a trace, not add_hline: its annotation breaks a log axis's range
        go.Scatter(
            x=[sizes[0], sizes[-1]],
            y=[result["target_p95_s"]] * 2,
            mode="lines",
            line={"dash": "dash", "color": "black"},
            name=f"target p95 ({result['target_p95_s']:g} s)",
        )
    )
    if result["smallest_fleet"] is not None:
        latency.add_vline(
            x=result["smallest_fleet"], line_dash="dot", annotation_text="smallest fleet"
        )
    latency.update_layout(
        title=f"p95 job latency per run, a job every {result['interarrival_s']:g} s",
        xaxis_title="phones in the fleet",
        yaxis={"title": "p95 job latency (s)", "type": "log"},
    )
    backlog = go.Figure(
        go.Scatter(
            x=[n for n, _ in runs],
            y=[run["max_backlog"] for _, run in runs],
            mode="markers",
            name="largest backlog",
        )
    )
    backlog.update_layout(
        title="Largest backlog a job met on arrival (jobs still in the system)",
        xaxis_title="phones in the fleet",
        yaxis_title="jobs",
    )
    return [latency, backlog]


FIGURES = {
    "crowd_capacity": capacity_figures,
    "smallest_fleet": fleet_figures,
    "crossover": crossover_figures,
    "best_mode": best_mode_figures,
}


def render_plan(question: PlanQuestion, result: dict[str, Any]) -> str:
    """The page as one HTML string."""
    lines = "".join(f"<li>{escape(line)}</li>" for line in describe(result))
    intro = f"<p>{escape(question.description)}</p>" if question.description else ""
    figures = "".join(figure_html(fig) for fig in FIGURES[result["kind"]](result))
    return page(f"edgetwin plan: {question.name}", f"{intro}<ul>{lines}</ul>{figures}")


def write_plan_report(out: Path, question: PlanQuestion, result: dict[str, Any]) -> Path:
    """Write ``out/plan.html``."""
    path = out / PLAN_REPORT
    write_text_atomic(path, render_plan(question, result))
    return path
