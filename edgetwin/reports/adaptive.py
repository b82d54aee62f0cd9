"""The adaptive-deployment evaluation: evaluation.json, evaluation.html, performance_map.json."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from edgetwin.atomic import write_text_atomic
from edgetwin.evaluate.adaptive_results import Evaluation
from edgetwin.evaluate.adaptive_scores import ConditionResult
from edgetwin.number_text import counted, exact_text, hover_number
from edgetwin.policies.adaptive import POLICY_LABELS, WEIGHTED
from edgetwin.policies.perf_map_io import write_map
from edgetwin.reports.figures import candidate_colors
from edgetwin.reports.html import figures_html, page, warnings_html
from edgetwin.reports.style import (
    color,
    dash,
    discrete_colorscale,
    legend_key,
    log_ticks,
    styled,
    symbol,
    title_text,
)
from edgetwin.run_warnings import write_warnings_file

BANDWIDTH_AXIS = "Bandwidth (Mbit/s)"
EVALUATION_PAGE = "evaluation.html"


def write_evaluation(out_dir: Path, evaluation: Evaluation) -> list[Path]:
    """Write evaluation.json, evaluation.html, performance_map.json and, where the
    evaluation warned, warnings.json into ``out_dir``."""
    paths = [out_dir / n for n in ("evaluation.json", EVALUATION_PAGE, "performance_map.json")]
    write_warnings_file(out_dir, evaluation.warnings)
    write_text_atomic(paths[0], json.dumps(evaluation.to_json(), indent=1, allow_nan=False) + "\n")
    write_text_atomic(paths[1], render_evaluation(evaluation))
    write_map(paths[2], evaluation.perf_map)
    return paths


def evaluation_figures(evaluation: Evaluation) -> list[go.Figure]:
    """Every figure of the evaluation page, in page order: the crossover batch only where
    distributed wins or is picked somewhere (else it is an empty plot)."""
    who_all = ("oracle", *evaluation.scores)
    crosses = any(row[who] is not None for row in evaluation.crossover_batch() for who in who_all)
    return [
        *(_mode_heatmaps(evaluation, group) for group in _groups(evaluation)),
        _regret_figure(evaluation),
        *([_crossover_figure(evaluation)] if crosses else []),
    ]


def render_evaluation(evaluation: Evaluation) -> str:
    """The evaluation page: its warnings on top, scores, best mode vs chosen, regret,
    crossover batch."""
    figures = evaluation_figures(evaluation)
    body = (
        warnings_html(evaluation.warnings)
        + _settings_html(evaluation)
        + _scores_html(evaluation)
        + _by_axis_html(evaluation, "adaptive")
        + figures_html(figures)
        + _confusion_html(evaluation, "adaptive")
    )
    return page(f"edgetwin adaptive deployment: {evaluation.scenario}", body)


Group = tuple[int, int, int | None]  # devices up, tokens, output tokens (None: an encoder)


def _groups(evaluation: Evaluation) -> list[Group]:
    """(devices, tokens, output tokens) of the held-out conditions."""
    return sorted({_group(c) for c in evaluation.conditions})


def _group(condition: ConditionResult) -> Group:
    return (condition.devices, condition.tokens, condition.output_tokens)


def _tokens_text(tokens: int, output_tokens: int | None) -> str:
    """``197 tokens``; a decoder's ``512 prompt, 64 output tokens``."""
    if output_tokens is None:
        return f"{tokens} tokens"
    return f"{tokens} prompt, {output_tokens} output tokens"


def _settings_html(evaluation: Evaluation) -> str:
    s = evaluation.settings
    m = evaluation.perf_map
    objective = s.objective + (
        f" (weight {exact_text(s.weight)} on latency)" if s.objective == WEIGHTED else ""
    )
    tokens = f"tokens {_join(m.tokens)}"
    if m.output_tokens is not None:
        tokens = f"prompt tokens {_join(m.tokens)}; output tokens {_join(m.output_tokens)}"
    items = [
        ("Objective", objective),
        (
            "Map",
            f"{m.source}; {tokens}; batch {_join(m.batches)}; "
            f"{_join(m.bandwidths_mbps)} Mbit/s; devices {_join(m.devices)}",
        ),
        ("Ground truth", _truth_summary(evaluation)),
        ("Conditions", str(len(evaluation.conditions))),
    ]
    body = "".join(f"<li><b>{k}:</b> {escape(v)}</li>" for k, v in items)
    return f"<ul class='summary'>{body}</ul>"


