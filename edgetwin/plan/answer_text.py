"""A plan's answers as text: the lines ``edgetwin plan`` prints and the report shows
(``describe``), and the titles and labels the report's figures take from them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from edgetwin.number_text import counted, exact_text, figure_text
from edgetwin.plan.answers import QUESTIONS
from edgetwin.plan.capacity import describe_capacity
from edgetwin.plan.questions import CROSSOVER, CROWD_CAPACITY, LONGEST_CONTEXT, SMALLEST_FLEET
from edgetwin.plan.smallest_fleet import meets_target
from edgetwin.run_failures import failure_reason


def describe(result: dict[str, Any]) -> list[str]:
    """The answer in a few lines of text (for the terminal and the report)."""
    if result["kind"] == QUESTIONS:
        return [line for one in result["answers"] for line in describe(one)]
    if result["kind"] == LONGEST_CONTEXT:
        return describe_longest(result)
    if result["kind"] == CROWD_CAPACITY:
        return describe_capacity(result)
    if result["kind"] == SMALLEST_FLEET:
        target = result["target_p95_ms"]
        lines = []
        for entry in result["per_batch"]:
            head = f"batch {entry['batch']}, p95 <= {exact_text(target)} ms"
            one = entry.get("baseline")
            if one is not None and one["meets_target"]:  # the smallest fleet: lead with it
                p95 = figure_text(one["p95_ms"])
                alone = f"smallest fleet 1 device ({one['strategy']}, p95 {p95} ms)"
                split = _split_text(result, entry, ask=False)
                lines.append(f"{head}: {alone}; split with {result['strategy']}: {split}")
                continue
            split = _split_text(result, entry, ask=True)
            lines.append(f"{head} with {result['strategy']}: {split}{one_device_text(entry)}")
        return lines
    if result["kind"] == CROSSOVER:
        lines = []
        for curve in result["curves"]:
            head = f"batch {curve['batch']}, {curve['devices']} devices: {result['strategy']} "
            if curve["status"] == "crossover":
                # interpolated between grid points: three digits (374, not 373.728)
                at = exact_text(float(f"{curve['crossover_mbps']:.3g}"))
                lines.append(head + f"beats one device from {at} Mbit/s ({_how_found(curve)})")
            elif curve["status"] == "always":
                lines.append(head + "beats one device at every swept bandwidth")
            else:
                lines.append(head + "does not beat one device at the highest swept bandwidth")
        return lines
    lines = [f"{grid_title(grid)} per cell: {_best_cells(grid)}" for grid in result["grids"]]
    return [*lines, *_describe_fronts(result["pareto"])]


def _split_text(result: dict[str, Any], entry: dict[str, Any], ask: bool) -> str:
    """The smallest split fleet and the least bandwidth meeting the target, or how near the
    sweep came (and, with ``ask``, what to change: one device that meets it asks nothing)."""
    fleet, link = entry["smallest_split"], entry["smallest_bandwidth"]
    if fleet is None:
        return unmet_text(result, entry) + (_ASK_OTHERWISE if ask else "")
    return (
        f"smallest fleet {fleet['devices']} devices "
        f"(from {exact_text(fleet['bandwidth_mbps'])} Mbit/s{_except(result, entry, fleet)}); "
        f"smallest bandwidth {exact_text(link['bandwidth_mbps'])} Mbit/s "
        f"(with {link['devices']} devices)"
    )


# what to change where no swept fleet meets the target
_ASK_OTHERWISE = " (sweep more devices or bandwidth in axes, or ask less: question.target_p95_ms)"


def unmet_text(result: dict[str, Any], entry: dict[str, Any]) -> str:
    """Where no swept fleet meets the target, what was swept and how near it came: ``no
    swept fleet (2-8 devices, 100-1000 Mbit/s) meets it, the lowest p95 463.6 ms with 8
    devices at 1000 Mbit/s``, or why every configuration failed (``out of memory``)."""
    devices, bandwidths = result["devices"], result["bandwidths_mbps"]
    swept = f"{_range(devices)} devices, {_range(bandwidths)} Mbit/s"
    lowest = entry["lowest_p95"]
    if lowest is None:
        reasons = sorted({failure_reason(f) for row in entry["failed"] for f in row if f})
        return f"no swept fleet ({swept}) meets it: each failed, {', '.join(reasons)}"
    return (
        f"no swept fleet ({swept}) meets it, the lowest p95 {figure_text(lowest['p95_ms'])} ms "
        f"with {lowest['devices']} devices at {exact_text(lowest['bandwidth_mbps'])} Mbit/s"
    )


def _range(values: Sequence[float]) -> str:
    """``2-8`` (the lowest and highest swept), or ``2`` where one value was swept."""
    low, high = min(values), max(values)
    return exact_text(low) if low == high else f"{exact_text(low)}-{exact_text(high)}"


def one_device_text(entry: dict[str, Any]) -> str:
    """``; one device (single) p95 251.2 ms: meets it`` (or ``misses it``; ``: misses it
    (out of memory on jetson-0: ...)`` where a repetition failed); nothing for a batch answered
    from a table swept before the question ran one device."""
    one = entry.get("baseline")
    if one is None:
        return ""
    head = f"; one device ({one['strategy']})"
    if one["failed"] is not None:
        return f"{head}: misses it ({one['failed']})"
    verdict = "meets it" if one["meets_target"] else "misses it"
    return f"{head} p95 {figure_text(one['p95_ms'])} ms: {verdict}"


def _except(result: dict[str, Any], entry: dict[str, Any], fleet: dict[str, Any]) -> str:
    """``, but not at 650, 850 Mbit/s`` where the fleet misses the target above its least
    bandwidth; nothing where it meets it at every higher swept bandwidth."""
    missed = _missed_above(result, entry, fleet)
    if not missed:
        return ""
    return ", but not at " + ", ".join(exact_text(bw) for bw in missed) + " Mbit/s"


def _missed_above(
    result: dict[str, Any], entry: dict[str, Any], fleet: dict[str, Any]
) -> list[float]:
    """The swept bandwidths above the fleet's least one meeting the target where it misses
    it (noise over few repetitions): "from" that bandwidth does not hold there."""
    row = entry["p95_ms"][result["devices"].index(fleet["devices"])]
    return [
        bw
        for bw, p95 in zip(result["bandwidths_mbps"], row, strict=True)
        if bw > fleet["bandwidth_mbps"] and not meets_target(p95, result["target_p95_ms"])
    ]


def _how_found(curve: dict[str, Any]) -> str:
    """How a crossover was placed between the two swept bandwidths around it."""
    low, high = curve["between_mbps"]
    if curve["interpolated"]:
        return f"interpolated between {exact_text(low)} and {exact_text(high)} Mbit/s"
    low, high = exact_text(low), exact_text(high)
    return f"the swept {high} Mbit/s: a run failed at {low} or {high}, not interpolated"


def _best_cells(grid: dict[str, Any]) -> str:
    """Each candidate that is best somewhere, by the cells it wins, most first, with its
    value there: ``prism cr 4 x4: 5 cells (299-1281 ms), prism cr 4 x2: 1 cell (335.7 ms)``."""
    values: dict[str, list[float]] = defaultdict(list)
    for names, row_values in zip(grid["best"], grid["best_value"], strict=True):
        for name, value in zip(names, row_values, strict=True):
            values[cell_label(name)].append(value)
    unit = metric_unit(grid["metric"])
    ranked = sorted(values.items(), key=lambda item: -len(item[1]))
    return ", ".join(
        f"{name}: {counted(len(won), 'cell')}{_span(won, unit)}" for name, won in ranked
    )


def metric_unit(metric: str) -> str:
    """A best_mode metric's unit: ``J`` for an energy (``energy_j``), else ``ms``."""
    return "J" if metric.endswith("_j") else "ms"


