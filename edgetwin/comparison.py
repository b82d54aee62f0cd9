"""Measured versus predicted: signed % error per configuration and metric."""

from __future__ import annotations

import csv
import difflib
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any, TypedDict

from edgetwin.csv_rows import other_unit, unit_problem
from edgetwin.device_names import profile_name, profile_refs, read_device_names
from edgetwin.errors import InputError, shown, warnings_note
from edgetwin.number_text import counted, exact_text
from edgetwin.resolved_scenario import RESOLVED_FILE
from edgetwin.result_cells import CellError, check_cells, parse_number, record_place
from edgetwin.results import COLUMNS, DTYPES, STATUS_OK, ResultRow, read_status, typed_frame
from edgetwin.row_keys import (
    CROWD_KEY_FIELDS,
    DECODER_KEY_FIELDS,
    RowKey,
    is_crowd_key,
    key_fields,
    row_key,
)
from edgetwin.run_warnings import read_warnings_file
from edgetwin.schema import read_yaml_mapping
from edgetwin.table_files import TABLE_READ_ERRORS, table_records
from edgetwin.unplayed_settings import PLAYED_ONLY_IN, plays

if TYPE_CHECKING:
    import pandas as pd

METRICS: tuple[str, ...] = (
    "total_ms",
    "ttft_ms",  # decoders' (an encoder's rows leave them empty)
    "tpot_ms",
    "compute_ms",
    "staging_ms",
    "load_ms",
    "comm_ms",
    "energy_j",
)
# compared for equality (``Comparison.bytes_points``): the twin and the real code share the
# partition layout, so an encoder's or a decoder's bytes agree to the byte
BYTES_METRIC = "bytes_sent"
KEY_COLUMNS = ("strategy", "devices", "batch", "bandwidth_mbps")  # what row_key joins on
# a resolved model's keys that no run uses: its preset's name, the authors' parameter count
_NOT_SIZES = ("preset", "published_params")
# a run's network settings that its rows do not say (the swept rate is in every row's key)
_NOT_IN_ROWS = ("bandwidth_mbps",)
# network settings a twin run ignores, its network fitted per profile (no value of theirs is
# played, nor one instead): no difference from a side that set them
_TWIN_IGNORES = ("congestion_control",)
# what a side played of the emulator section that compare tells apart
_COMPARED_EMULATOR = ("faults", "task_delay_ms")
REFERENCE_FILE = "reference.csv"  # a run's copy of the table it is compared with
SHOWN_SPLITS = 3  # differing layer splits a warning names (then how many more)
COMPARISON_CSV = "comparison.csv"


def compared(metric: str, key: RowKey) -> bool:
    """Whether ``metric`` is compared for a configuration: a crowd row's model loads are
    ``load_ms`` (its ``staging_ms`` is always 0), and only a crowd row loads models; a
    crowd row's ``bytes_sent`` is not (the real workers send compressed results, the twin
    sizes them from the spec)."""
    crowd = is_crowd_key(key)
    if metric == BYTES_METRIC:
        return not crowd
    return not ((crowd and metric == "staging_ms") or (not crowd and metric == "load_ms"))


class ComparisonPoint(TypedDict):
    """One metric of one configuration: ``measured`` and ``predicted`` are the medians of
    each side's rows of it (``compare_to_reference``); ``error_pct`` is None when measured
    is 0."""

    key: RowKey
    metric: str
    measured: float
    predicted: float
    error_pct: float | None


