"""The offline model's costs measured in emulator runs, from the real foreman's records.

Every job of one instance (each scheduler and repetition, on the same hosts and
links, cold caches) adds samples; a cost is their median, per phone and stage,
on the foreman's clock (a worker handles its frames in order):

- broadcast: when the phone's first-stage load, sent at the job's start, was in
  (``loaded``); a job that ended before it counts its end (a lower bound);
- load: ``loaded`` - max(``load`` sent, the phone's previous reply), cold when the
  worker says it downloaded the blob, warm when it read its cache;
- work: ``complete`` - max(``dispatch``, the ``loaded`` of the task's stage): the
  input's trip, decode, run, encode and the result's trip; at least what the worker
  reports it spent decoding, running and encoding (a foreman whose loop is busy reads a
  ``loaded`` reply late, as late as the ``complete`` behind it, which shrank the window
  below the worker's own time);
- the tail: job end - last ``complete``.

A placement (phone, stage) with no measured work, or (after the first stage) no
measured cold load, is not offered to the optimum; a warm load never measured
costs the cold one (an upper bound: a warm load downloads nothing), for the first
stage the broadcast.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median

from edgetwin.emu.crowdio.records import Event, PipelineSummary
from edgetwin.evaluate.optimum import (
    Assignment,
    Instance,
    PhoneCosts,
    Schedule,
    Task,
    evaluate_assignment,
)
from edgetwin.profile import MB

UNMEASURED_MS = float("inf")  # a placement the runs never showed


@dataclass
class MeasuredSamples:
    """Durations (ms) seen in the runs: by phone, stage and (for loads) cold or warm."""

    broadcast: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    load: defaultdict[tuple[str, int, bool], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    work: defaultdict[tuple[str, int], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    task_bytes: defaultdict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    tail: list[float] = field(default_factory=list)

    def add(self, summary: PipelineSummary, phones: Sequence[str]) -> None:
        """The samples of one finished job on ``phones``."""
        processing_ms = {
            (t.input_index, t.stage_index): t.report.decode_ms
            + t.report.compute_ms
            + t.report.encode_ms
            for t in summary.tasks
        }
        broadcast = _JobReader(self, processing_ms).read(summary.events)
        for name in phones:
            self.broadcast[name].append(broadcast.get(name, summary.pipeline_latency_ms))
        for t in summary.tasks:
            self.task_bytes[t.stage_index].append(t.report.bytes_in + t.report.bytes_out)
        self.tail.append(summary.pipeline_latency_ms - max(t.done_ms for t in summary.tasks))


class _JobReader:
    """Walks one job's events in order, adding load and work samples."""

    def __init__(self, samples: MeasuredSamples, processing_ms: dict[Task, float]) -> None:
        self.samples = samples
        self.processing_ms = processing_ms  # (input, stage) -> the worker's own time
        self.pending: defaultdict[str, list[tuple[float, int]]] = defaultdict(list)
        self.last_reply_ms: dict[str, float] = {}
        self.loaded_ms: dict[tuple[str, int], float] = {}
        self.dispatch_ms: dict[Task, float] = {}
        self.broadcast_ms: dict[str, float] = {}

    def read(self, events: Sequence[Event]) -> dict[str, float]:
        """Every event of the job; returns when each phone's broadcast load was in."""
        for e in events:
            worker, stage = str(e.worker), e.stage_index or 0
            if e.kind in ("loaded", "load_failed"):
                sent_ms, stage = self.pending[worker].pop(0)
                if e.kind == "loaded":
                    self._loaded(worker, stage, sent_ms, e)
            elif e.kind == "load":
                self.pending[worker].append((e.t_ms, stage))
            elif e.kind == "dispatch":
                self.dispatch_ms[(e.input_index or 0, stage)] = e.t_ms
            elif e.kind == "complete":
                task = (e.input_index or 0, stage)
                start_ms = max(self.dispatch_ms[task], self.loaded_ms.get((worker, stage), 0.0))
                work_ms = max(e.t_ms - start_ms, self.processing_ms.get(task, 0.0))
                self.samples.work[(worker, stage)].append(work_ms)
            if e.kind in ("loaded", "load_failed", "unload", "complete"):
                self.last_reply_ms[worker] = e.t_ms
        return self.broadcast_ms

    def _loaded(self, worker: str, stage: int, sent_ms: float, e: Event) -> None:
        if worker not in self.broadcast_ms:  # the job's first load of every phone
            self.broadcast_ms[worker] = e.t_ms
        else:
            start_ms = max(sent_ms, self.last_reply_ms.get(worker, 0.0))
            self.samples.load[(worker, stage, e.detail == "cold")].append(e.t_ms - start_ms)
        self.loaded_ms[(worker, stage)] = e.t_ms


