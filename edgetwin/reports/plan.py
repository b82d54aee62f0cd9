"""The page of a plan question: the answer in words and its figures (``plan.html``)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from edgetwin.atomic import write_text_atomic
from edgetwin.decoder_spec import longest_prompt_tokens
from edgetwin.models import registry
from edgetwin.number_text import exact_text, hover_number
from edgetwin.plan.answer_text import (
    NOTHING_RAN,
    cell_label,
    describe,
    grid_title,
    metric_unit,
    one_device_text,
    pareto_workloads,
    unmet_text,
)
from edgetwin.plan.answers import QUESTIONS
from edgetwin.plan.questions import (
    BEST_METRICS,
    BEST_MODE,
    CROSSOVER,
    CROWD_CAPACITY,
    LONGEST_CONTEXT,
    SMALLEST_FLEET,
    PlanQuestion,
)
from edgetwin.reports.figures import candidate_colors, strategy_color
from edgetwin.reports.html import figures_html, page, warnings_html
from edgetwin.reports.style import (
    categories,
    color,
    dash,
    discrete_colorscale,
    legend_key,
    log_ticks,
    reference_line,
    rows_height,
    symbol,
    title_text,
)
from edgetwin.run_failures import failure_reason

PLAN_REPORT = "plan.html"
NOTHING_RAN_COLOR = "#dddddd"  # a heatmap cell where every candidate failed
FRONT_LINE_COLOR = "#888888"  # a Pareto front's steps; its points in their strategies' colours
# the trace's name beside it
CURVE_HOVER = f"{hover_number('x', exact=True)} Mbit/s: {hover_number('y')} ms per batch"


def fleet_figures(result: dict[str, Any]) -> list[go.Figure]:
    """Per batch: p95 latency over devices x bandwidth (cells on the swept values only), the
    frontier meeting the target, and whether one device meets it (in the subtitle)."""
    figures = []
    bandwidths = categories(result["bandwidths_mbps"])
    devices = [str(n) for n in result["devices"]]
    for entry in result["per_batch"]:
        frontier = entry["min_bandwidth_mbps_by_devices"]
        cells = [
            list(zip(p95s, failed, strict=True))
            for p95s, failed in zip(entry["p95_ms"], entry["failed"], strict=True)
        ]
        fig = go.Figure(
            go.Heatmap(
                x=bandwidths,
                y=devices,
                z=entry["p95_ms"],
                # a configuration with a failed repetition has no p95: its cell says why
                text=[[_fleet_cell(p95, failed) for p95, failed in row] for row in cells],
                texttemplate="%{text}",
                customdata=[
                    [failed or f"p95 {p95:.1f} ms" for p95, failed in row] for row in cells
                ],
                colorbar={"title": "p95 (ms)"},
                hovertemplate="%{y} devices, %{x} Mbit/s: %{customdata}<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[None if bw is None else exact_text(bw) for bw in frontier],
                y=devices,
                mode="markers",  # a frame around the cell: a dot or a line hid its number
                name=f"least bandwidth with p95 ≤ {exact_text(result['target_p95_ms'])} ms",
                marker={"symbol": "square-open", "size": 34, "color": "white", "line_width": 3},
                hovertemplate="%{y} devices: from %{x} Mbit/s<extra></extra>",
                showlegend=False,  # said in the title: a white frame is blank in a legend
            )
        )
        target = f"p95 ≤ {exact_text(result['target_p95_ms'])} ms"
        framed = (
            f"framed: the least bandwidth with {target} for each fleet size"
            if entry["smallest_split"] is not None
            else f"nothing framed, {target}: {unmet_text(result, entry)}"
        )
        fig.update_layout(
            title=title_text(
                f"p95 latency, batch {entry['batch']}, {result['strategy']}",
                framed + one_device_text(entry),
            ),
            xaxis={"title": "Bandwidth (Mbit/s)", "type": "category", "categoryarray": bandwidths},
            yaxis={"title": "Fleet size (devices)", "type": "category", "categoryarray": devices},
            height=rows_height(2 * len(devices)),
        )
        figures.append(fig)
    return figures


def _fleet_cell(p95_ms: float | None, failed: str | None) -> str:
    """A fleet heatmap cell's text: its p95 in whole ms, or why a repetition failed
    (``out of memory``)."""
    return f"{p95_ms:.0f}" if failed is None else failure_reason(failed)


def crossover_figures(result: dict[str, Any]) -> list[go.Figure]:
    """Crossover bandwidth vs batch per fleet size (left out where no batch crosses: the
    page's text says where the strategy wins), and the latency curves behind it: batch by
    colour, fleet size by dash (one legend entry each, not one per curve)."""
    fleet_sizes = sorted({c["devices"] for c in result["curves"]})
    batches = sorted({c["batch"] for c in result["curves"]})
    bandwidths = [bw for c in result["curves"] for bw in c["bandwidths_mbps"]]
    # a line through one bandwidth draws nothing: its points then
    curve_mode = "lines" if len(set(bandwidths)) > 1 else "markers"
    crossing = go.Figure()
    curves = go.Figure()
    for at, devices in enumerate(fleet_sizes):
        mine = [c for c in result["curves"] if c["devices"] == devices]
        crossing.add_trace(
            go.Scatter(
                x=[c["batch"] for c in mine],
                y=[c["crossover_mbps"] for c in mine],
                mode="lines+markers",
                name=f"{devices} devices",
                line={"color": color(at)},
                marker_symbol=symbol(at),
                hovertemplate=f"batch %{{x}}, {devices} devices: from %{{y:.0f}} Mbit/s"
                "<extra></extra>",
            )
        )
        for c in mine:
            curves.add_trace(
                go.Scatter(
                    x=c["bandwidths_mbps"],
                    y=c["distributed_ms"],
                    name=f"batch {c['batch']}, {devices} devices",
                    mode=curve_mode,
                    line={"color": color(batches.index(c["batch"])), "dash": dash(at)},
                    marker_symbol=symbol(at),
                    showlegend=False,
                    hovertemplate=CURVE_HOVER,
                )
            )
    single_dash, single_symbol = dash(len(fleet_sizes)), symbol(len(fleet_sizes))
    for c in result["curves"]:
        if c["devices"] == fleet_sizes[0]:
            curves.add_trace(
                go.Scatter(
                    x=c["bandwidths_mbps"],
                    y=c["single_ms"],
                    name=f"single, batch {c['batch']}",
                    mode=curve_mode,
                    line={"color": color(batches.index(c["batch"])), "dash": single_dash},
                    marker_symbol=single_symbol,
                    showlegend=False,
                    hovertemplate=CURVE_HOVER,
                )
            )
    for index, batch in enumerate(batches):
        legend_key(curves, f"batch {batch}", group="batch", line={"color": color(index)})
    deployments = [
        *(
            (f"{result['strategy']}, {n} devices", dash(at), symbol(at))
            for at, n in enumerate(fleet_sizes)
        ),
        ("single device", single_dash, single_symbol),
    ]
    for name, key_dash, key_symbol in deployments:
        marker = {"symbol": key_symbol, "color": "#555"} if curve_mode == "markers" else None
        legend_key(
            curves,
            name,
            group="deployment",
            line={"color": "#555", "dash": key_dash},
            marker=marker,
        )
    latencies = [ms for c in result["curves"] for ms in (*c["distributed_ms"], *c["single_ms"])]
    crossing.update_layout(
        title=title_text(
            f"Bandwidth from which {result['strategy']} beats one device",
            _crossover_gaps(result),
        ),
        xaxis={"title": "Batch size (samples)", **log_ticks(batches, swept=True)},
        yaxis_title="Crossover bandwidth (Mbit/s)",
    )
    curves.update_layout(
        title=f"Latency vs bandwidth: best {result['strategy']} variant and single",
        xaxis={"title": "Bandwidth (Mbit/s)", **log_ticks(bandwidths, swept=True)},
        yaxis={"title": "Latency per batch (ms)", **log_ticks(latencies)},
    )
    crosses = any(c["crossover_mbps"] is not None for c in result["curves"])
    return [crossing, curves] if crosses else [curves]


def _crossover_gaps(result: dict[str, Any]) -> str | None:
    """What a missing point means (a line left out there): the strategy loses even at the
    highest bandwidth swept, or wins already at the lowest."""
    statuses = {c["status"] for c in result["curves"] if c["crossover_mbps"] is None}
    bandwidths = [bw for c in result["curves"] for bw in c["bandwidths_mbps"]]
    meaning = {
        "never": f"loses even at {exact_text(max(bandwidths))} Mbit/s",
        "always": f"wins already at {exact_text(min(bandwidths))} Mbit/s",
    }
    said = [meaning.get(status, status) for status in sorted(statuses, reverse=True)]
    return f"no point: {result['strategy']} " + " or ".join(said) if said else None


def best_mode_figures(result: dict[str, Any]) -> list[go.Figure]:
    """A heatmap of the best candidate over batch x bandwidth per metric and workload; the
    latency-energy Pareto front per workload."""
    colors = _best_colors(result)
    heatmaps = [_best_heatmap(result, grid, colors) for grid in result["grids"]]
    fronts = pareto_workloads(result["pareto"])
    return [*heatmaps, *(_pareto(points, workload) for workload, points in fronts.items())]


def _best_colors(result: dict[str, Any]) -> dict[str, str]:
    """Every candidate that is best in some cell of some grid, in its strategy's colour (a
    shade of it where several of one strategy are); ``none ran`` in grey."""
    shown = {name for grid in result["grids"] for row in grid["best"] for name in row}
    strategy_of = result["strategy_of"]
    colors = candidate_colors({n: strategy_of[n] for n in strategy_of if n in shown})
    return colors | ({NOTHING_RAN: NOTHING_RAN_COLOR} if None in shown else {})


def _best_heatmap(
    result: dict[str, Any], grid: dict[str, Any], colors: dict[str, str]
) -> go.Figure:
    labels = [[cell_label(n) for n in row] for row in grid["best"]]
    here = [name for name in colors if any(name in row for row in labels)]
    code = {name: i for i, name in enumerate(here)}
    batches = [str(b) for b in result["batches"]]
    heat = go.Figure(
        go.Heatmap(
            x=categories(result["bandwidths_mbps"]),
            y=batches,
            z=[[code[name] for name in row] for row in labels],
            text=labels,
            customdata=grid["best_value"],
            texttemplate="%{text}",
            zmin=-0.5,
            zmax=len(here) - 0.5,
            colorscale=discrete_colorscale([colors[name] for name in here]),
            showscale=False,
            hovertemplate=f"batch %{{y}}, %{{x}} Mbit/s: %{{text}} ({hover_number('customdata')} "
            f"{metric_unit(grid['metric'])})<extra></extra>",
        )
    )
    title = "Fastest mode"
    if grid_title(grid) != "fastest":
        workload = grid_title(grid).partition(", ")[2]
        title = title_text(f"Lowest {BEST_METRICS[grid['metric']]}", workload or None)
    heat.update_layout(
        title=title,
        xaxis={"title": "Bandwidth (Mbit/s)", "type": "category"},
        yaxis={"title": "Batch size (samples)", "type": "category"},
        height=rows_height(2 * len(batches)),
    )
    return heat


def _pareto(points: list[dict[str, Any]], workload: str) -> go.Figure:
    """One workload's latency-energy front, its points numbered and named in the title (a
    static file has no hover, and names beside the points ran into each other) and drawn in
    their strategies' colours; a one-device point names no bandwidth (the same at each)."""
    pareto = go.Figure()
    names = [_pareto_name(p) for p in points]
    pareto.add_trace(
        go.Scatter(
            x=[p["latency_ms"] for p in points],
            y=[p["energy_j_per_sample"] for p in points],
            text=[str(number) for number in range(1, len(points) + 1)],
            customdata=names,
            hovertemplate=f"%{{customdata}}<br>{hover_number('x')} ms per batch, "
            f"{hover_number('y')} J per sample"
            "<extra></extra>",
            mode="lines+markers+text",
            textposition="top right",
            name="Pareto front",
            line={"shape": "hv", "color": FRONT_LINE_COLOR},
            marker={"color": [strategy_color(p["strategy"]) for p in points], "size": 9},
            cliponaxis=False,
        )
    )
    key = "; ".join(  # no break inside an entry (no-break spaces)
        f"{number} = {name}".replace(" ", "\u00a0") for number, name in enumerate(names, start=1)
    )
    main = "Pareto front: latency per batch against energy per sample"
    pareto.update_layout(
        title=title_text(main + (f", {workload}" if workload else ""), key),
        xaxis={"title": "Latency per batch (ms)", **log_ticks(p["latency_ms"] for p in points)},
        yaxis_title="Energy per sample (J)",
    )
    return pareto