def _truth_summary(evaluation: Evaluation) -> str:
    """Where the ground truth comes from and which conditions it covers."""
    held_out, conditions = evaluation.settings.held_out, evaluation.conditions
    tokens = f"tokens {_join(sorted({c.tokens for c in conditions}))}"
    outputs = sorted({c.output_tokens for c in conditions if c.output_tokens is not None})
    if outputs:
        tokens = f"prompt {tokens}; output tokens {_join(outputs)}"
    if held_out is None:
        cells = "; ".join(
            f"batch {c.batch}, {exact_text(c.bandwidth_mbps)} Mbit/s, {c.devices} up"
            for c in conditions
        )
        skipped = len(evaluation.skipped)
        skipped_text = f"; {counted(skipped, 'cell')} skipped" if skipped else ""
        return f"measured ({evaluation.truth_source}); {tokens}; {cells}{skipped_text}"
    return (
        f"the twin at held-out conditions; {tokens}; batch {_join(held_out.batch)}; "
        f"{_join(held_out.bandwidth_mbps)} Mbit/s; {_join(held_out.devices)} devices up"
    )


def _join(values: Sequence[float]) -> str:
    return ", ".join(exact_text(v) for v in values)


def _scores_html(evaluation: Evaluation) -> str:
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{s.decision_accuracy:.3f}</td>"
        f"<td>{s.mode_accuracy:.3f}</td><td>{s.mean_regret_pct:.2f}</td>"
        f"<td>{s.max_regret_pct:.2f}</td></tr>"
        for name, s in evaluation.scores.items()
    )
    return (
        f"<h2>Policies against {_truth_heading(evaluation)}</h2>"
        "<table><tr><th>Policy</th><th>Decision accuracy</th><th>Mode accuracy</th>"
        f"<th>Mean regret (%)</th><th>Max regret (%)</th></tr>{rows}</table>"
    )


def _best_name(evaluation: Evaluation) -> str:
    """The ground truth's best candidate as the page names it: the twin's or measured."""
    return "best in the twin" if evaluation.settings.held_out is not None else "best measured"


def _truth_heading(evaluation: Evaluation) -> str:
    if evaluation.settings.held_out is None:
        return f"measured runs ({escape(evaluation.truth_source)})"
    return "the twin at the held-out conditions"


def _by_axis_html(evaluation: Evaluation, policy: str) -> str:
    rows = "".join(
        f"<tr><td>{escape(axis)}</td><td>{exact_text(entry[axis])}</td>"
        f"<td>{'yes' if entry['in_map'] else 'no'}</td><td>{entry['conditions']}</td>"
        f"<td>{entry['decision_accuracy']:.3f}</td><td>{entry['mean_regret_pct']:.2f}</td>"
        f"<td>{entry['max_regret_pct']:.2f}</td><td>{entry['map_gap_mean_pct']:.2f}</td>"
        f"<td>{entry['map_gap_max_pct']:.2f}</td></tr>"
        for axis, entries in evaluation.by_axis(policy).items()
        for entry in entries
    )
    return (
        f"<h2>{escape(policy)} per axis value</h2><p>In map: the value is a grid point of "
        "the map on that axis (else interpolated or extrapolated; a device count is never "
        "extrapolated: with N up the policy deploys on a profiled count &le; N). Map gap: "
        "regret of the best candidate the map profiled, which no policy over this map "
        "avoids.</p><table><tr><th>Axis</th>"
        "<th>Value</th><th>In map</th><th>Conditions</th><th>Decision accuracy</th>"
        "<th>Mean regret (%)</th><th>Max regret (%)</th><th>Map gap, mean (%)</th>"
        f"<th>Map gap, max (%)</th></tr>{rows}</table>"
    )


def _labels(evaluation: Evaluation) -> list[str]:
    """The map's candidates, then the best ones in the twin that the map never profiled
    (e.g. on a device count the map lacks)."""
    labels = [c.label for c in evaluation.perf_map.candidates]
    for condition in evaluation.conditions:
        if condition.oracle not in labels:
            labels.append(condition.oracle)
    return labels


