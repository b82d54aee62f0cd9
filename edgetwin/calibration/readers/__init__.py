"""Trace readers: profiler traces, benchmark CSVs, power logs, published tables.

Each reader is a pure function of a path returning frozen records; a malformed file is
an ``InputError`` naming the file and the line or field. Formats: ``docs/traces.md``.
"""

from edgetwin.calibration.readers.android import WorkerEvent, read_worker_log
from edgetwin.calibration.readers.chrome_trace import (
    ChromeTrace,
    EventKind,
    Phase,
    TraceEvent,
    read_chrome_trace,
)
from edgetwin.calibration.readers.decoder_latency import DecoderLatency, read_decoder_latency
from edgetwin.calibration.readers.energy import PhaseEnergy, energy_by_phase, energy_j
from edgetwin.calibration.readers.folder import SkippedFile, TraceFolder, read_trace_folder
from edgetwin.calibration.readers.gpu_bench import (
    CounterEnergy,
    StagingCopy,
    VitLatency,
    read_staging_copy,
    read_vit_energy,
    read_vit_latency,
)
from edgetwin.calibration.readers.jtop import read_jtop_power
from edgetwin.calibration.readers.power import PowerSample, read_nvml_power
from edgetwin.calibration.readers.reference import (
    ModelCost,
    PublishedMetric,
    read_model_costs,
    read_published_metrics,
)
from edgetwin.calibration.readers.staged_exchange import (
    StagedExchange,
    read_staged_allgather,
    read_staged_allgather_bw,
)
from edgetwin.calibration.readers.timing_table import TimingRecord, read_timing_table
from edgetwin.calibration.readers.trace_summary import (
    OpTotal,
    PhaseTime,
    TraceSummary,
    summarize_trace,
    union_ms,
)

__all__ = [
    "ChromeTrace",
    "CounterEnergy",
    "DecoderLatency",
    "EventKind",
    "ModelCost",
    "OpTotal",
    "Phase",
    "PhaseEnergy",
    "PhaseTime",
    "PowerSample",
    "PublishedMetric",
    "SkippedFile",
    "StagedExchange",
    "StagingCopy",
    "TimingRecord",
    "TraceEvent",
    "TraceFolder",
    "TraceSummary",
    "VitLatency",
    "WorkerEvent",
    "energy_by_phase",
    "energy_j",
    "read_chrome_trace",
    "read_decoder_latency",
    "read_jtop_power",
    "read_model_costs",
    "read_nvml_power",
    "read_published_metrics",
    "read_staged_allgather",
    "read_staged_allgather_bw",
    "read_staging_copy",
    "read_timing_table",
    "read_trace_folder",
    "read_vit_energy",
    "read_vit_latency",
    "read_worker_log",
    "summarize_trace",
    "union_ms",
]