@dataclass(frozen=True)
class MeasuredInstance:
    """The offline model of one instance with measured costs, and how much was measured."""

    instance: Instance
    placements_measured: int  # (phone, stage) pairs the optimum may use
    placements: int


def _median_or(values: Sequence[float], default: float) -> float:
    return median(values) if values else default


def measured_instance(
    samples: MeasuredSamples,
    phones: Sequence[str],
    stage_blob_bytes: Sequence[int],
    barrier: bool,
    inputs: int,
) -> MeasuredInstance:
    """The instance the runs measured: cold caches at the start, unlimited storage."""
    stages = range(len(stage_blob_bytes))
    costs = []
    for name in phones:
        broadcast_ms = median(samples.broadcast[name])
        cold = [broadcast_ms]  # the first stage's cold load is the broadcast (shared link)
        cold += [_median_or(samples.load[(name, s, True)], UNMEASURED_MS) for s in stages[1:]]
        warm = [_median_or(samples.load[(name, s, False)], cold[s]) for s in stages]
        work = [_median_or(samples.work[(name, s)], UNMEASURED_MS) for s in stages]
        costs.append(
            PhoneCosts(
                name=name,
                kind=name,  # measured phones are never interchangeable
                warm_load_ms=tuple(warm),
                download_ms=tuple(
                    c - w if c < UNMEASURED_MS else 0.0 for c, w in zip(cold, warm, strict=True)
                ),
                work_ms=tuple(work),
                fits=tuple(max(c, w) < UNMEASURED_MS for c, w in zip(cold, work, strict=True)),
                broadcast_ms=broadcast_ms,
                broadcast_cold=True,
                cache_mb=float("inf"),
            )
        )
    instance = Instance(
        phones=tuple(costs),
        inputs=inputs,
        stage_mb=tuple(b / MB for b in stage_blob_bytes),
        barrier=barrier,
        aggregation_ms=median(samples.tail),
        cached_at_start=False,
        task_bytes=tuple(round(median(samples.task_bytes[s])) for s in stages),
        blob_bytes=tuple(stage_blob_bytes),
    )
    measured = sum(f for c in costs for f in c.fits)
    return MeasuredInstance(instance, measured, len(costs) * len(stages))


def assignment_of_summary(summary: PipelineSummary, phones: Sequence[str]) -> Assignment:
    """The assignment a real job followed: per phone, its tasks by completion."""
    done = [e for e in summary.events if e.kind == "complete"]
    return tuple(
        tuple((e.input_index or 0, e.stage_index or 0) for e in done if e.worker == name)
        for name in phones
    )


def replay_with_own_costs(
    summary: PipelineSummary, phones: Sequence[str], stage_blob_bytes: Sequence[int], barrier: bool
) -> Schedule:
    """A job's assignment timed in the model with the costs that job alone measured."""
    samples = MeasuredSamples()
    samples.add(summary, phones)
    own = measured_instance(samples, phones, stage_blob_bytes, barrier, summary.inputs)
    return evaluate_assignment(own.instance, assignment_of_summary(summary, phones))
