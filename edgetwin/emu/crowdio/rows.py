"""A CROWDio run summary as a results-table row.

The columns mean what they mean for the crowd twin (docs/crowd.md), so the two
join. ``total_ms`` is the pipeline latency (per batch: the job's N inputs through
all S stages). The breakdown follows the input whose result came last, task by
task: ``compute_ms`` its inference, ``load_ms`` its stage loads, ``comm_ms`` the
rest of its tasks' time on the foreman's clock (payload encoding and decoding, the
input's and the result's trips); queueing and barrier waits are the rest of
``total_ms``. ``devices`` counts the devices (a worker that enrolled again after it was
lost, ``name.2``, is the device it was), ``energy_j`` is the simulated drain of every
worker, ``battery_mah`` its mean per device, ``peak_session_mb`` the most a worker's
sessions and their work added to its RSS (as the twin's session RAM: not the process);
``bytes_sent`` the compressed results the workers sent, ``bytes_moved`` everything moved
for the job (model blobs, inputs to tasks, results).
"""

from __future__ import annotations

from edgetwin.emu.crowdio.records import PipelineSummary
from edgetwin.models import registry
from edgetwin.results import ResultRow


def summary_row(
    summary: PipelineSummary,
    *,
    scenario: str,
    bandwidth_mbps: float,
    rep: int = 0,
    mode: str = "local",
) -> ResultRow:
    """One row, strategy ``crowdio_streaming`` or ``crowdio_barrier``."""
    last = max(summary.tasks, key=lambda t: t.done_ms).input_index
    chain = [t for t in summary.tasks if t.input_index == last]
    total_ms = summary.pipeline_latency_ms
    compute_ms = sum(t.report.compute_ms for t in chain)
    load_ms = sum(t.counted_load_ms for t in chain)
    task_ms = sum(t.done_ms - t.dispatch_ms for t in chain)
    battery_mah = list(summary.battery_mah_by_device.values())  # a device enrolled again is one
    return ResultRow(
        scenario=scenario,
        mode=mode,
        strategy=registry.pipeline_strategy(summary.mode).name,
        devices=len(battery_mah),
        batch=summary.inputs,
        bandwidth_mbps=bandwidth_mbps,
        cr=None,
        segments=None,
        rep=rep,
        compute_ms=compute_ms,
        staging_ms=0.0,
        comm_ms=max(task_ms - compute_ms - load_ms, 0.0),
        total_ms=total_ms,
        per_sample_ms=total_ms / summary.inputs,
        energy_j=sum(w.energy_j for w in summary.workers),
        bytes_sent=sum(t.report.bytes_out for t in summary.tasks),
        inputs=summary.inputs,
        load_ms=load_ms,
        stages=len(summary.stages),
        scheduler=summary.scheduler,
        peak_session_mb=summary.peak_session_mb,
        battery_mah=sum(battery_mah) / len(battery_mah),
        cold_loads=summary.cold_loads,
        warm_loads=summary.warm_loads,
        evictions=summary.evictions,
        bytes_moved=summary.bytes_moved,
        tasks_redispatched=summary.tasks_redispatched,
    )
