"""Several jobs in flight on one real foreman: real sockets, real workers, ONNX Runtime.

The foreman and two workers run in this process's event loop (the workers' ONNX
Runtime sessions are real); two clients submit at once. Both jobs share the
workers through the one decision core and each gets its own, correct, logits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import numpy as np

from edgetwin.emu.crowdio.foreman import Foreman, ForemanConfig
from edgetwin.emu.crowdio.model import TINY, distilbert_job, reference_logits
from edgetwin.emu.crowdio.records import Event, PipelineSummary
from edgetwin.emu.crowdio.sdk import submit_job
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
