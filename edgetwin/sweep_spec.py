"""What a scenario's sweeps vary: batches, bandwidths, device counts and a decoder's
workload (prompt and output tokens)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from edgetwin.device_spec import MAX_DEVICES
from edgetwin.schema import BandwidthMbps, Batch, PositiveInt, Strict, StrictSweep, optional_values


class SweepSpec(StrictSweep):
    """A cartesian product of values; a scenario may list several sweeps. A list left out
    is its default (``bandwidth_mbps``: the network's; the tokens: the workload's); a list
    given holds at least one value."""

    batch: tuple[Batch, ...] = Field((1,), min_length=1)
    bandwidth_mbps: tuple[BandwidthMbps, ...] = optional_values()
    devices: tuple[Annotated[int, Field(ge=2, le=MAX_DEVICES)], ...] = Field((2,), min_length=1)
    prompt_tokens: tuple[PositiveInt, ...] = optional_values()  # decoders
    output_tokens: tuple[PositiveInt, ...] = optional_values()


# the lists a sweep may leave out (optional_values: their default is empty)
SWEEP_OPTIONAL_LISTS = tuple(n for n, f in SweepSpec.model_fields.items() if f.default == ())
# the scenario key each of them stands in for: a sweep that leaves the list out runs the
# key's one value, a sweep that gives it runs its own values and never reads the key
SWEPT_SCENARIO_KEYS = {
    "bandwidth_mbps": "network.bandwidth_mbps",
    "prompt_tokens": "workload.prompt_tokens",
    "output_tokens": "workload.output_tokens",
}


DECODER_SWEEP_KEYS = ("prompt_tokens", "output_tokens")  # a decoder's workload axes


class WorkloadSpec(Strict):
    """What a decoder generates: ``batch`` sequences (the sweeps' batch) of
    ``prompt_tokens`` each, then ``output_tokens`` tokens; sweeps may list other values."""

    prompt_tokens: PositiveInt = 128
    output_tokens: PositiveInt = 16


def longest_generation(sweep: SweepSpec, workload: WorkloadSpec) -> tuple[int, int]:
    """A decoder sweep's longest prompt and longest output (the ``workload``'s where the
    sweep lists none)."""
    prompt = max(sweep.prompt_tokens or (workload.prompt_tokens,))
    return prompt, max(sweep.output_tokens or (workload.output_tokens,))
