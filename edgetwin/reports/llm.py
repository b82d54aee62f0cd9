"""Figures of a decoder run (docs/llm.md): TTFT and TPOT against the prompt length, tokens/s
against the bandwidth, and each device's memory against the context with its RAM and its
peak with the activations."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from statistics import fmean
from typing import NamedTuple

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from edgetwin.configuration import decoder_plan
from edgetwin.crowd_spec import member_names
from edgetwin.decoder_spec import DecoderSpec, kept_positions
from edgetwin.device_fleet import class_ram_mb
from edgetwin.errors import InputError
from edgetwin.models.decoder_costs import tightest_rank
from edgetwin.number_text import counted, exact_text, hover_number
from edgetwin.profile import MB
from edgetwin.reports.figures import looks
from edgetwin.reports.rows import Config, config_labels, config_of, config_order, fullest
from edgetwin.reports.style import log_ticks, reference_line, styled, title_text
from edgetwin.resolved_scenario import RESOLVED_FILE, load_resolved
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario
from edgetwin.scenario_paths import device_profile
from edgetwin.sweep_points import Configuration

RAM_SPAN = 1.5  # a RAM line over one context reaches this factor either side of it

Slice = tuple[object, ...]  # the values a figure holds fixed (batch, bandwidth, ...)
PeakKey = tuple[Config, int, int, int]  # a configuration, its batch, prompt and output tokens


class Peak(NamedTuple):
    """A configuration's tightest device at its peak (``memory_peaks``): what it holds (MB),
    the phase, its name and its RAM (MB; None where its class's profile did not load)."""

    mb: float
    phase: str
    device: str
    ram_mb: float | None


Peaks = Mapping[PeakKey, Peak]


def run_scenario(run_dir: Path) -> Scenario | None:
    """The scenario of a run's folder, from its ``scenario.resolved.yaml`` (None without
    one; an InputError naming it if it does not load)."""
    resolved = run_dir / RESOLVED_FILE
    return load_resolved(resolved) if resolved.exists() else None


def scenario_ram_mb(scenario: Scenario, resolved: Path) -> tuple[dict[str, float], list[str]]:
    """Each device class's RAM (MB) in the scenario read from ``resolved`` (a run's
    ``scenario.resolved.yaml``) and the profiles it names, and a warning for each class left
    out as its profile does not load (gone with a folder copied from another machine),
    naming ``scenario.resolved.yaml`` without its folder: the page is the same wherever it
    is drawn (``Results.write`` draws it in a staging folder)."""
    ram_mb: dict[str, float] = {}
    warnings = []
    for index, spec in enumerate(scenario.devices):
        try:
            ram_mb[spec.name] = class_ram_mb(spec, device_profile(spec, index, resolved))
        except InputError as exc:
            own = exc.path == str(resolved)  # named as the page's folder holds it
            named = InputError(RESOLVED_FILE, exc.field, exc.problem) if own else exc
            warnings.append(f"no RAM line for {spec.name}: {named.message}")
    return ram_mb, warnings


def is_decoder(rows: Sequence[ResultRow]) -> bool:
    """Whether the rows are a decoder's (they carry the prompt length)."""
    return bool(rows) and all(row.prompt_tokens is not None for row in rows)


def _mean(rows: Sequence[ResultRow], column: str) -> float | None:
    """Over the rows that ran and have the value (one output token has no TPOT)."""
    values = [v for r in rows if r.ok and (v := getattr(r, column)) is not None]
    return fmean(values) if values else None


def _line_config(row: ResultRow) -> Config:
    """A row's configuration; a CR's segments follow the prompt, so a CR is one line."""
    config = config_of(row)
    return config if config.cr is None else replace(config, segments=None)


def _lines(
    rows: Sequence[ResultRow],
    fixed: Callable[[ResultRow], Slice],
    swept: Callable[[ResultRow], float],
) -> tuple[Slice, dict[Config, dict[float, list[ResultRow]]]] | None:
    """The rows of the slice (``fixed``) with the most ``swept`` values, by configuration
    and swept value; on a tie the slice whose rows reach the highest bandwidth (its own,
    where it holds one: as the ViT run page picks its bandwidth, ``fullest``), then the
    first."""
    slices: dict[Slice, dict[Config, dict[float, list[ResultRow]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for row in rows:
        slices[fixed(row)][_line_config(row)][swept(row)].append(row)
    if not slices:
        return None
    counts = {s: len({x for line in held.values() for x in line}) for s, held in slices.items()}
    chosen = fullest(counts, lambda s: max(_bandwidths(slices[s])))
    lines = slices[chosen]
    return chosen, {c: dict(sorted(lines[c].items())) for c in sorted(lines, key=config_order)}


def _bandwidths(lines: dict[Config, dict[float, list[ResultRow]]]) -> list[float]:
    """The bandwidth of each row of ``lines``."""
    return [r.bandwidth_mbps for points in lines.values() for reps in points.values() for r in reps]


def _add_lines(
    fig: go.Figure,
    lines: dict[Config, dict[float, list[ResultRow]]],
    value: Callable[[list[ResultRow]], float | None],
    hover: str,
    col: int | None = None,
) -> None:
    """One line per configuration, named by its label, coloured by its strategy; ``hover``:
    a point's text with its units (``hover_number``'s: ``prompt %{x:,} tokens: %{y:,.4~r} ms``)."""
    labels = config_labels(lines)
    look = looks(labels)
    for config, points in lines.items():
        fig.add_scatter(
            x=list(points),
            y=[value(reps) for reps in points.values()],
            name=labels[config],
            legendgroup=config.strategy,
            legendgrouptitle_text=config.strategy,
            showlegend=col in (None, 1),
            mode="lines+markers",
            line=look[config].line(),
            marker_symbol=look[config].symbol,
            hovertemplate=f"{hover}<extra>{labels[config]}</extra>",
            **({} if col is None else {"row": 1, "col": col}),
        )


def ttft_tpot_figure(rows: Sequence[ResultRow]) -> go.Figure | None:
    """TTFT and TPOT (ms) against the prompt length, one line per configuration."""
    found = _lines(
        rows,
        lambda r: (r.batch, r.bandwidth_mbps, r.output_tokens),
        lambda r: float(r.prompt_tokens or 0),
    )
    if found is None:
        return None
    (batch, bandwidth_mbps, output), lines = found
    assert isinstance(bandwidth_mbps, float)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Time to first token", "Time per token"))
    styled(fig).update_layout(
        title=f"TTFT and TPOT vs prompt length at batch {batch}, "
        f"{exact_text(bandwidth_mbps)} Mbit/s, {output} output tokens"
    )
    prompts = [x for points in lines.values() for x in points]
    for col, column, name in ((1, "ttft_ms", "TTFT"), (2, "tpot_ms", "TPOT")):
        hover = f"prompt {hover_number('x', exact=True)} tokens: {hover_number('y')} ms"
        _add_lines(fig, lines, lambda reps, c=column: _mean(reps, c), hover, col)  # type: ignore[misc]
        values = [_mean(reps, column) for points in lines.values() for reps in points.values()]
        fig.update_xaxes(title="Prompt tokens", **log_ticks(prompts, swept=True), row=1, col=col)
        fig.update_yaxes(title=f"{name} (ms)", **log_ticks(values), row=1, col=col)
    return fig


def tokens_per_s_figure(rows: Sequence[ResultRow]) -> go.Figure | None:
    """Generated tokens per second against the bandwidth, one line per configuration."""
    found = _lines(
        rows,
        lambda r: (r.batch, r.prompt_tokens, r.output_tokens),
        lambda r: r.bandwidth_mbps,
    )
    if found is None:
        return None
    (batch, prompt, output), lines = found
    prompt_text = exact_text(prompt) if isinstance(prompt, int) else prompt  # a table's None
    fig = styled(go.Figure()).update_layout(
        title=f"Tokens/s vs bandwidth at batch {batch}, prompt {prompt_text}, "
        f"{output} output tokens"
    )
    hover = f"{hover_number('x', exact=True)} Mbit/s: {hover_number('y')} tokens/s"
    _add_lines(fig, lines, lambda reps: _mean(reps, "tokens_per_s"), hover)
    bandwidths = [x for points in lines.values() for x in points]
    fig.update_xaxes(title="Bandwidth (Mbit/s)", **log_ticks(bandwidths, swept=True))
    fig.update_yaxes(title="Tokens per second (all sequences)", rangemode="tozero")
    return fig


def _memory_mb(reps: list[ResultRow]) -> float | None:
    """The row's device's weights plus its peak KV cache (any status: a run that does
    not fit still says how much it needed)."""
    row = reps[0]
    if row.weights_mb is None or row.kv_cache_mb is None:
        return None
    return row.weights_mb + row.kv_cache_mb


def _peak_key(row: ResultRow) -> PeakKey:
    return config_of(row), row.batch, row.prompt_tokens or 0, row.output_tokens or 0


def memory_peaks(
    scenario: Scenario, rows: Sequence[ResultRow], ram_mb: Mapping[str, float]
) -> tuple[dict[PeakKey, Peak], list[str]]:
    """Per decoder configuration of ``rows``, the device whose peak is the largest share
    of its own RAM (``ram_mb``: per device class; ``tightest_rank``): its weights, KV
    cache and a layer's activations then (MB), and the phase, ``prefill`` or ``decode``
    (``DecoderPlan.peak_bytes``: what the twin holds against its RAM), from the scenario
    the rows ran (the layer split the row says). A row of a strategy the scenario does not
    run (a table of another folder) has none; one whose layer split the scenario cannot
    run (an edited table) has none and a warning naming it."""
    if not isinstance(scenario.model, DecoderSpec):
        return {}, []
    run = {strategy.name for strategy in scenario.strategies}
    members = [
        (name, ram_mb.get(spec.name))
        for spec in scenario.devices
        for name in member_names(spec.name, spec.count)
    ]
    peaks: dict[PeakKey, Peak] = {}
    failed: dict[tuple[str, int, str | None], tuple[str, int]] = {}  # problem, points
    seen: set[PeakKey] = set()
    for row in rows:
        key = _peak_key(row)
        if key in seen or row.strategy not in run or row.prompt_tokens is None:
            continue
        seen.add(key)
        assert row.output_tokens is not None
        config = Configuration(
            strategy=row.strategy,
            devices=row.devices,
            batch=row.batch,
            bandwidth_mbps=row.bandwidth_mbps,
            cr=row.cr,
            segments=row.segments,
            prompt_tokens=row.prompt_tokens,
            output_tokens=row.output_tokens,
        )
        split = row.layer_split
        try:
            plan = decoder_plan(scenario, config, _stages(split))
        except ValueError as exc:
            where = (row.strategy, row.devices, split)
            problem, points = failed.get(where, (str(exc), 0))
            failed[where] = problem, points + 1
            continue
        tokens = kept_positions(row.prompt_tokens, row.output_tokens)
        held = [plan.peak_bytes(rank, tokens) for rank in range(plan.devices)]
        ram = [None if mb is None else mb * MB for _, mb in members[: plan.devices]]
        rank = tightest_rank([peak for peak, _ in held], ram)
        name, device_ram_mb = members[rank]
        peaks[key] = Peak(held[rank][0] / MB, held[rank][1], name, device_ram_mb)
    warnings = [
        f"no memory peak for {strategy} x{devices} ({counted(points, 'point')}): its "
        f"layer_split {split!r} does not run on {RESOLVED_FILE}'s model: {problem}"
        for (strategy, devices, split), (problem, points) in failed.items()
    ]
    return peaks, warnings


def _stages(split: str | None) -> tuple[int, ...] | None:
    """A row's ``layer_split`` ("9+7") as layers per stage; a ValueError where it is not."""
    if not split:
        return None
    parts = split.split("+")
    if not all(part.isdigit() for part in parts):
        raise ValueError("not whole numbers of layers joined by '+'")
    return tuple(int(part) for part in parts)


def memory_figure(
    rows: Sequence[ResultRow], ram_mb: Mapping[str, float], peaks: Peaks | None = None
) -> go.Figure | None:
    """Weights + peak KV cache per device against the context (prompt + output tokens), one
    line per configuration, each point's peak with a layer's activations (``peaks``:
    ``memory_peaks``) as an open marker, and each device class's RAM as a dashed line."""
    found = _lines(
        rows,
        lambda r: (r.batch,),
        lambda r: float((r.prompt_tokens or 0) + (r.output_tokens or 0)),
    )
    if found is None:
        return None
    (batch,), lines = found
    main = f"Memory per device vs context at batch {batch}: weights + peak KV cache"
    detail = (
        "open markers: the device closest to its own RAM at its peak, with a layer's "
        "activations (the prefill's, or the last decode step's): what its RAM must hold"
    )
    fig = styled(go.Figure()).update_layout(title=title_text(main, detail if peaks else None))
    hover = f"context {hover_number('x', exact=True)} tokens: {hover_number('y')} MB"
    _add_lines(fig, lines, _memory_mb, hover)
    if peaks:
        _add_peaks(fig, lines, peaks)
    contexts = [x for points in lines.values() for x in points]
    for name, ram in ram_mb.items():
        label = f"RAM of {name} ({exact_text(ram)} MB)"
        line = reference_line(
            _ram_span(contexts), ram, label, f"RAM of {name}: {exact_text(ram)} MB"
        )
        fig.add_trace(line.update(legendgroup="RAM"))
    fig.update_xaxes(title="Context (prompt + output tokens)", **log_ticks(contexts, swept=True))
    fig.update_yaxes(title="Memory per device (MB)", rangemode="tozero")
    return fig


def _add_peaks(
    fig: go.Figure, lines: dict[Config, dict[float, list[ResultRow]]], peaks: Peaks
) -> None:
    """Each configuration's peaks, an open marker of its look per point it has one for
    (``label peak``; toggled with its strategy's legend group, no entry of its own)."""
    labels = config_labels(lines)
    look = looks(labels)
    for config, points in lines.items():
        held = {x: peaks[key] for x, reps in points.items() if (key := _peak_key(reps[0])) in peaks}
        if not held:
            continue
        fig.add_scatter(
            x=list(held),
            y=[peak.mb for peak in held.values()],
            customdata=[_peak_words(peak) for peak in held.values()],
            name=f"{labels[config]} peak",
            legendgroup=config.strategy,
            showlegend=False,
            mode="markers",
            marker={
                "symbol": f"{look[config].symbol}-open",
                "color": look[config].color,
                "size": 9,
            },
            hovertemplate=f"context {hover_number('x', exact=True)} tokens: "
            f"%{{customdata[0]}} holds {hover_number('y')} MB at its peak, in the "
            f"%{{customdata[1]}}, activations included; %{{customdata[2]}}"
            f"<extra>{labels[config]}</extra>",
        )


def _peak_words(peak: Peak) -> list[str]:
    """A peak marker's hover parts: the device, the phase, and its RAM with the room left
    or what it is short by."""
    if peak.ram_mb is None:
        return [peak.device, peak.phase, "its RAM is not known"]
    room = peak.ram_mb - peak.mb
    said = (
        f"{exact_text(round(room))} MB left"
        if room >= 0
        else f"{exact_text(round(-room))} MB short"
    )
    return [peak.device, peak.phase, f"its RAM {exact_text(peak.ram_mb)} MB, {said}"]


def _ram_span(contexts: Sequence[float]) -> list[float]:
    """Where a RAM line runs: over the contexts, or around the one context (a line from it
    to itself was drawn as nothing, its key in the legend)."""
    low, high = min(contexts), max(contexts)
    return [low, high] if low < high else [low / RAM_SPAN, high * RAM_SPAN]


def llm_figures(
    rows: Sequence[ResultRow], ram_mb: Mapping[str, float], peaks: Peaks | None = None
) -> list[go.Figure]:
    """Every decoder figure the rows allow, in page order."""
    memory = memory_figure(rows, ram_mb, peaks)
    figures = [ttft_tpot_figure(rows), tokens_per_s_figure(rows), memory]
    return [fig for fig in figures if fig is not None]
