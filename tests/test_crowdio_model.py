"""DistilBERT stages: export, chaining, the reference; SDK normalisation and job checks."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from edgetwin.emu.crowdio.dag import GraphError
from edgetwin.emu.crowdio.model import (
    FULL,
    TINY,
    build_model,
    export_stages,
    make_inputs,
    reference_logits,
    split_model,
    stage_layers,
    stage_weight_bytes,
)
from edgetwin.emu.crowdio.sdk import (
    StageError,
    StageSpec,
    normalise_stages,
    pipeline_job,
    submit_message,
)


@pytest.fixture(scope="module")
def three_stages() -> list[StageSpec]:
    return export_stages(TINY, 3, seed=0)


def _chain(stages: list[StageSpec], inputs: list[np.ndarray]) -> np.ndarray:
    sessions = [ort.InferenceSession(s.blob, providers=["CPUExecutionProvider"]) for s in stages]
    rows = []
    for x in inputs:
        for session in sessions:
            (x,) = session.run(None, {session.get_inputs()[0].name: x})
        rows.append(x[0])
    return np.stack(rows)


def test_blocks_split_evenly_over_all_stages_but_the_head() -> None:
    assert stage_layers(FULL.layers, 3) == [range(0, 3), range(3, 6), range(0)]
    assert stage_layers(6, 4) == [range(0, 2), range(2, 4), range(4, 6), range(0)]
    assert stage_layers(5, 3) == [range(0, 3), range(3, 5), range(0)]
    assert stage_layers(6, 1) == [range(6)]
    with pytest.raises(ValueError, match="1 to 7 stages"):
        stage_layers(6, 8)


def test_three_stages_carry_hidden_states_then_the_first_token(
    three_stages: list[StageSpec],
) -> None:
    shapes = [(s.name, s.input.shape, s.output.shape) for s in three_stages]
    seq, dim = TINY.seq_len, TINY.dim
    assert shapes == [
        ("cell_a", (1, seq), (1, seq, dim)),
        ("cell_b", (1, seq, dim), (1, dim)),
        ("cell_c", (1, dim), (1, TINY.classes)),
    ]
    assert three_stages[0].input.dtype == "int64" and three_stages[2].output.dtype == "float32"


@pytest.mark.parametrize("stages", [1, 2, 5])
def test_chained_stages_equal_the_whole_model(stages: int) -> None:
    inputs = make_inputs(TINY, 3, seed=1)
    chained = _chain(export_stages(TINY, stages, seed=0), inputs)
    np.testing.assert_allclose(chained, reference_logits(TINY, 0, inputs), atol=1e-5)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_weights_counted_without_storage_are_the_built_models(stages: int) -> None:
    """The memory check counts each stage's weights on the meta device, without initial
    values: the same count as a built model's stages."""
    built = [
        4 * sum(p.numel() for p in stage.parameters())
        for stage in split_model(build_model(TINY, 0), stages)
    ]
    assert stage_weight_bytes(TINY, stages) == built


@pytest.mark.timeout(120)
def test_counting_weights_imports_no_compiler() -> None:
    """Initialising meta tensors imported torch._dynamo: over a second, and torch's compile
    cache (``torchinductor_<user>``) left in TMPDIR by every crowd emulator run."""
    code = (
        "import sys; from edgetwin.emu.crowdio.model import FULL, stage_weight_bytes; "
        "stage_weight_bytes(FULL, 3); print('torch._dynamo' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_same_seed_gives_the_same_stages(three_stages: list[StageSpec]) -> None:
    again = export_stages(TINY, 3, seed=0)
    inputs = make_inputs(TINY, 4, seed=2)
    np.testing.assert_array_equal(_chain(three_stages, inputs), _chain(again, inputs))
    other = reference_logits(TINY, 1, inputs)
    assert not np.allclose(other, reference_logits(TINY, 0, inputs))


def test_normalise_names_checksums_and_reads_files(
    three_stages: list[StageSpec], tmp_path: Path
) -> None:
    path = tmp_path / "middle.onnx"
    path.write_bytes(three_stages[1].blob)
    stages = normalise_stages([three_stages[0].blob, (" Middle Part ", path), three_stages[2].blob])
    assert [s.name for s in stages] == ["cell_a", "middle_part", "cell_c"]
    assert all(s.sha256 == hashlib.sha256(s.blob).hexdigest() for s in stages)
    assert stages[1].ram_mb == pytest.approx(2 * len(three_stages[1].blob) / 2**20)


def test_normalise_rejects_what_cannot_be_a_pipeline(
    three_stages: list[StageSpec], tmp_path: Path
) -> None:
    a, b, c = (s.blob for s in three_stages)
    with pytest.raises(StageError, match=r"cell_a outputs .* but cell_b takes"):
        normalise_stages([a, c, b])
    with pytest.raises(StageError, match="not an ONNX model"):
        normalise_stages([b"\xffnot onnx"])
    with pytest.raises(StageError, match="repeat"):
        normalise_stages([("x", a), ("X", b)])
    with pytest.raises(StageError, match="cannot read"):
        normalise_stages([tmp_path / "missing.onnx"])
    with pytest.raises(StageError, match="letters, digits"):
        normalise_stages([("cell/../a", a)])


def test_pipeline_job_checks_inputs_scheduler_and_graph(three_stages: list[StageSpec]) -> None:
    inputs = make_inputs(TINY, 2, seed=0)
    with pytest.raises(StageError, match="input 0 is"):
        pipeline_job(three_stages, [np.zeros((1, 3), dtype=np.int64)])
    with pytest.raises(ValueError, match="unknown scheduler 'nope'"):
        pipeline_job(three_stages, inputs, scheduler="nope")
    cyclic = [("cell_a", "cell_b"), ("cell_b", "cell_c"), ("cell_c", "cell_a")]
    with pytest.raises(GraphError, match="cycle"):
        pipeline_job(three_stages, inputs, edges=cyclic)
    job = pipeline_job(three_stages, inputs, edges=[("cell_a", "cell_b"), ("cell_b", "cell_c")])
    assert job.dag.roles()["cell_b"] == "intermediate"


def test_submit_message_carries_base64_blobs_and_their_checksums(
    three_stages: list[StageSpec],
) -> None:
    job = pipeline_job(three_stages, make_inputs(TINY, 2, seed=0), mode="barrier")
    message = submit_message(job, "job-7", min_workers=2)
    assert message.type == "SUBMIT_PIPELINE_JOB" and message.mode == "barrier"
    for stage, blob in zip(message.stages, three_stages, strict=True):
        assert base64.b64decode(stage.blob_b64) == blob.blob
        assert stage.sha256 == hashlib.sha256(blob.blob).hexdigest()
    assert message.dag.edges == (("cell_a", "cell_b"), ("cell_b", "cell_c"))
    assert [p.shape for p in message.inputs] == [(1, TINY.seq_len)] * 2
