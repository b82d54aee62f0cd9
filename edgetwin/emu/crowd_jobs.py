"""A crowd scenario on the real CROWDio pipeline: its phones as workers, its stages as ONNX
partitions of a DistilBERT, one job per run and a results row per job.

The emulator runs these jobs on Mininet hosts (``mininet/crowd.py``); ``--mode local``
runs them on loopback (``crowd_local.py``). Phones keep the twin's names and order; each
worker reports battery and free RAM with its class's power model and session budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgetwin.configuration import CrowdRun, run_label
from edgetwin.crowd_fleet import (
    PhoneClass,
    PhoneSetup,
    expand_fleet,
    largest_budget,
    resolve_classes,
    resolve_fleet,
)
from edgetwin.crowd_spec import CrowdSpec
from edgetwin.emu.crowdio.launcher import (
    WORKER,
    Placement,
    Unreachable,
    Watch,
    WorkerSpec,
    run_pipeline,
)
from edgetwin.emu.crowdio.liveness import LivenessRule
from edgetwin.emu.crowdio.model import FULL, TINY, export_stages, make_inputs, stage_weight_bytes
from edgetwin.emu.crowdio.records import Mode, PipelineSummary
from edgetwin.emu.crowdio.rows import summary_row
from edgetwin.emu.crowdio.sdk import STAGE_RAM_FACTOR, JobError, StageSpec, pipeline_job
from edgetwin.emu.crowdio.sessions import ModelCache
from edgetwin.emu.memory_check import check_fits, interpreter
from edgetwin.errors import InputError, LaunchError, RunFailed
from edgetwin.models.crowd.views import session_fits
from edgetwin.models.strategies.crowdio import CROWDIO_STREAMING
from edgetwin.number_text import exact_text, figure_text
from edgetwin.policies.scheduling import check_schedulers
from edgetwin.results import ResultRow
from edgetwin.run_folders import LOCAL, run_folder
from edgetwin.scenario import RunMode, Scenario

MODELS = {"tiny": TINY, "full": FULL}


class CrowdJobFailed(RunFailed):
    """A job did not finish (a deadline passed, the foreman failed it, a process died)."""


def check_crowd_jobs(scenario: Scenario, scenario_path: Path | None) -> None:
    """``InputError`` naming the field if the real pipeline cannot run this scenario's jobs:
    an unknown scheduler or phone profile, or more stages than the model has to cut."""
    crowd = scenario.crowd
    assert crowd is not None
    check_schedulers(crowd.schedulers, scenario_path)
    resolve_fleet(crowd, scenario_path)  # the twin's phones and profiles
    stages = len(crowd.job.stages)
    model = scenario.emulator.model
    if stages > MODELS[model].layers + 1:
        problem = f"the {model} DistilBERT makes at most {MODELS[model].layers + 1} stages"
        bigger = [
            f"emulator.model: {name} makes up to {config.layers + 1}"
            for name, config in MODELS.items()
            if stages <= config.layers + 1
        ]
        raise InputError(scenario_path, "crowd.job.stages", "; ".join([problem, *bigger]))


def check_real_stages_fit(
    crowd: CrowdSpec,
    stages: Sequence[StageSpec],
    classes: Sequence[PhoneClass],
    model: str,
    scenario_path: Path | None,
) -> None:
    """``InputError`` naming the entry of ``crowd.job.stages`` whose stage, as the real
    pipeline exports it, no phone class holds: the session the job declares for it
    (``StageSpec.ram_mb``, its ONNX blob times STAGE_RAM_FACTOR: what the foreman's core
    dispatches by against a worker's free RAM, which starts at its whole budget, as a
    twin phone's) fits no class's session budget (``PhoneClass.takes``).
    ``check_stages_fit`` reads the sizes the scenario gives the twin; the exported stages
    may be larger, and a job whose stage no worker takes waits until its deadline. A class
    with no phones at a ``fleet_size`` counts, as there."""
    for i, (spec, stage) in enumerate(zip(crowd.job.stages, stages, strict=True)):
        if any(phone_class.takes(stage.ram_mb) for phone_class in classes):
            continue
        problem = (
            f"stage {spec.name} as the {model} DistilBERT exports it needs a"
            f" {figure_text(stage.ram_mb)} MB session ({exact_text(STAGE_RAM_FACTOR)} x its"
            f" {len(stage.blob):,}-byte ONNX blob; the twin reads ram_mb,"
            f" {exact_text(spec.ram_mb)} MB) and fits no phone class:"
        )
        raise InputError(
            scenario_path, f"crowd.job.stages.{i}", f"{problem} {largest_budget(classes)}"
        )


def check_exported_stages_fit(scenario: Scenario, scenario_path: Path | None) -> None:
    """``check_real_stages_fit`` on the stages exported now, in a temporary folder removed
    after: what ``--check`` of a crowd scenario in emu or local mode asks (a run checks the
    stages it exports for its job, in ``CrowdJobs.prepare``)."""
    crowd, model = scenario.crowd, scenario.emulator.model
    assert crowd is not None
    with run_folder(LOCAL, "check") as scratch:
        stages = export_stages(MODELS[model], len(crowd.job.stages), scenario.seed, Path(scratch))
    classes = resolve_classes(crowd, scenario_path)
    check_real_stages_fit(crowd, stages, classes, model, scenario_path)


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
    its session (the job's broadcast, by the core's rule: STAGE_RAM_FACTOR x the weights,
    in MiB as a worker's budget); a lower bound: later stages and sessions come on top."""
    crowd = scenario.crowd
    assert crowd is not None
    stage_bytes = stage_weight_bytes(MODELS[scenario.emulator.model], len(crowd.job.stages))[0]
    budgets_mb = [spec.ram_mb for spec in worker_specs(crowd_phones(scenario, scenario_path))]
    session_mb = STAGE_RAM_FACTOR * stage_bytes / 2**20  # what the core asks a worker for
    broadcast = sum(stage_bytes for mb in budgets_mb if mb is None or session_fits(session_mb, mb))
    return broadcast + interpreter(WORKER).bytes_for(len(budgets_mb))


def check_phones_fit(scenario: Scenario, scenario_path: Path | None) -> None:
    """``InputError`` naming ``crowd.fleet`` if the phones' workers (``phones_bytes``) exceed
    the memory available now."""
    what = "the phones' workers and the first stage's weights on each (the job's broadcast)"
    check_fits(phones_bytes(scenario, scenario_path), scenario_path, "crowd.fleet", what)


def fill_caches(stages: Sequence[StageSpec], workers: Sequence[WorkerSpec], root: Path) -> None:
    """Every stage in every worker's model cache (``root/<worker>``, as ``run_pipeline``
    keeps them): a warm run's storage, as the twin's ``cache: warm`` has it. (A warm-up
    job would leave only the stages each worker happened to load.)"""
    for worker in workers:
        cache = ModelCache(root / worker.name)
        for stage in stages:
            cache.put(stage.sha256, stage.blob)


@dataclass(frozen=True)
class CrowdJobs:
    """What every job of a crowd scenario runs with on the real pipeline: a worker per
    phone, the exported stages, the inputs, the workers' caches (warm; None: empty) and the
    liveness rule; and the running of one run's job."""

    scenario: Scenario
    workers: list[WorkerSpec]
    stages: list[StageSpec]
    inputs: list[np.ndarray]
    cache_root: Path | None
    liveness: LivenessRule
    work_root: Path  # the jobs' folders

    @classmethod
    def prepare(cls, scenario: Scenario, scenario_path: Path | None, work_root: Path) -> CrowdJobs:
        """Export the stages and check that a phone class holds each
        (``check_real_stages_fit``: ``InputError``, before any process starts); make the
        inputs (seeded); fill every worker's cache under ``work_root`` for a warm run."""
        crowd, emulator = scenario.crowd, scenario.emulator
        assert crowd is not None
        workers = worker_specs(crowd_phones(scenario, scenario_path), emulator.task_delay_ms)
        config = MODELS[emulator.model]
        stages = export_stages(config, len(crowd.job.stages), scenario.seed, work_root)
        classes = resolve_classes(crowd, scenario_path)
        check_real_stages_fit(crowd, stages, classes, emulator.model, scenario_path)
        inputs = make_inputs(config, crowd.job.inputs, scenario.seed)
        cache_root = work_root / "cache" if crowd.cache == "warm" else None
        if cache_root is not None:
            fill_caches(stages, workers, cache_root)
        liveness = LivenessRule(
            emulator.heartbeat_s, emulator.silence_timeout_s, crowd.task_deadline_s
        )
        return cls(scenario, workers, stages, inputs, cache_root, liveness, work_root)

    def run(
        self,
        run: CrowdRun,
        placement: Placement,
        timeout_s: float,
        watch: Watch | None = None,
        unreachable: Unreachable | None = None,
        ended: Callable[[], None] | None = None,
    ) -> PipelineSummary:
        """``run``'s job on the foreman and workers ``placement`` starts (``run_pipeline``'s
        ``watch``, ``unreachable`` and ``ended``); ``CrowdJobFailed`` when it does not finish
        (a deadline passed, the foreman failed it, a process did not start)."""
        mode: Mode = "streaming" if run.strategy == CROWDIO_STREAMING else "barrier"
        seed = job_seed(self.scenario.seed, run.rep)
        job = pipeline_job(self.stages, self.inputs, mode=mode, scheduler=run.scheduler, seed=seed)
        try:
            return run_pipeline(
                job,
                self.workers,
                placement,
                cache_root=self.cache_root,
                timeout_s=timeout_s,
                watch=watch,
                unreachable=unreachable,
                liveness=self.liveness,
                work_root=self.work_root,
                ended=ended,
            )
        except (TimeoutError, JobError, LaunchError) as exc:
            problem = "timed out" if isinstance(exc, TimeoutError) else "failed"
            raise CrowdJobFailed(f"CROWDio job {run_label(run)} {problem}: {exc}") from exc

    def row(self, run: CrowdRun, summary: PipelineSummary, mode: RunMode) -> ResultRow:
        """The results row of ``run``'s job."""
        return summary_row(
            summary,
            scenario=self.scenario.name,
            bandwidth_mbps=run.bandwidth_mbps,
            rep=run.rep,
            mode=mode,
        )


def job_seed(scenario_seed: int, rep: int) -> int:
    """The seed of a repetition's job (its scheduler's draws: the ``random`` scheduler's
    choices): one of its own per repetition, as the twin's repetitions have their own
    streams (every repetition drew the scenario's seed, so the same choices)."""
    return int(np.random.SeedSequence([scenario_seed, rep]).generate_state(1)[0])