@dataclass(frozen=True)
class Comparison:
    """Compared points (one per configuration and metric), median absolute % error per
    metric over them, and the keys of the rows with
    no counterpart: measured reference rows with no ``ok`` result (``unmatched_keys``),
    ``ok`` results with no measured reference row (``unmeasured_keys``), one per row; a
    reference row measured nothing if every metric is empty (a failed run).
    ``bytes_points``: ``bytes_sent`` of each configuration both sides' ``ok`` rows have
    it for, which must agree exactly (``bytes_summary``). ``warnings``: what makes the two
    sides unlike (``edgetwin compare`` prints them)."""

    points: list[ComparisonPoint]
    median_abs_error_pct: dict[str, float]
    unmatched_keys: list[RowKey]
    unmeasured_keys: list[RowKey]
    bytes_points: tuple[ComparisonPoint, ...] = ()
    warnings: tuple[str, ...] = ()

    def __repr__(self) -> str:
        """A line a notebook can show (the points are ``points``), with how many warnings."""
        medians = ", ".join(f"{m} {v:.2f}" for m, v in self.median_abs_error_pct.items())
        return (
            f"Comparison({len(self.points)} points; median |error| %: {medians or 'none'}; "
            f"{len(self.unmatched_keys)} unmatched, {len(self.unmeasured_keys)} unmeasured"
            f"{warnings_note(self.warnings)})"
        )

    def describe(self) -> list[str]:
        """The lines ``edgetwin compare`` prints after its warnings: the median |error| of
        each metric over its points (and how many more measured 0, where it is undefined),
        whether ``bytes_sent`` agree (``bytes_summary``), and how many rows of each side
        had no counterpart, where some had none."""
        lines = []
        for metric in METRICS:
            of_it = [p for p in self.points if p["metric"] == metric]
            undefined = sum(p["error_pct"] is None for p in of_it)
            if metric in self.median_abs_error_pct:
                line = (
                    f"{metric}: median |error| {self.median_abs_error_pct[metric]:.1f} % over "
                    f"{counted(len(of_it) - undefined, 'point')}"
                )
                if undefined:
                    line += f"; {undefined} more measured 0, where the error is undefined"
                lines.append(line)
            elif undefined:
                lines.append(
                    f"{metric}: no error: measured 0 at {counted(undefined, 'point')}, where "
                    "the error is undefined"
                )
        agreement = bytes_summary(self)
        if agreement is not None:
            lines.append(agreement)
        if self.unmatched_keys or self.unmeasured_keys:
            lines.append(
                f"not compared: {len(self.unmatched_keys)} measured rows with no prediction, "
                f"{len(self.unmeasured_keys)} predicted rows with no measured row"
            )
        return lines

    def to_pandas(self) -> pd.DataFrame:
        """``points`` as a DataFrame: the key's parts as the results columns they come
        from, typed as ``Results.to_pandas()`` types them (a crowd's ``scheduler``, a
        decoder's ``prompt_tokens`` and ``output_tokens`` where a key has them), then
        ``metric``, ``measured``, ``predicted`` and ``error_pct`` (NaN where measured is
        0)."""
        records = [{**key_fields(p["key"]), **p} for p in self.points]
        keys = [c for c in (*CROWD_KEY_FIELDS, *DECODER_KEY_FIELDS) if any(c in r for r in records)]
        dtypes = {c: DTYPES[c] for c in dict.fromkeys(keys)}
        numbers = dict.fromkeys(("measured", "predicted", "error_pct"), "float64")
        return typed_frame(records, {**dtypes, "metric": "string", **numbers})


def relative_pct(value: float, reference: float) -> float:
    """How far ``value`` lies above ``reference``, in % of ``reference`` (negative below)."""
    return (value - reference) / reference * 100.0


def error_pct(measured: float, predicted: float) -> float | None:
    """Signed error of predicted relative to measured, in % (None where measured is 0)."""
    return None if measured == 0 else relative_pct(predicted, measured)


def _number(value: object) -> float | None:
    """A metric's cell as a float: a ``ResultRow``'s float (NaN, a failed run's, is none) or a
    table's text (empty is none)."""
    if isinstance(value, int | float):
        return None if math.isnan(value) else float(value)
    return parse_number(None if value is None else str(value))


