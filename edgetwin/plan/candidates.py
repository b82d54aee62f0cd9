"""The candidate a plan answer names a sweep's row by (``CandidateKey``, labelled by the
strategy registry)."""

from __future__ import annotations

from edgetwin.decoder_spec import DecoderSpec
from edgetwin.models.layout import resolved_segments
from edgetwin.models.registry import CandidateKey
from edgetwin.results import ResultRow
from edgetwin.scenario import Scenario


def candidate_of(row: ResultRow, scenario: Scenario) -> CandidateKey:
    """The candidate a row ran as. A decoder's split by segments is the L or CR the scenario
    asks for (the first that gives the row's L at its prompt), one candidate over every
    prompt: the CR its rows say changes with the prompt (L 4 over 2 devices: T / 8). An
    encoder's plan runs the model's one sequence length, so its rows' CR names it, as
    ``results.csv`` says it (CR 9.9 on 2 boards at 197 tokens: ``prism cr 9.85 x2``)."""
    if row.segments is None:
        return CandidateKey(row.strategy, row.devices)
    if isinstance(scenario.model, DecoderSpec):
        assert row.prompt_tokens is not None
        for strategy in (s for s in scenario.strategies if s.name == row.strategy):
            asked = [(cr, None) for cr in strategy.cr] + [(None, n) for n in strategy.segments]
            for cr, segments in asked:
                if resolved_segments(row.prompt_tokens, row.devices, segments, cr) == row.segments:
                    return CandidateKey(row.strategy, row.devices, cr, segments)
    return CandidateKey(row.strategy, row.devices, row.cr, row.segments)
