"""A crowd scenario on the real CROWDio pipeline: its phones as workers, its stages as ONNX
partitions of a DistilBERT, one job per run and a results row per job.

The emulator runs these jobs on Mininet hosts (``mininet/crowd.py``); ``--mode local``
runs them on loopback (``crowd_local.py``). Phones keep the twin's names and order; each
worker reports battery and free RAM with its class's power model and session budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from edgetwin.configuration import CrowdRun
from edgetwin.crowd_fleet import PhoneSetup, expand_fleet, resolve_classes, resolve_fleet
from edgetwin.emu.crowdio.launcher import WORKER, WorkerSpec
from edgetwin.emu.crowdio.model import FULL, TINY, stage_weight_bytes
from edgetwin.emu.crowdio.records import Mode
from edgetwin.emu.crowdio.sdk import PipelineJob, StageSpec, pipeline_job
from edgetwin.emu.crowdio.sessions import ModelCache
from edgetwin.emu.memory_check import interpreter
from edgetwin.errors import InputError, RunFailed
from edgetwin.models.strategies.crowdio import CROWDIO_STREAMING
from edgetwin.policies.scheduling import check_schedulers
from edgetwin.profile import MB
from edgetwin.scenario import Scenario

MODELS = {"tiny": TINY, "full": FULL}
JOB_TIMEOUT_S = 600.0


class CrowdJobFailed(RunFailed):
    """A job did not finish (a deadline passed, the foreman failed it, a process died)."""


def check_crowd_jobs(scenario: Scenario, scenario_path: Path | None) -> None:
    """``InputError`` naming the field if the real pipeline cannot run this scenario's jobs:
    an unknown scheduler or phone profile, or more stages than the model has to cut."""
    crowd = scenario.crowd
    assert crowd is not None
    check_schedulers(crowd.schedulers, scenario_path)
    resolve_fleet(crowd, scenario_path)  # the twin's phones and profiles
    config = MODELS[scenario.emulator.model]
    if len(crowd.job.stages) > config.layers + 1:
        problem = f"the {scenario.emulator.model} DistilBERT makes at most {config.layers + 1}"
        raise InputError(scenario_path, "crowd.job.stages", problem + " stages")


def crowd_phones(scenario: Scenario, scenario_path: Path | None) -> list[PhoneSetup]:
    """The scenario's phones in fleet order, named as in the twin."""
    assert scenario.crowd is not None
    classes = resolve_classes(scenario.crowd, scenario_path)
    return expand_fleet(scenario.crowd, classes, np.random.default_rng(scenario.seed))


def worker_specs(phones: Sequence[PhoneSetup], task_delay_ms: float = 0.0) -> list[WorkerSpec]:
    """One worker per phone: its name, session budget, power model and extra task delay."""
    specs = []
    for phone in phones:
        profile = phone.phone_class.profile
        power, battery = profile.power, profile.battery
        model = (
            f"idle_w={power.idle_w},load_w={power.load_w},compute_w={power.inference_w},"
            f"transmit_w={power.transfer_w},voltage_v={battery.voltage_v},"
            f"capacity_mah={battery.capacity_mah}"
        )
        budget_mb = profile.session_budget_mb(phone.phone_class.spec.ram_mb)
        specs.append(WorkerSpec(phone.name, task_delay_ms, budget_mb, model))
    return specs


def phones_bytes(scenario: Scenario, scenario_path: Path | None) -> float:
    """What a job's phones hold in memory at once: each its worker's interpreter
    (measured), and the first stage's weights on every phone whose session budget holds
    them (the job's broadcast); a lower bound: later stages and sessions come on top."""
    crowd = scenario.crowd
    assert crowd is not None
    stage_bytes = stage_weight_bytes(MODELS[scenario.emulator.model], len(crowd.job.stages))[0]
    budgets_mb = [spec.ram_mb for spec in worker_specs(crowd_phones(scenario, scenario_path))]
    broadcast = sum(stage_bytes for mb in budgets_mb if mb is None or stage_bytes <= mb * MB)
    return broadcast + interpreter(WORKER).bytes_for(len(budgets_mb))


def fill_caches(stages: Sequence[StageSpec], workers: Sequence[WorkerSpec], root: Path) -> None:
    """Every stage in every worker's model cache (``root/<worker>``, as ``run_pipeline``
    keeps them): a warm run's storage, as the twin's ``cache: warm`` has it. (A warm-up
    job would leave only the stages each worker happened to load.)"""
    for worker in workers:
        cache = ModelCache(root / worker.name)
        for stage in stages:
            cache.put(stage.sha256, stage.blob)


def run_job(
    scenario: Scenario, run: CrowdRun, stages: Sequence[StageSpec], inputs: list[np.ndarray]
) -> PipelineJob:
    """The job of ``run``: the scenario's stages and inputs, its dependency mode and
    scheduler."""
    mode: Mode = "streaming" if run.strategy == CROWDIO_STREAMING else "barrier"
    return pipeline_job(stages, inputs, mode=mode, scheduler=run.scheduler, seed=scenario.seed)


def run_label(run: CrowdRun) -> str:
    """How progress and errors name a run: ``crowdio_streaming affinity 10 Mbps rep 0``."""
    return f"{run.strategy} {run.scheduler} {run.bandwidth_mbps:g} Mbps rep {run.rep}"