def configuration_medians(
    records: Iterable[Mapping[str, object]], metrics: Sequence[str] = METRICS
) -> dict[tuple[RowKey, str], float]:
    """Per configuration (``row_key``) and compared metric of ``metrics``, the median of its
    rows' values: its repetitions, and a crowd run's jobs; a row without a value for a
    metric (a failed run) does not count for it. Keys in the order of their first row."""
    values: dict[tuple[RowKey, str], list[float]] = defaultdict(list)
    for record in records:
        key = row_key(record)
        for metric in metrics:
            value = _number(record.get(metric))
            if value is not None and compared(metric, key):
                values[(key, metric)].append(value)
    return {slot: median(found) for slot, found in values.items()}


def compare_to_reference(
    results_rows: Iterable[ResultRow], reference_rows: Iterable[Mapping[str, str]]
) -> Comparison:
    """Join the reference (measured) rows to the ``ok`` results (predicted) by ``row_key``:
    one point per configuration and metric, the median of each side's rows of that
    configuration (``configuration_medians``) against the other's.

    Repeated measurements are compared as per-configuration medians, not row by row and not
    repetition k against repetition k: the two sides' repetitions are not paired (a twin
    and an emulator run share no more than an index, and may repeat a different number of
    times), a row-by-row join counted each configuration once per repetition and put the
    spread of the repetitions into the error (a table against itself was not 0 %), and the
    median, unlike the mean, is not moved by one repetition slowed by other work on the
    machine (as ``truth_table`` in docs/adaptive.md). The same statistic on both sides makes
    a table compared with itself exact. A table of one row per configuration (a published
    one) counts with that row.

    A metric a side has no value for is left out for that configuration. Points are ordered
    by metric, then by the configuration's first reference row.
    """
    results = list(results_rows)
    predicted = configuration_medians(asdict(row) for row in results if row.ok)
    reference = list(reference_rows)
    points = _points(METRICS, configuration_medians(reference), predicted)
    ok = [r for r in reference if read_status(r.get("status")) == STATUS_OK]
    bytes_points = _points(
        (BYTES_METRIC,),
        configuration_medians(ok, (BYTES_METRIC,)),
        configuration_medians((asdict(row) for row in results if row.ok), (BYTES_METRIC,)),
    )
    predicted_keys = {key for key, _ in predicted}
    measured_rows = [
        r for r in reference if any(parse_number(r.get(m)) is not None for m in METRICS)
    ]
    unmatched = [row_key(r) for r in measured_rows if row_key(r) not in predicted_keys]
    measured_keys = {row_key(r) for r in measured_rows}
    ok_keys = [row_key(asdict(row)) for row in results if row.ok]
    unmeasured = [key for key in ok_keys if key not in measured_keys]
    medians = _median_abs_errors(points)
    return Comparison(points, medians, unmatched, unmeasured, tuple(bytes_points))


def _points(
    metrics: Sequence[str],
    measured: Mapping[tuple[RowKey, str], float],
    predicted: Mapping[tuple[RowKey, str], float],
) -> list[ComparisonPoint]:
    """A point per metric of ``metrics`` and configuration both sides have it for, by
    metric, then in ``measured``'s order."""
    return [
        ComparisonPoint(
            key=key,
            metric=metric,
            measured=value,
            predicted=predicted[(key, metric)],
            error_pct=error_pct(value, predicted[(key, metric)]),
        )
        for metric in metrics
        for (key, of), value in measured.items()
        if of == metric and (key, metric) in predicted
    ]


def bytes_summary(comparison: Comparison) -> str | None:
    """One line on ``bytes_points``: equal in every configuration, or in how many they
    differ, the first named with its difference; None without a bytes point."""
    points = comparison.bytes_points
    if not points:
        return None
    differ = [p for p in points if p["predicted"] != p["measured"]]
    if not differ:
        return f"{BYTES_METRIC}: equal in {counted(len(points), 'configuration')}"
    first = differ[0]
    return (
        f"{BYTES_METRIC}: differ in {len(differ)} of {counted(len(points), 'configuration')}, "
        f"e.g. {key_label(first['key'])}: predicted {first['predicted']:.0f}, measured "
        f"{first['measured']:.0f} ({first['predicted'] - first['measured']:+.0f} bytes)"
    )


