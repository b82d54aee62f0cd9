"""The CROWDio pipeline over volunteer phones, in the twin.

Public API (see docs/crowd.md): ``run_crowd`` for results rows,
``crowd_timelines`` for per-phone records, ``crowd_runs`` for the number of
runs a scenario has (progress bars).
"""

from edgetwin.configuration import crowd_runs
from edgetwin.sim.crowd.runner import CrowdTimeline, crowd_timelines, run_crowd

__all__ = ["CrowdTimeline", "crowd_runs", "crowd_timelines", "run_crowd"]
