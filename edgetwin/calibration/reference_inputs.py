"""The inputs of a table fit: its spec, the measured rows, the parameters fitted from
their columns, and the checks that the rows can fit them.

A measured row is one configuration the twin can run for an encoder and its measured
metrics; ``TABLE_PARAMETERS`` are the timing parameters a table fits, each from the
column of its profile section (``SECTION_COLUMNS``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from edgetwin.calibration.fit_check import TooFewPoints
from edgetwin.calibration.profile_io import FIXABLE_SECTIONS, ProfileFacts, check_fixed
from edgetwin.csv_rows import Row, check_once, header_hint, read_header, read_rows
from edgetwin.decoder_spec import DecoderSpec
from edgetwin.device_spec import MAX_DEVICES
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.result_cells import CellError, check_cells
from edgetwin.results import COLUMNS, LATENCY_PARTS
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.schema import MAX_BATCH, Strict, load_yaml_model
from edgetwin.sweep_points import Configuration

TIMING_METRICS = (*LATENCY_PARTS, "total_ms")

# (path in the profile, lower bound, upper bound, start)
Parameter = tuple[str, float, float, float]
GPU_PARAMETERS: tuple[Parameter, ...] = (
    ("compute.throughput_gflops", 10.0, 1e6, 500.0),
    ("compute.launch_floor_ms", 0.0, 50.0, 1.0),
)
TIMING_PARAMETERS: tuple[Parameter, ...] = (
    *GPU_PARAMETERS,
    ("compute.sync_host_ms", 0.0, 100.0, 5.0),
    ("compute.sync_host_ms_per_mb", 0.0, 1000.0, 5.0),
    ("staging.fixed_ms", 0.0, 50.0, 0.5),
    ("staging.ms_per_mb", 0.0, 1000.0, 5.0),
    ("network.message_overhead_ms", 0.0, 50.0, 0.5),
    ("network.bandwidth_efficiency", 0.1, 2.0, 1.0),
)
# a table of a profiled split also fits the copy's wait for queued GPU work and the extra
# cost of a copy above the spec's large_copy_kb (copies stay linear in bytes)
TABLE_PARAMETERS: tuple[Parameter, ...] = (
    *TIMING_PARAMETERS,
    ("staging.d2h_wait_ms_per_mb", 0.0, 100.0, 1.0),
    ("staging.large_copy_ms", 0.0, 50.0, 1.0),
)


class CalibrationSpec(Strict):
    """A calibration job: facts, the measured table and the scenario giving model and network."""

    kind: Literal["table"] = "table"
    profile: ProfileFacts
    reference: str
    scenario: str
    fixed: dict[str, float] = Field(default_factory=dict)  # section.parameter: value


@dataclass(frozen=True)
class MeasuredRow:
    config: Configuration
    values: dict[str, float]  # metric -> measured value (present ones only)


def load_spec(path: Path) -> CalibrationSpec:
    spec = load_yaml_model(path, CalibrationSpec)
    check_fixed(path, spec.fixed, FIXABLE_SECTIONS)
    return spec


MEASURED_KEY_COLUMNS = ("strategy", "devices", "batch", "bandwidth_mbps")
# the column each timing section of a table fit is fitted from
SECTION_COLUMNS = {"compute": "compute_ms", "staging": "staging_ms", "network": "comm_ms"}
# ... and of every fit of a table, the watts' included (an error names it)
FIT_COLUMNS = {**SECTION_COLUMNS, "power": "energy_j"}


MEASURED_KEY = (*MEASURED_KEY_COLUMNS, "segments", "rep")  # a row of each measurement
MEASURED_METRICS = (*TIMING_METRICS, "energy_j")  # what a row may have measured


def read_measured(path: Path) -> list[MeasuredRow]:
    """Rows of a measured table, each configuration and rep (the column may be left out)
    once; a malformed cell names file, column and line."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    rows = read_rows(path, MEASURED_KEY_COLUMNS, MEASURED_METRICS)
    measured = [_measured_row(row) for row in rows]
    keys = [(m.config, row.optional_integer("rep")) for m, row in zip(measured, rows, strict=True)]
    check_once(rows, MEASURED_KEY, keys)
    return measured


