"""The real code of each decoder strategy: name -> the class one rank runs."""

from __future__ import annotations

from edgetwin.emu.llm.generation import RankGenerator, RankSetup, SingleRank
from edgetwin.emu.llm.pipeline import PipelineRank
from edgetwin.emu.llm.position_wise import PositionWiseRank
from edgetwin.emu.llm.tensor_parallel import TensorParallelRank
from edgetwin.models.strategies import pipeline, prism, single, tensor_parallel, voltage

RANKS: dict[str, type[RankGenerator]] = {
    single.NAME: SingleRank,
    pipeline.NAME: PipelineRank,
    tensor_parallel.NAME: TensorParallelRank,
    voltage.NAME: PositionWiseRank,
    prism.NAME: PositionWiseRank,
}


def rank_generator(setup: RankSetup) -> RankGenerator:
    """What ``setup.rank`` runs for its run's strategy."""
    return RANKS[setup.run.strategy](setup)