def _pareto_name(point: dict[str, Any]) -> str:
    name = f"{point['candidate']}, batch {point['batch']}"
    if registry.strategy(point["strategy"]).one_device:
        return name
    return f"{name}, {exact_text(point['bandwidth_mbps'])} Mbit/s"


def longest_context_figures(result: dict[str, Any]) -> list[go.Figure]:
    """The longest prompt each candidate fits, one bar per batch and output length (what
    stopped it on hover), and the model's positions less the output, which none can pass."""
    entries = result["candidates"]
    labels = list(dict.fromkeys(e["candidate"] for e in entries))
    workloads = list(dict.fromkeys((e["batch"], e["output_tokens"]) for e in entries))
    fig = go.Figure()
    for at, (batch, output) in enumerate(workloads):
        mine = {
            e["candidate"]: e
            for e in entries
            if (e["batch"], e["output_tokens"]) == (batch, output)
        }
        fig.add_bar(
            x=labels,
            y=[mine[c]["longest_prompt_tokens"] if c in mine else None for c in labels],
            customdata=[mine[c]["stopped_by"] if c in mine else "" for c in labels],
            textposition="none",
            name=f"batch {batch}, {output} output tokens",
            marker_color=color(at),
            hovertemplate="%{x}: %{y} prompt tokens<br>then %{customdata}<extra></extra>",
        )
    outputs = sorted({e["output_tokens"] for e in entries})
    for output in outputs:
        longest = longest_prompt_tokens(result["max_positions"], output)
        name = f"model positions, {output} output tokens"
        hover = (
            f"at most {longest} prompt tokens: the model's positions hold the prompt and "
            f"{output - 1} fed-back outputs"
        )
        fig.add_trace(reference_line([labels[0], labels[-1]], longest, name, hover))
    fig.update_layout(
        title=title_text(
            "Longest prompt that fits", "weights + peak KV cache against each device's RAM"
        ),
        barmode="group",
        xaxis={"title": "Candidate", "type": "category"},
        yaxis={"title": "Longest prompt (tokens)", "rangemode": "tozero"},
    )
    return [fig]


