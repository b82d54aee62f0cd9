"""A scenario's ``emulator`` section: what only the emulator (mode emu) reads.

The real model of a crowd run, host CPU and memory limits, link checks, and the faults
it plays (a link taken down, a worker killed).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from edgetwin.number_text import exact_text, figure_text
from edgetwin.schema import PositiveFloat, Strict

# an emulator host's least CPU quota: Mininet sets a quota under 1 ms of a 100 ms period
# by stretching the period, past the kernel's 1 s limit, so the host would get 0.01 anyway
MIN_HOST_CPU_CORES = 0.01
MAX_LINK_CHECK_S = 60  # iperf3 seconds a direction of a link check
# a CROWDio job's deadline on the real pipeline (local and emu modes), from its start: the
# job fails then, so a fault, a silence or a task that comes later never plays
JOB_TIMEOUT_S = 600.0
# the least heartbeat: a sleep is rounded up to the kernel's scheduler tick (1-4 ms at
# CONFIG_HZ 1000-250), and a loop beating every few ticks or faster only burns the CPU
# that its host's quota gives the worker (and the foreman's, beating back to every worker)
MIN_HEARTBEAT_S = 0.01
MIN_HEARTBEATS_PER_TIMEOUT = 2  # a silence timeout shorter than two heartbeats loses live workers
# what only a crowd scenario's run reads (its real model, phones, workers); ``faults`` too,
# refused in other scenarios by a rule of its own
CROWD_ONLY_FIELDS = (
    "model",
    "cpu_limits",
    "cpu_cores_fastest",
    "memory_limits",
    "task_delay_ms",
    "heartbeat_s",
    "silence_timeout_s",
)


def _before_the_deadline(value_s: float) -> float:
    if value_s >= JOB_TIMEOUT_S:
        problem = "the real pipeline fails a job then, so nothing at or after it plays"
        raise ValueError(f"not before a job's {exact_text(JOB_TIMEOUT_S)} s deadline: {problem}")
    return value_s


def _a_task_within_a_job(value_ms: float) -> float:
    if value_ms >= JOB_TIMEOUT_S * 1e3:
        raise ValueError(
            f"a task this slow never finishes within a job's {exact_text(JOB_TIMEOUT_S)} s"
        )
    return value_ms


# seconds from a job's start, before its deadline
JobTime = Annotated[float, Field(ge=0), AfterValidator(_before_the_deadline)]


class LinkDownFault(Strict):
    """Take host ``host``'s link down ``at_s`` after the job is submitted, up ``for_s`` later
    (None: down for the rest of the job)."""

    kind: Literal["link_down"]
    host: Annotated[int, Field(ge=0)]
    at_s: JobTime
    for_s: PositiveFloat | None = None

    @model_validator(mode="after")
    def _up_within_the_job(self) -> LinkDownFault:
        if self.for_s is not None and self.at_s + self.for_s >= JOB_TIMEOUT_S:
            problem = (
                f"up at {figure_text(self.at_s + self.for_s)} s, not before a job's "
                f"{exact_text(JOB_TIMEOUT_S)} s "
                "deadline: leave for_s out for a link down for the rest of the job"
            )
            raise ValueError(f"for_s: {problem}")
        return self


class KillWorkerFault(Strict):
    """SIGKILL the worker on host ``host`` (1 or more: host 0 is the foreman's) at ``at_s``."""

    kind: Literal["kill_worker"]
    host: Annotated[int, Field(ge=1)]
    at_s: JobTime


Fault = Annotated[LinkDownFault | KillWorkerFault, Field(discriminator="kind")]


class EmulatorSpec(Strict):
    """What only the emulator reads: the real model of a crowd run, host limits, faults.

    A phone's host gets ``cpu_cores_fastest`` x its class's ``cpu_gflops`` / the fleet's
    fastest ``cpu_gflops`` cores (a CFS quota); ``memory_limits`` caps a worker's memory
    at its phone's session budget (RAM less what Android keeps). ``task_delay_ms``
    stretches every task of every worker (so faults land mid-task on a tiny model).
    Workers beat every ``heartbeat_s`` (at least ``MIN_HEARTBEAT_S``); the foreman
    declares one silent for longer than ``silence_timeout_s`` lost. Times counted from a
    job's start (faults, the silence timeout, a task's delay) come before its deadline,
    ``JOB_TIMEOUT_S``. ``host_cpu_cores`` (ViT scenarios): host r's CPU quota in
    cores, one value per host; empty: unlimited. ``link_check_s``: iperf3's whole seconds
    per direction of each bandwidth's link check, after a one-second warm-up; 0 skips the
    checks (no ``link_check.csv`` rows, no ``link_error_pct``)."""

    model: Literal["tiny", "full"] = "tiny"
    cpu_limits: bool = True
    cpu_cores_fastest: Annotated[float, Field(ge=MIN_HOST_CPU_CORES)] = 1.0
    memory_limits: bool = True
    task_delay_ms: Annotated[float, Field(ge=0), AfterValidator(_a_task_within_a_job)] = 0
    faults: tuple[Fault, ...] = ()
    heartbeat_s: Annotated[float, Field(ge=MIN_HEARTBEAT_S)] = 1.0
    silence_timeout_s: Annotated[float, Field(gt=0), AfterValidator(_before_the_deadline)] = 15.0
    host_cpu_cores: tuple[Annotated[float, Field(ge=MIN_HOST_CPU_CORES)], ...] = ()
    link_check_s: Annotated[int, Field(ge=0, le=MAX_LINK_CHECK_S)] = 2

    @model_validator(mode="after")
    def _check_liveness(self) -> EmulatorSpec:
        least_s = MIN_HEARTBEATS_PER_TIMEOUT * self.heartbeat_s
        if self.silence_timeout_s < least_s:
            problem = (
                f"at least {MIN_HEARTBEATS_PER_TIMEOUT} x heartbeat_s ({exact_text(least_s)} s)"
            )
            raise ValueError(
                f"silence_timeout_s: {exact_text(self.silence_timeout_s)} s is not {problem}"
            )
        return self