def _shown_labels(evaluation: Evaluation) -> list[str]:
    """The candidates a heatmap cell shows (the ground truth's best or picked): one colour
    each on the page."""
    shown = {c.oracle for c in evaluation.conditions}
    shown |= {_adaptive_label(c) for c in evaluation.conditions}
    return [label for label in _labels(evaluation) if label in shown]


def _confusion_html(evaluation: Evaluation, policy: str) -> str:
    confusion = evaluation.scores[policy].confusion
    labels = _labels(evaluation)
    head = "".join(f"<th>{escape(label)}</th>" for label in labels)
    rows = "".join(
        f"<tr><td>{escape(best)}</td>"
        + "".join(f"<td>{confusion[best].get(chosen, 0)}</td>" for chosen in labels)
        + "</tr>"
        for best in labels
        if best in confusion
    )
    return (
        f"<h2>Confusion matrix of {escape(policy)}</h2><p>Rows: {_best_name(evaluation)}; "
        f"columns: chosen.</p><table><tr><th>best \\ chosen</th>{head}</tr>{rows}</table>"
    )


def _mode_heatmaps(evaluation: Evaluation, group: Group) -> go.Figure:
    """Best candidate (ground truth) and the adaptive pick over batch x bandwidth, each in
    its strategy's colour on every heatmap of the page; the key names those shown here."""
    colors = _candidate_colors(evaluation)
    devices, tokens, output_tokens = group
    here = [c for c in evaluation.conditions if _group(c) == group]
    batches = sorted({c.batch for c in here})
    bandwidths = sorted({c.bandwidth_mbps for c in here})
    picked = {pick(c) for c in here for pick in (_oracle_label, _adaptive_label)}
    labels = [label for label in colors if label in picked]
    best = _best_name(evaluation).capitalize()
    fig = make_subplots(rows=1, cols=2, subplot_titles=(best, "Adaptive picks"))
    short = {label: evaluation.candidates[label].short_label for label in labels}
    for col, pick in ((1, _oracle_label), (2, _adaptive_label)):
        grid = {(c.batch, c.bandwidth_mbps): pick(c) for c in here}
        text = [[grid.get((b, bw), "") for b in batches] for bw in bandwidths]
        fig.add_trace(
            go.Heatmap(
                x=[str(b) for b in batches],
                y=[exact_text(bw) for bw in bandwidths],
                z=[[labels.index(t) if t else None for t in row] for row in text],
                text=[[short.get(t, "") for t in row] for row in text],
                texttemplate="%{text}",
                customdata=text,
                zmin=-0.5,
                zmax=len(labels) - 0.5,
                colorscale=discrete_colorscale([colors[label] for label in labels]),
                showscale=False,
                hovertemplate="batch %{x}, %{y} Mbit/s: %{customdata}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text="Batch size (samples)", type="category", row=1, col=col)
        fig.update_yaxes(title_text=BANDWIDTH_AXIS, type="category", row=1, col=col)
    key = ", ".join(f"{short[label]} = {label}" for label in labels)
    fig.update_layout(
        title=title_text(
            f"Best mode vs chosen, {devices} devices up, {_tokens_text(tokens, output_tokens)}",
            key,
        )
    )
    return styled(fig)


def _candidate_colors(evaluation: Evaluation) -> dict[str, str]:
    """The colour of each candidate a heatmap cell shows on the page (``_shown_labels``)."""
    keys = sorted(
        (evaluation.candidates[label] for label in _shown_labels(evaluation)), key=lambda k: k.order
    )
    return candidate_colors({key.label: key.strategy for key in keys})  # x2 light, x5 dark


def _oracle_label(condition: ConditionResult) -> str:
    return condition.oracle


def _adaptive_label(condition: ConditionResult) -> str:
    return condition.choices["adaptive"].label


def _policy_colors(evaluation: Evaluation) -> dict[str, str]:
    """One colour per policy on every figure of the page (the best in the twin first)."""
    return {who: color(index) for index, who in enumerate(("oracle", *evaluation.scores))}


def _regret_figure(evaluation: Evaluation) -> go.Figure:
    """Regret of each policy over the held-out conditions: one point per condition (its
    name on hover), the box of their spread."""
    fig = go.Figure()
    where = [
        f"batch {c.batch}, {exact_text(c.bandwidth_mbps)} Mbit/s, {c.devices} devices, "
        + _tokens_text(c.tokens, c.output_tokens)
        for c in evaluation.conditions
    ]
    colors = _policy_colors(evaluation)
    for name in evaluation.scores:
        fig.add_trace(
            go.Box(
                y=[c.choices[name].regret_pct for c in evaluation.conditions],
                text=where,
                name=POLICY_LABELS[name],
                boxpoints="all",
                jitter=0.5,
                pointpos=0,
                marker={"color": colors[name], "size": 4},
                hovertemplate="%{text}: %{y:.1f} %<extra>" + POLICY_LABELS[name] + "</extra>",
            )
        )
    fig.update_layout(
        title=title_text(
            f"Regret at the {len(evaluation.conditions)} held-out conditions",
            f"% of the objective lost against the {_best_name(evaluation)}; a point per condition",
        ),
        showlegend=False,
        yaxis_title="Regret (%)",
        xaxis_title="Policy",
    )
    return styled(fig)


ORACLE_WIDTH_PX = 7.0  # the ground truth's line, drawn first; each policy's is narrower
DODGE_RATIO = 1.02  # each policy's points this much right of the one before (a log axis)


def _widths(who_all: Sequence[str]) -> dict[str, float]:
    """Line widths narrowing in drawing order, the ground truth's widest: where policies
    pick alike (the aim: like the best), each line shows as a stripe inside the one drawn
    before it, not one line hiding another."""
    step = ORACLE_WIDTH_PX / len(who_all)
    return {who: ORACLE_WIDTH_PX - step * k for k, who in enumerate(who_all)}


def _crossover_figure(evaluation: Evaluation) -> go.Figure:
    """Smallest batch where distributed wins (ground truth) or is picked (policies), per
    bandwidth."""
    fig = go.Figure()
    rows = evaluation.crossover_batch()
    groups = _groups(evaluation)
    who_all = ("oracle", *evaluation.scores)
    names = {"oracle": _best_name(evaluation)} | POLICY_LABELS
    colors = _policy_colors(evaluation)
    widths = _widths(who_all)
    middle = (len(who_all) - 1) / 2
    dodge = {who: DODGE_RATIO ** (k - middle) for k, who in enumerate(who_all)}
    for at, (devices, tokens, outputs) in enumerate(groups):
        mine = [
            r
            for r in rows
            if (r["devices"], r["tokens"], r.get("output_tokens")) == (devices, tokens, outputs)
        ]
        condition = f"{devices} devices, {_tokens_text(tokens, outputs)}"
        for who in who_all:
            fig.add_trace(
                go.Scatter(
                    x=[r["bandwidth_mbps"] * dodge[who] for r in mine],
                    y=[r[who] for r in mine],
                    customdata=[r["bandwidth_mbps"] for r in mine],
                    mode="lines+markers",
                    name=f"{names[who]}, {condition}",
                    legendgroup=names[who],
                    showlegend=False,
                    line={"color": colors[who], "dash": dash(at), "width": widths[who]},
                    marker_symbol=symbol(at),
                    hovertemplate=f"{hover_number('customdata', exact=True)} Mbit/s: batch %{{y}}"
                    f"<extra>{names[who]}, "
                    f"{condition}</extra>",
                )
            )
    for who in who_all:
        line = {"color": colors[who], "width": widths[who]}
        legend_key(fig, names[who], group="policy", line=line)
    for at, (devices, tokens, outputs) in enumerate(groups):
        legend_key(
            fig,
            f"{devices} devices, {_tokens_text(tokens, outputs)}",
            group="condition",
            line={"color": "#555", "dash": dash(at)},
            marker={"symbol": symbol(at), "color": "#555"},
        )
    batches = [r[who] for r in rows for who in who_all]
    fig.update_layout(
        title=title_text(
            "Crossover batch: smallest batch where distributed wins",
            "gaps: it never does; at each bandwidth the policies' points side by side",
        ),
        xaxis={
            "title": BANDWIDTH_AXIS,
            **log_ticks((r["bandwidth_mbps"] for r in rows), swept=True),
        },
        yaxis={"title": "Batch size (samples)", **log_ticks(batches, swept=True)},
    )
    return styled(fig)