def questions_figures(result: dict[str, Any]) -> list[go.Figure]:
    """Every figure of each question of a file that lists several."""
    return [fig for one in result["answers"] for fig in FIGURES[one["kind"]](one)]


def capacity_figures(result: dict[str, Any]) -> list[go.Figure]:
    """p95 job latency and the largest backlog of every run against the fleet size, per
    swept bandwidth."""
    several = len(result["by_bandwidth"]) > 1
    figures = []
    for at in result["by_bandwidth"]:
        link = f" at {exact_text(at['bandwidth_mbps'])} Mbit/s" if several else ""
        figures += _capacity_at(result, at["fleets"], at["smallest_fleet"], link)
    return figures


def _capacity_at(
    result: dict[str, Any], fleets: list[dict[str, Any]], smallest: int | None, link: str
) -> list[go.Figure]:
    runs = [(fleet["fleet_size"], run) for fleet in fleets for run in fleet["runs"]]
    keeps = ["keeps up" if run["keeps_up"] else "falls behind" for _, run in runs]
    latency, backlog = go.Figure(), go.Figure()
    for index, (what, marker) in enumerate((("keeps up", "circle"), ("falls behind", "x"))):
        mine = [(n, run) for (n, run), k in zip(runs, keeps, strict=True) if k == what]
        look = {"symbol": marker, "size": 9, "color": color(index)}  # the same in both
        latency.add_trace(
            go.Scatter(
                x=[n for n, _ in mine],
                y=[run["p95_s"] for _, run in mine],
                text=[f"rep {run['rep']}, {run['unfinished']} unfinished" for _, run in mine],
                hovertemplate=f"%{{x}} phones: p95 {hover_number('y')} s<br>%{{text}}",
                mode="markers",
                marker=look,
                name=f"run: {what}",
            )
        )
        backlog.add_trace(
            go.Scatter(
                x=[n for n, _ in mine],
                y=[run["max_backlog"] for _, run in mine],
                mode="markers",
                marker=look,
                name=f"run: {what}",
                hovertemplate="%{x} phones: %{y} jobs<extra></extra>",
            )
        )
    sizes = [fleet["fleet_size"] for fleet in fleets]
    target, every = exact_text(result["target_p95_s"]), exact_text(result["interarrival_s"])
    name, hover = f"target p95 ({target} s)", f"target p95: {target} s"
    latency.add_trace(reference_line([sizes[0], sizes[-1]], result["target_p95_s"], name, hover))
    if smallest is not None:
        latency.add_vline(x=smallest, line_dash="dot", annotation_text="smallest fleet")
    latency.update_layout(
        title=f"p95 job latency per run, a job every {every} s{link}",
        xaxis_title="Fleet size (phones)",
        yaxis={
            "title": "p95 job latency (s)",
            **log_ticks([*(run["p95_s"] for _, run in runs), result["target_p95_s"]]),
        },
    )
    backlog.update_layout(
        title=title_text(
            f"Largest backlog a job met on arrival{link}", "jobs still in the system, per run"
        ),
        xaxis_title="Fleet size (phones)",
        yaxis_title="Largest backlog (jobs)",
    )
    return [latency, backlog]