def _span(values: Sequence[float | None], unit: str) -> str:
    """`` (67.04 ms)`` or `` (299-1281 ms)``; nothing where no candidate ran."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = figure_text(min(known)), figure_text(max(known))
    return f" ({low} {unit})" if low == high else f" ({low}-{high} {unit})"


def pareto_workloads(front: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The points of a best-mode answer's ``pareto`` by workload: ``""`` for an encoder's
    one, ``prompt 512, 128 output tokens`` for each of a decoder's."""
    fronts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for point in front:
        prompt, output = point.get("prompt_tokens"), point.get("output_tokens")
        workload = "" if prompt is None or output is None else workload_text(prompt, output)
        fronts[workload].append(point)
    return dict(fronts)


def _describe_fronts(front: Sequence[dict[str, Any]]) -> list[str]:
    fronts = pareto_workloads(front) or {"": []}
    return [
        f"Pareto front (latency vs J/sample{', ' + workload if workload else ''}): "
        + counted(len(points), "point")
        for workload, points in fronts.items()
    ]


NOTHING_RAN = "none ran"  # a cell where every candidate failed (out of memory, device lost)


def cell_label(name: str | None) -> str:
    """The best candidate of a cell as text: its label, or ``none ran``."""
    return NOTHING_RAN if name is None else name


def grid_title(grid: dict[str, Any]) -> str:
    """``lowest ttft_ms, prompt 512, 128 output tokens`` (``fastest`` for an encoder's)."""
    if grid["prompt_tokens"] is None and grid["metric"] == "total_ms":
        return "fastest"
    if grid["prompt_tokens"] is None:
        return f"lowest {grid['metric']}"
    return f"lowest {grid['metric']}, {workload_text(grid['prompt_tokens'], grid['output_tokens'])}"


def workload_text(prompt_tokens: int, output_tokens: int) -> str:
    """A decoder's workload as a title names it: ``prompt 2,048, 128 output tokens``."""
    return f"prompt {prompt_tokens:,}, {output_tokens:,} output tokens"


def describe_longest(result: dict[str, Any]) -> list[str]:
    """One line per candidate, batch and output length: the longest prompt and its limit."""
    lines = []
    for entry in result["candidates"]:
        tokens = f"{entry['output_tokens']:,} output tokens"
        head = f"batch {entry['batch']}, {tokens}, {entry['candidate']}: "
        longest = entry["longest_prompt_tokens"]
        if longest is None:
            lines.append(head + f"no prompt fits ({entry['stopped_by']})")
        elif entry["stopped_by"] == "positions":
            lines.append(
                head + f"every prompt fits, up to {longest:,} tokens (the model's positions)"
            )
        else:
            lines.append(
                head + f"longest prompt {longest:,} tokens (one more: {entry['stopped_by']})"
            )
    return lines