def _median_abs_errors(points: Iterable[ComparisonPoint]) -> dict[str, float]:
    errors: dict[str, list[float]] = defaultdict(list)
    for point in points:
        if point["error_pct"] is not None:
            errors[point["metric"]].append(abs(point["error_pct"]))
    return {metric: median(errors[metric]) for metric in METRICS if metric in errors}


def key_label(key: RowKey) -> str:
    """A configuration key as text, e.g. ``prism, 2 dev, 10 seg, batch 32, 400 Mbit/s`` or
    ``crowdio_streaming, 3 phones, 5 inputs, 10 Mbit/s, affinity``."""
    strategy, devices, batch, bandwidth_mbps, segments = key[:5]
    if is_crowd_key(key):
        mbps = exact_text(bandwidth_mbps)
        return f"{strategy}, {devices} phones, {batch} inputs, {mbps} Mbit/s, {key[5]}"
    parts = [str(strategy), f"{devices} dev"]
    if segments:
        parts.append(f"{segments} seg")
    parts += [f"batch {batch}", f"{exact_text(bandwidth_mbps)} Mbit/s"]
    if len(key) == 7:
        parts.append(f"prompt {key[5]}, {key[6]} out")
    return ", ".join(parts)


def write_comparison_csv(path: Path, comparison: Comparison) -> None:
    """One row per configuration and metric: measured, predicted, signed error in %; then
    the ``bytes_points``, as rows of metric ``bytes_sent``."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["configuration", "metric", "measured", "predicted", "error_pct"])
        for p in (*comparison.points, *comparison.bytes_points):
            writer.writerow(
                [key_label(p["key"]), p["metric"], p["measured"], p["predicted"], p["error_pct"]]
            )


def check_reference(
    path: Path, named_by: Path, field: str | None, needs: Sequence[str] = ()
) -> list[dict[str, str]]:
    """The records of ``path`` (``read_table``'s), or an InputError (naming ``named_by``,
    ``field`` and ``path``'s line) unless it is a table ``compare_to_reference`` can join:
    the key columns, a metric, numbers in them, a measured latency above 0, at least one
    row; every column of ``needs`` (the metrics a caller reads from each row); no column
    that misspells a results column (its values were left out unsaid)."""
    where = path.name
    of_it = "" if named_by == path else f"{where}: "  # the file is named once

    def is_a_results_table(header: list[str]) -> None:
        in_other_unit = _column_in_other_unit(header)
        if in_other_unit is not None:
            raise InputError(named_by, field, f"{of_it}{in_other_unit}")
        missing = [c for c in (*KEY_COLUMNS, *needs) if c not in header]
        if missing or not set(header) & set(METRICS):
            wanted = ", ".join(missing) if missing else "one of " + ", ".join(METRICS)
            raise InputError(named_by, field, f"{where} is not a results table: no column {wanted}")
        misspelt = _misspelt_column(header)
        if misspelt is not None:
            column, meant = misspelt
            problem = f"{of_it}column {column!r} is no results column (did you mean {meant!r}?)"
            raise InputError(named_by, field, problem)

    try:
        _, records = table_records(path, is_a_results_table)
    except TABLE_READ_ERRORS as exc:
        raise InputError(named_by, field, f"cannot read {where}: {shown(str(exc))}") from None
    if not records:
        raise InputError(named_by, field, f"{of_it}a header and no rows: nothing measured")
    for index, record in enumerate(records):
        place = record_place(path, index)
        at = place if named_by == path else f"{where} {place}"  # the file is named once
        _check_reference_row(record, at, named_by, field)
    return records


def _check_reference_row(
    record: dict[str, str], where: str, named_by: Path, field: str | None
) -> None:
    """Each cell of a results column read as in a results table (a known strategy, a count
    or time in its range; a CR of 'abc' was let through, as the key and metrics alone were
    read); the column named: ``field`` when the caller has none."""
    try:
        check_cells(record, COLUMNS)
        row_key(record)
    except CellError as exc:
        if field is None:
            raise InputError(named_by, exc.column, f"{where}: {exc.problem}") from None
        raise InputError(named_by, field, f"{where}: {exc}") from None
    except (TypeError, ValueError):
        raise InputError(named_by, field, f"{where}: a key is not a number") from None
    total = parse_number(record.get("total_ms"))
    if total is not None and read_status(record.get("status")) == STATUS_OK and total <= 0:
        problem = (
            f"{where}: total_ms {exact_text(total)}: a run that finished took some time (above 0)"
        )
        raise InputError(named_by, "total_ms" if field is None else field, problem)


def _column_in_other_unit(header: Sequence[str]) -> str | None:
    """What is wrong with the first column of ``header`` that is a results column it lacks
    in another unit (``total_us``: its values were left out, or taken for a misspelling);
    None where none is."""
    for name in COLUMNS:
        in_other = None if name in header else other_unit(header, name)
        if in_other is not None:
            column, unit = in_other
            return f"column {column!r} is {unit_problem(name, unit)}"
    return None


def _misspelt_column(header: Sequence[str]) -> tuple[str, str] | None:
    """A column of ``header`` that is no results column but close to a missing one (``totl_ms``
    for ``total_ms``), and that one; None when there is none (other columns, notes say,
    are a published table's own)."""
    missing = [c for c in COLUMNS if c not in header]
    for column in header:
        if column not in COLUMNS:
            close = difflib.get_close_matches(column, missing, n=1, cutoff=0.8)
            if close:
                return column, close[0]
    return None


@dataclass(frozen=True)
class RunSide:
    """What a run folder's numbers come from, read once from its ``scenario.resolved.yaml``
    and ``devices.yaml``: ``mode`` (None without the first: a table given for a folder, a
    folder an older edgetwin wrote); ``devices``, ``profile jetson_orin_nano`` for a twin
    run, ``this machine (mode emu)`` for a real one; ``unread``, the profile files it
    names that neither ``devices.yaml`` names nor can be read (their devices are not
    known); ``model``, the model's sizes as (field, value) pairs, its preset's name and
    published parameter count left out (empty without the file); ``network``, the
    network's settings but the rate as (field, value) pairs (empty without the file);
    ``emulator``, what it played of the emulator's faults and task delay (none where its
    mode plays them not: the twin's, whatever its file says); ``warnings``, what the
    run warned about (its ``warnings.json``; none without it)."""

    folder: Path
    mode: str | None = None
    devices: str | None = None
    unread: tuple[str, ...] = ()
    model: tuple[tuple[str, str], ...] = ()
    network: tuple[tuple[str, str], ...] = ()
    emulator: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()


def run_side(folder: Path) -> RunSide:
    """``RunSide`` of ``folder``, its files read here (``side_of``); an InputError naming a
    file of it that does not read (it was skipped unsaid, and the warning that depends on it
    with it)."""
    resolved = folder / RESOLVED_FILE
    raw = read_yaml_mapping(resolved) if resolved.exists() else None
    return side_of(folder, raw, read_device_names(folder))


def side_of(folder: Path, raw: Mapping[str, Any] | None, recorded: Mapping[str, str]) -> RunSide:
    """``RunSide`` of ``folder`` from its ``scenario.resolved.yaml`` as read (``raw``; None
    without one) and the profile names its ``devices.yaml`` recorded (``recorded``). A
    device is named by the profile name its run recorded, else by its profile file's, else
    by that file's path."""
    warned = read_warnings_file(folder) if folder.is_dir() else ()
    if raw is None:
        return RunSide(folder, warnings=warned)
    mode = str(raw.get("mode", "twin"))
    model = raw.get("model")
    sizes = tuple(
        (str(k), str(v))
        for k, v in (model.items() if isinstance(model, dict) else ())
        if k not in _NOT_SIZES
    )
    network = raw.get("network")
    settings = tuple(
        (str(k), _setting_text(_played(mode, f"network.{k}", v)))
        for k, v in (network.items() if isinstance(network, dict) else ())
        if k not in _NOT_IN_ROWS and not (mode == "twin" and k in _TWIN_IGNORES)
    )
    emulator = raw.get("emulator")
    played = tuple(
        (key, _setting_text(_played(mode, f"emulator.{key}", emulator[key])))
        for key in _COMPARED_EMULATOR
        if isinstance(emulator, dict) and key in emulator
    )
    if mode != "twin":
        real = f"this machine (mode {mode})"
        return RunSide(folder, mode, real, (), sizes, settings, played, warned)
    names, unread = set(), set()
    for name, ref in profile_refs(raw):
        profile = recorded.get(name) or profile_name(ref, folder)
        if profile is None:
            unread.add(str(ref))
        names.add(profile or str(ref))
    devices = "profile " + ", ".join(sorted(names))
    return RunSide(folder, mode, devices, tuple(sorted(unread)), sizes, settings, played, warned)


def _played(mode: str, key: str, value: object) -> object:
    """What a run of ``mode`` played of the setting ``key`` given as ``value``: the value
    where its mode plays it, else what another mode plays (``PLAYED_ONLY_IN``: a twin's
    loss is none, whatever its file says)."""
    return value if plays(mode, key) else PLAYED_ONLY_IN[key][1]


def _setting_text(value: object) -> str:
    """A setting as a warning names it: a schedule as its steps (``5 Mbps at 0 ms``), faults
    as theirs (``kill_worker host 1 at 0.6 s``), an empty list or None as ``none``."""
    if isinstance(value, list):
        items = [_step_or_fault_text(item) for item in value if isinstance(item, dict)]
        return ", ".join(items) or "none"
    if isinstance(value, float):
        return f"{exact_text(value)}"
    return "none" if value is None else str(value)


def _step_or_fault_text(item: Mapping[str, object]) -> str:
    """A schedule's step or an emulator's fault, as ``_setting_text`` names it."""
    if "kind" not in item:
        bandwidth, at_ms = (_setting_text(item.get(k)) for k in ("bandwidth_mbps", "at_ms"))
        return f"{bandwidth} Mbps at {at_ms} ms"
    text = f"{item['kind']} host {item.get('host')} at {_setting_text(item.get('at_s'))} s"
    if item.get("for_s") is not None:
        text += f" for {_setting_text(item['for_s'])} s"
    return text


def devices_warning(predicted: RunSide, measured: RunSide) -> str | None:
    """A warning when two run folders come from different devices (a Jetson profile
    against this machine), so their errors mix model error with the device difference;
    a profile calibrated on a machine (``machine_*``) counts as that machine. Where a
    side's devices are not known (``RunSide.unread``), the warning says so."""
    sides = [predicted.devices, measured.devices]
    if None in sides or sides[0] == sides[1]:
        return None
    for side in (predicted, measured):
        if side.unread:
            return (
                f"cannot tell whether {predicted.folder} and {measured.folder} ran on the "
                f"same devices: {side.folder / RESOLVED_FILE} names profile "
                f"{', '.join(side.unread)}, which cannot be read (a folder copied from "
                "another machine?)"
            )
    real = [s is not None and s.startswith("this machine") for s in sides]
    if all(real):  # local and emu: the same machine, over loopback or shaped links
        return None
    calibrated = [s is not None and s.startswith("profile machine_") for s in sides]
    if (real[0] and calibrated[1]) or (real[1] and calibrated[0]):
        return None
    return (
        f"{predicted.folder} ran on {sides[0]} but {measured.folder} on {sides[1]}: the "
        "errors include the difference between the devices"
    )


def model_warning(predicted: RunSide, measured: RunSide) -> str | None:
    """A warning when two run folders ran other models (the whole model in the twin, a
    local run cut to 2 blocks to keep it small), so their errors are mostly the models'
    difference; the sizes that differ are named. A key one side lacks (a folder an older
    edgetwin wrote, before the key was added) is no difference."""
    ours, theirs = dict(predicted.model), dict(measured.model)
    differ = [k for k in ours.keys() & theirs.keys() if ours[k] != theirs[k]]
    if not differ:
        return None
    sizes = ", ".join(f"{k} {ours[k]} vs {theirs[k]}" for k in sorted(differ))
    return (
        f"{predicted.folder} and {measured.folder} ran other models ({sizes}): the errors "
        f"include the models' difference; run both with the same model (--set "
        f"model.{min(differ)}=...)"
    )


def network_warning(predicted: RunSide, measured: RunSide) -> str | None:
    """A warning when two run folders ran other networks than their rows say (a latency,
    loss, medium, burst or bandwidth schedule on one side only; a loss only where the
    emulator played it, as a twin drops no packet): both rows read the same
    ``bandwidth_mbps``, so they were joined, and the errors are mostly the networks'
    difference. A loopback side shapes nothing (``loopback_warning`` says so); a key one
    side lacks (an older edgetwin's folder) is no difference."""
    if "local" in (predicted.mode, measured.mode):
        return None
    differ = _differing(predicted.network, measured.network)
    if differ is None:
        return None
    settings, first = differ
    return (
        f"{predicted.folder} and {measured.folder} ran other networks ({settings}) at the "
        "bandwidth_mbps their rows give: the errors include the networks' difference; run "
        f"both with the same network.{first}"
    )


def emulator_warning(predicted: RunSide, measured: RunSide) -> str | None:
    """A warning when two run folders played other faults or task delays (an emulator run
    that killed a worker against a twin, which plays none): the errors include their
    effect. A key one side lacks (an older edgetwin's folder) is no difference."""
    differ = _differing(predicted.emulator, measured.emulator)
    if differ is None:
        return None
    settings, first = differ
    played_by = " or ".join(PLAYED_ONLY_IN[f"emulator.{first}"][0])
    return (
        f"{predicted.folder} and {measured.folder} played other faults or task delays "
        f"({settings}): the errors include their effect; only a {played_by} run plays "
        f"emulator.{first}, so compare runs that played the same"
    )


def _differing(
    ours: Sequence[tuple[str, str]], theirs: Sequence[tuple[str, str]]
) -> tuple[str, str] | None:
    """The settings both sides have and that differ, as a warning names them (``latency_ms 2
    vs 0; ...``), and the first of them; None where none differs."""
    mine, other = dict(ours), dict(theirs)
    differ = sorted(k for k in mine.keys() & other.keys() if mine[k] != other[k])
    if not differ:
        return None
    return "; ".join(f"{k} {mine[k]} vs {other[k]}" for k in differ), differ[0]


def passed_on_warnings(predicted: RunSide, measured: RunSide) -> list[str]:
    """Each side's own warnings (its ``warnings.json``: a schedule step that did not play, a
    link short of its rate, a setting its mode does not play), named by side and folder:
    a comparison built on such a run says so."""
    return [
        f"{name} {side.folder} warned: {warning}"
        for name, side in (("predicted", predicted), ("measured", measured))
        for warning in side.warnings
    ]


def crowd_load_warning(comparison: Comparison) -> str | None:
    """A warning where a crowd configuration's ``load_ms`` is 0 on one side and not on the
    other. The column is the loads along the input whose result came last, each counted
    from when its task was ready (docs/crowd.md, "Results rows"): a load that another
    input's task took first is queueing for it. So a side whose last input found every
    stage resident reads 0 however long the loads took (the twin's emu_crowdio jobs: 5
    inputs on 3 phones, the last one second on every phone), and the error says which
    input came last, not how well loads are predicted."""
    points = [p for p in comparison.points if p["metric"] == "load_ms"]
    zero = {
        "predicted": sum(p["predicted"] == 0 and p["measured"] != 0 for p in points),
        "measured": sum(p["measured"] == 0 and p["predicted"] != 0 for p in points),
    }
    if not any(zero.values()):
        return None
    at = "; ".join(f"{side} 0 at {n} of {len(points)} points" for side, n in zero.items() if n)
    return (
        f"load_ms is 0 on one side only ({at}): a crowd row's load_ms is the loads along the "
        "input whose result came last, from when each of its tasks was ready, and a load "
        "another input's task took first counts as queueing, so a side whose last input "
        "found every stage resident reads 0; that error says which input came last, not how "
        "long the loads took (compare total_ms, cold_loads, warm_loads)"
    )


def split_warning(
    predicted: Path,
    predicted_rows: Iterable[Mapping[str, object]],
    measured: Path,
    measured_rows: Iterable[Mapping[str, object]],
) -> str | None:
    """A warning when configurations of both sides ran different layer splits
    (``layer_split``: runs of a scenario run one split, but folders of another
    scenario, of profiles since refitted or of ``sample_profiles`` may not), so their
    errors include the split's difference. It names each pair of splits that differ (the
    first ``SHOWN_SPLITS``, then how many more), how many configurations ran it and the
    first of them."""

    def splits(rows: Iterable[Mapping[str, object]]) -> dict[RowKey, str]:
        return {row_key(r): str(r["layer_split"]) for r in rows if r.get("layer_split")}

    ours, theirs = splits(predicted_rows), splits(measured_rows)
    pairs: dict[tuple[str, str], list[RowKey]] = defaultdict(list)
    for key in ours:
        if key in theirs and ours[key] != theirs[key]:
            pairs[(ours[key], theirs[key])].append(key)
    if not pairs:
        return None
    named = [
        f"{mine} vs {other} in {len(keys)} ({key_label(keys[0])}"
        + (f", and {len(keys) - 1} more)" if len(keys) > 1 else ")")
        for (mine, other), keys in list(pairs.items())[:SHOWN_SPLITS]
    ]
    if len(pairs) > SHOWN_SPLITS:
        named.append(f"and {counted(len(pairs) - SHOWN_SPLITS, 'more split')}")
    differ = sum(len(keys) for keys in pairs.values())
    return (
        f"{counted(differ, 'configuration')} ran other layer splits in {predicted} than "
        f"in {measured}: {'; '.join(named)}; the errors include the split's difference; the "
        "scenario's pipeline layers run one split in both"
    )


def loopback_warning(predicted: RunSide, measured: RunSide) -> str | None:
    """A warning when one run folder ran on loopback (mode local) and the other did not:
    nothing shapes loopback, so the local side's ``bandwidth_mbps`` is nominal and its
    errors at each bandwidth are not that network's."""
    local = [side.folder for side in (predicted, measured) if side.mode == "local"]
    if len(local) != 1:
        return None
    return (
        f"{local[0]} ran on loopback (mode local), which nothing shapes: its bandwidth_mbps "
        "is nominal, so the errors at each bandwidth include the network's difference"
    )


def jobs_per_run(records: Iterable[Mapping[str, object]]) -> int:
    """The most crowd rows one run of one configuration has: its jobs (a real run and a
    twin run without ``crowd.job.interarrival`` have one); 0 without crowd rows."""
    runs = Counter((row_key(record), str(record.get("rep"))) for record in records)
    return max((n for (key, _rep), n in runs.items() if is_crowd_key(key)), default=0)


def jobs_warning(
    predicted: Path, predicted_jobs: int, measured: Path, measured_jobs: int
) -> str | None:
    """A warning when one side's crowd runs are a stream of jobs and the other's are not:
    a point is the median of every job of a configuration's runs, and later jobs meet warm
    caches and a queue."""
    if predicted_jobs == measured_jobs or max(predicted_jobs, measured_jobs) <= 1:
        return None
    return (
        f"{predicted} has up to {predicted_jobs} jobs a run and {measured} {measured_jobs}: "
        "each point is the median of a run's jobs (crowd.job.interarrival), later ones with warm "
        "caches and a queue"
    )
