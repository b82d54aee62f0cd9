"""The CROWDio pipelines over volunteer phones: streaming and barrier dependencies."""

from __future__ import annotations

from edgetwin.models.strategy import CROWDIO_FOREMAN, Strategy

CROWDIO_STREAMING = "crowdio_streaming"  # task (i, s+1) waits only for (i, s)
CROWDIO_BARRIER = "crowdio_barrier"  # stage s+1 waits for all of stage s

STREAMING = Strategy(CROWDIO_STREAMING, "CS", entry_point=CROWDIO_FOREMAN, pipeline="streaming")
BARRIER = Strategy(CROWDIO_BARRIER, "CB", entry_point=CROWDIO_FOREMAN, pipeline="barrier")
