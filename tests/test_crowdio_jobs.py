"""Several jobs in flight on one real foreman: real sockets, real workers, ONNX Runtime.

The foreman and two workers run in this process's event loop (the workers' ONNX
Runtime sessions are real); two clients submit at once. Both jobs share the
workers through the one decision core and each gets its own, correct, logits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from edgetwin.emu.crowdio.foreman import Foreman, ForemanConfig
from edgetwin.emu.crowdio.model import TINY, distilbert_job, reference_logits
from edgetwin.emu.crowdio.records import Event, PipelineSummary, TensorSpec
from edgetwin.emu.crowdio.sdk import JobError, normalise_stages, pipeline_job, submit_job
from edgetwin.emu.crowdio.worker import Worker, WorkerConfig

TOKEN = "several-jobs"


def test_two_jobs_share_the_workers_and_both_finish(tmp_path: Path) -> None:
    jobs = [
        distilbert_job(TINY, inputs=3, stages=3, mode="streaming", seed=0),
        distilbert_job(TINY, inputs=3, stages=3, mode="barrier", seed=1),
    ]
    seen: list[tuple[str, str]] = []  # (job, event kind), in the order the clients got them

    def note(job_id: str) -> Callable[[Event], None]:
        return lambda event: seen.append((job_id, event.kind))

    def worker(port: int, k: int) -> Worker:
        cache = tmp_path / f"cache-{k}"
        config = WorkerConfig("127.0.0.1", port, TOKEN, cache, f"w{k}", task_delay_ms=200.0)
        return Worker(config)

    async def scenario() -> list[PipelineSummary]:
        foreman = Foreman(ForemanConfig(token=TOKEN))
        port = await foreman.start()
        workers = [asyncio.create_task(worker(port, k).run()) for k in range(2)]
        try:
            submits = [
                submit_job(
                    "127.0.0.1",
                    port,
                    TOKEN,
                    job,
                    job_id=f"job-{k}",
                    min_workers=2,
                    timeout_s=120,
                    on_event=note(f"job-{k}"),
                )
                for k, job in enumerate(jobs)
            ]
            return list(await asyncio.gather(*submits))
        finally:
            await foreman.close()
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    summaries = asyncio.run(scenario())
    for job, summary in zip(jobs, summaries, strict=True):
        reference = reference_logits(TINY, job.seed, job.inputs)
        np.testing.assert_allclose(np.array(summary.logits), reference, atol=1e-5)
        assert len(summary.tasks) == len(job.inputs) * 3
        assert {w.worker for w in summary.workers} == {"w0", "w1"}
    done = [seen.index((f"job-{k}", "job_done")) for k in range(2)]
    first_dispatch = [seen.index((f"job-{k}", "dispatch")) for k in range(2)]
    assert max(first_dispatch) < min(done)  # both jobs were in flight together


def _identity_stage(shape: tuple[int, ...]) -> bytes:
    """An ONNX stage that passes a float32 tensor through unchanged."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model).SerializeToString()


@pytest.mark.timeout(120)
def test_a_job_that_fails_leaves_the_other_jobs_tasks_dispatched(tmp_path: Path) -> None:
    """Once, the dispatch that followed a job's third failure was thrown away: the other
    job's next task was given to the freed worker without a RUN_TASK ever reaching it, and
    that job waited out its timeout. One worker, so the failing job frees it while the other
    job's tasks are queued."""
    good = distilbert_job(TINY, inputs=4, stages=2, mode="streaming", seed=0)
    (stage,) = normalise_stages([("echo", _identity_stage((1, 4)))])
    declared = dataclasses.replace(stage, output=TensorSpec(dtype="float32", shape=(1, 5)))
    bad = pipeline_job([declared], [np.zeros((1, 4), np.float32)])  # every result refused
    good_started = asyncio.Event()

    def on_good_event(event: Event) -> None:
        if event.kind == "dispatch":
            good_started.set()

    async def scenario() -> tuple[PipelineSummary, BaseException | PipelineSummary]:
        foreman = Foreman(ForemanConfig(token=TOKEN))
        port = await foreman.start()
        config = WorkerConfig("127.0.0.1", port, TOKEN, tmp_path / "cache", "w0")
        worker = asyncio.create_task(Worker(config).run())
        try:
            submit = functools.partial(submit_job, "127.0.0.1", port, TOKEN, min_workers=1)
            first = asyncio.create_task(
                submit(good, job_id="good", timeout_s=30, on_event=on_good_event)
            )
            await good_started.wait()  # its first-stage tasks are queued before the bad one's
            failed = await asyncio.gather(submit(bad, job_id="bad"), return_exceptions=True)
            return await first, failed[0]
        finally:
            await foreman.close()
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)

    summary, failure = asyncio.run(scenario())
    assert isinstance(failure, JobError) and "failed 3 times" in str(failure)
    np.testing.assert_allclose(
        np.array(summary.logits), reference_logits(TINY, good.seed, good.inputs), atol=1e-5
    )
    assert len(summary.tasks) == 4 * 2