FIGURES = {
    CROWD_CAPACITY: capacity_figures,
    SMALLEST_FLEET: fleet_figures,
    CROSSOVER: crossover_figures,
    BEST_MODE: best_mode_figures,
    LONGEST_CONTEXT: longest_context_figures,
    QUESTIONS: questions_figures,
}


def plan_figures(result: dict[str, Any]) -> list[go.Figure]:
    """Every figure of a plan's page, in page order."""
    return FIGURES[result["kind"]](result)


def render_plan(
    question: PlanQuestion, result: dict[str, Any], warnings: Sequence[str] = ()
) -> str:
    """The page as one HTML string: what the plan warned about on top."""
    lines = "".join(f"<li>{escape(line)}</li>" for line in describe(result))
    intro = f"<p>{escape(question.description)}</p>" if question.description else ""
    figures = figures_html(plan_figures(result))
    body = f"{warnings_html(warnings)}{intro}<ul>{lines}</ul>{figures}"
    return page(f"edgetwin plan: {question.name}", body)


def write_plan_report(
    out: Path, question: PlanQuestion, result: dict[str, Any], warnings: Sequence[str] = ()
) -> Path:
    """Write ``out/plan.html``, ``warnings`` (the plan's) on top."""
    path = out / PLAN_REPORT
    write_text_atomic(path, render_plan(question, result, warnings))
    return path