def _measured_row(row: Row) -> MeasuredRow:
    """One configuration the twin can run (a strategy with an encoder cost plan, on one
    device for the one-device strategy and on two or more for a split, at least one
    sample, a positive finite bandwidth, segments exactly where the strategy takes them)
    and its measured metrics, those filled in (each a finite number >= 0). A row of a
    decoder or crowd strategy, or a split on one device, ended in a traceback of the
    twin (ValueError, IndexError for ``single`` on two devices). Every other results column
    it has reads as in a results table (a CR of 'abc' was let through unread)."""
    values = {
        metric: value
        for metric in MEASURED_METRICS
        if (value := row.optional_number(metric, minimum=0.0)) is not None
    }
    config = Configuration(
        strategy=row.choice("strategy", registry.encoder_names()),
        devices=row.integer("devices", minimum=1, maximum=MAX_DEVICES),
        batch=row.integer("batch", minimum=1, maximum=MAX_BATCH),
        bandwidth_mbps=row.positive("bandwidth_mbps"),
        segments=row.optional_integer("segments", minimum=1),
    )
    definition = registry.strategy(config.strategy)
    if definition.one_device and config.devices != 1:
        raise row.error("devices", f"{config.strategy} runs on 1 device, not {config.devices}")
    if not definition.one_device and config.devices < 2:
        problem = f"{config.strategy} runs on 2 or more devices, not {config.devices}"
        raise row.error("devices", problem)
    if definition.params and config.segments is None:
        raise row.error("segments", f"a {config.strategy} row needs its segments (at least 1)")
    if not definition.params and config.segments is not None:
        raise row.error("segments", f"{config.strategy} takes no segments")
    try:
        check_cells(row.cells, COLUMNS)
    except CellError as exc:
        raise row.error(exc.column, exc.problem) from None
    return MeasuredRow(config, values)


def check_fittable(
    reference: Path, measured: Sequence[MeasuredRow], fixed: Mapping[str, float]
) -> None:
    """An InputError naming the measured table's column when a section has parameters to
    fit and no row to fit them from (a column misnamed, left out or empty)."""
    unfitted = unfitted_by_column(measured, fixed)
    if unfitted:
        column, params = next(iter(unfitted.items()))
        header = read_header(reference)
        problem = (
            f"no row has a value above 0, so nothing fits {', '.join(params)} "
            f"(header: {', '.join(header)}){header_hint(header, column)}; measure it, or "
            f"set them in the spec's fixed"
        )
        raise InputError(reference, column, problem)


def unfitted_by_column(
    measured: Sequence[MeasuredRow], fixed: Mapping[str, float]
) -> dict[str, list[str]]:
    """Per component column no row has a value above 0 in, the parameters not ``fixed``
    that are fitted from it: a fit would leave them at its starting point."""
    unfitted: dict[str, list[str]] = {}
    for path, *_ in TABLE_PARAMETERS:
        column = SECTION_COLUMNS[path.split(".")[0]]
        if path not in fixed and not any(row.values.get(column, 0.0) > 0 for row in measured):
            unfitted.setdefault(column, []).append(path)
    return unfitted


def encoder_scenario(spec_path: Path, scenario_path: Path) -> Scenario:
    """The spec's scenario; a table fit runs encoder rows (a decoder's are not read yet)."""
    scenario = load_scenario(scenario_path)
    if isinstance(scenario.model, DecoderSpec):
        problem = f"{scenario_path.name} runs a decoder; a table fit runs encoder scenarios"
        raise InputError(spec_path, "scenario", problem)
    return scenario


def too_few_points_error(path: Path, error: TooFewPoints) -> InputError:
    """The InputError naming the measured table ``path`` and the column its section is
    fitted from."""
    return InputError(path, FIT_COLUMNS[error.section], error.problem)
