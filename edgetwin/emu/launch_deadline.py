"""How long one launch of real ranks may take before it is stopped: a start-up allowance
(imports, model build, process-group set-up) plus its FLOPs at the speed of a slow host
with every rank on its cores. Generous on purpose: it catches a hung rank, not a slow one."""

STARTUP_ALLOWANCE_S = 120.0
SLOWEST_HOST_FLOPS_PER_S = 2e9


def launch_deadline_s(flops: float) -> float:
    """Seconds a launch doing ``flops`` (every rank's, every generation or forward) may take."""
    return STARTUP_ALLOWANCE_S + flops / SLOWEST_HOST_FLOPS_PER_S
