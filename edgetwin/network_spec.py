"""A scenario's network: bandwidth (constant, or steps over simulated time), latency,
loss and medium."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from edgetwin.crowd_spec import MAX_HORIZON_S
from edgetwin.number_text import exact_text
from edgetwin.schema import BandwidthMbps, NonNegativeFloat, PositiveFloat, Strict, first_repeated

# the latest a bandwidth step may come: a crowd run's longest horizon, a month of simulated
# time. No run lasts longer, so a later step never plays; and the emulator's clock, which
# waits for each step, died of an OverflowError past threading.TIMEOUT_MAX (292 years)
MAX_STEP_AT_MS = MAX_HORIZON_S * 1e3
# a kernel's name for a TCP congestion control (TCP_CA_NAME_MAX: 16 bytes with its NUL)
CONGESTION_CONTROL_NAME = r"^[a-z0-9_]{1,15}$"


def _within_the_longest_run(at_ms: float) -> float:
    if at_ms > MAX_STEP_AT_MS:
        most = exact_text(MAX_STEP_AT_MS)
        limit = f"a month of simulated time, {most} ms (crowd.horizon_s's maximum)"
        raise ValueError(f"after the longest run, {limit}: the step would never play")
    return at_ms


class BandwidthStep(Strict):
    at_ms: Annotated[float, Field(ge=0), AfterValidator(_within_the_longest_run)]
    bandwidth_mbps: BandwidthMbps


class NetworkSpec(Strict):
    """Bandwidth (constant, or a schedule over simulated time), latency, loss, medium."""

    bandwidth_mbps: BandwidthMbps = 400
    latency_ms: NonNegativeFloat = 0
    loss_pct: float = Field(0, ge=0, lt=100)  # per packet, host to host (emulator only)
    medium: Literal["dedicated", "shared"] = "dedicated"
    burst_kb: PositiveFloat | None = None  # htb token bucket; None: tc's (one packet)
    schedule: tuple[BandwidthStep, ...] = ()
    # TCP's on every emulator host's route (a kernel's name: cubic, bbr, reno); None: the
    # machine's net.ipv4.tcp_congestion_control (the emulator's only: docs/emulator.md)
    congestion_control: str | None = Field(None, pattern=CONGESTION_CONTROL_NAME)

    @field_validator("schedule")
    @classmethod
    def _one_rate_at_a_time(cls, steps: tuple[BandwidthStep, ...]) -> tuple[BandwidthStep, ...]:
        """Two steps at one ``at_ms`` give two rates for the same instant (the one sorted
        last was played, unsaid)."""
        repeated = first_repeated([step.at_ms for step in steps])
        if repeated is not None:
            index, at_ms = repeated
            first = [step.at_ms for step in steps].index(at_ms)
            problem = f"steps {first} and {index} are both at at_ms {exact_text(at_ms)}"
            raise ValueError(f"{problem}: give an instant one rate")
        return steps


def did_not_play(what: str, at_s: float, missed: int, runs: int, runs_noun: str, start: str) -> str:
    """The warning for a schedule step or fault (``what``, ``at_s`` into a run) that
    ``missed`` of ``runs`` runs (``runs_noun``: launches, jobs, runs) ended before; times
    count from ``start``."""
    return (
        f"{what} at {exact_text(at_s)} s did not play in {missed} of {runs} {runs_noun}: each "
        "ended "
        f"before it (times count from {start})"
    )
