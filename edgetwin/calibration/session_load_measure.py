"""Warm ONNX session loads of every stage, measured on this machine with the worker's own code.

The loads, the model fitted to them and the reader of the measurements file are in
``session_load``. Regenerate the shipped measurements (a few minutes on 2 cores)::

    python -m edgetwin.calibration.session_load_measure \
        --out data/traces/onnx-session-load-2026-12/session_load.csv
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from edgetwin.atomic import write_text_atomic
from edgetwin.calibration.session_load import (
    COLUMNS,
    LoadSample,
    fit_session_load,
    stage_loads,
)
from edgetwin.profile import MB

if TYPE_CHECKING:
    from edgetwin.emu.crowdio.model import DistilBertConfig


def write_session_loads(samples: Sequence[LoadSample], path: Path) -> None:
    lines = [",".join(COLUMNS)]
    for s in samples:
        record = asdict(s)
        lines.append(",".join(_cell(record[k]) for k in COLUMNS))
    write_text_atomic(path, "\n".join(lines) + "\n")


def measure_session_loads(
    cuts: Sequence[int] = (3, 6),
    repeats: int = 5,
    seed: int = 0,
    threads: int = 1,
    config: DistilBertConfig | None = None,
) -> list[LoadSample]:
    """Warm loads of every stage of a DistilBERT (None: the full-size one) cut ``cuts``
    ways, ``repeats`` each.

    Every stage is exported and put in a worker's model cache, then loaded by the
    worker's own code (cache read + session slot), stage after stage, ``repeats``
    rounds after one unrecorded round (the files in the page cache: a warm load
    from storage); round robin, so that other work on the machine slows every
    stage alike.
    """
    import onnx

    from edgetwin.emu.crowdio.model import FULL, export_stages
    from edgetwin.emu.crowdio.sessions import ModelCache, SessionSlot

    samples = []
    with tempfile.TemporaryDirectory(prefix="session-load-") as folder:
        cache = ModelCache(Path(folder) / "cache")
        stages = []  # (cut, stage, nodes) of every cut, all in the cache
        for cut in cuts:
            for stage in export_stages(config or FULL, cut, seed, Path(folder)):
                cache.put(stage.sha256, stage.blob)
                stages.append((cut, stage, len(onnx.load_from_string(stage.blob).graph.node)))
        slot = SessionSlot(threads)
        for rep in range(-1, repeats):  # rep -1 puts every file in the page cache
            for cut, stage, nodes in stages:  # round robin: other load hits every stage
                start = time.perf_counter()
                blob = cache.get(stage.sha256)
                read = time.perf_counter()
                slot.load(stage.name, stage.sha256, blob)
                end = time.perf_counter()
                slot.unload()
                del blob
                if rep >= 0:
                    samples.append(
                        LoadSample(
                            cut,
                            stage.name,
                            round(len(stage.blob) / MB, 4),
                            nodes,
                            rep,
                            round((read - start) * 1e3, 2),
                            round((end - read) * 1e3, 2),
                            round((end - start) * 1e3, 2),
                        )
                    )
    return samples


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="CSV of the measurements")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cuts", type=int, nargs="+", default=[3, 6])
    args = parser.parse_args(argv)
    samples = measure_session_loads(args.cuts, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_session_loads(samples, args.out)
    print(f"{platform.node()}: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    fits = fit_session_load(samples), fit_session_load(samples, per_node=True)
    for s in stage_loads(samples):
        print(
            f"{s.cut} stages {s.stage}: {s.size_mb:7.2f} MB {s.nodes:4d} nodes "
            f"{s.mean_ms:8.1f} +- {s.std_ms:6.1f} ms (median {s.median_ms:.1f}, "
            f"{s.min_ms:.1f}-{s.max_ms:.1f}) predicted {fits[0].predict_ms(s.size_mb):.1f}"
        )
    for fit in fits:
        print(fit)


def _cell(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    main()
