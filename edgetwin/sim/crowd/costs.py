"""Cost model of the CROWDio pipeline: pure functions, no event loop.

Durations are in milliseconds and sizes in bytes unless a name says otherwise.
A partition travels as a base64 blob inside the protocol's JSON messages, so
downloading it moves 4/3 of its file size.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from edgetwin.crowd_spec import CrowdJobSpec, StageSpec
from edgetwin.phone_profile import PhoneProfile
from edgetwin.profile import MB

BASE64_OVERHEAD = 4.0 / 3.0


def inference_ms(phone: PhoneProfile, stage: StageSpec) -> float:
    """One input through one stage: the session-run floor plus FLOPs at the CPU's rate."""
    return phone.inference_floor_ms + stage.gflops * 1e3 / phone.cpu_gflops


def warm_load_ms(phone: PhoneProfile, stage: StageSpec) -> float:
    """Creating a stage's session from its partition on storage (a cold load's download
    aside): a floor plus the partition's bytes to read, check and deserialise."""
    return phone.session.load_s(stage.size_mb) * 1e3


def blob_bytes(stage: StageSpec) -> float:
    """Bytes on the wire to download a stage's partition."""
    return stage.size_mb * MB * BASE64_OVERHEAD


def compressed_activation_bytes(job: CrowdJobSpec) -> int:
    """The job's intermediate activation after zlib (``compression_saving_pct`` less)."""
    return _compressed(job, job.activation_bytes)


def _handed_on_bytes(job: CrowdJobSpec, stage_index: int) -> int:
    """The activation stage ``stage_index`` hands to the next, after zlib: its
    ``output_bytes`` (a model's stages need not hand on the same tensor: DistilBERT's
    last blocks hand the head the first token's state only), else the job's."""
    return _compressed(job, job.stages[stage_index].output_bytes or job.activation_bytes)


def _compressed(job: CrowdJobSpec, raw_bytes: int) -> int:
    return max(1, round(raw_bytes * (1.0 - job.compression_saving_pct / 100.0)))


def task_input_bytes(job: CrowdJobSpec, stage_index: int) -> int:
    """What the foreman sends with a task: the raw input, or the upstream activation."""
    return job.input_bytes if stage_index == 0 else _handed_on_bytes(job, stage_index - 1)


def task_output_bytes(job: CrowdJobSpec, stage_index: int) -> int:
    """What a worker returns: an activation, or the logits of the last stage."""
    last = stage_index == len(job.stages) - 1
    return job.result_bytes if last else _handed_on_bytes(job, stage_index)


def aggregation_ms(job: CrowdJobSpec) -> float:
    """Averaging the logits of the N inputs and taking the majority class, at the foreman."""
    return job.aggregation_ms_per_input * job.inputs


def lognormal_factor(rng: np.random.Generator, cv: float) -> Callable[[], float]:
    """Multiplicative noise with mean 1 and coefficient of variation ``cv`` (1 when cv is 0)."""
    if cv <= 0:
        return lambda: 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    mu, lognormal = -sigma * sigma / 2, rng.lognormal
    return lambda: float(lognormal(mu, sigma))
