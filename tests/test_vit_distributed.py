"""The real split over GLOO: P local processes on loopback against one-process references.

Tiny ViT (17 tokens: partitions of unequal size for P = 2, 3, 4), fp32.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
import torch

from edgetwin.emu.vit.forward import segment_means
from edgetwin.emu.vit.launcher import LOOPBACK_ADDR, free_port, launch_local
from edgetwin.emu.vit.model import ViT, build_vit, make_images
from edgetwin.emu.vit.records import RankRecord
from edgetwin.emu.vit.worker import main as worker_main
from edgetwin.emu.vit.worker import model_args
from edgetwin.errors import LaunchError
from edgetwin.model_spec import ModelSpec
from edgetwin.models import registry
from edgetwin.models.layout import Layout

TINY = ModelSpec(tokens=17, width=32, blocks=2, heads=4, patch_size=2, classes=5)
BATCH = 3
SEED = 5
TIGHT = {"atol": 1e-6, "rtol": 1e-5}
LAUNCH_TIMEOUT_S = 120
# torch threads of the one-process reference and of the single rank held equal to it: a
# sum's order follows the thread count (1 and 2 threads differ in the last bit here), and
# a test run in-process before may have left this process at another count
REFERENCE_THREADS = 1


def launch(world: int, *args: str, threads: int | None = None) -> list[RankRecord]:
    common = ["--batch", str(BATCH), "--reps", "2", "--seed", str(SEED), *model_args(TINY)]
    return launch_local([*args, *common], world, LAUNCH_TIMEOUT_S, threads)


def logits(record: RankRecord, run: int = 0) -> torch.Tensor:
    rows = record.runs[run].logits
    assert rows is not None
    return torch.tensor(rows)


@pytest.fixture(scope="module")
def model() -> ViT:
    return build_vit(TINY, seed=SEED)


@pytest.fixture(scope="module")
def single_logits(model: ViT) -> torch.Tensor:
    before = torch.get_num_threads()
    torch.set_num_threads(REFERENCE_THREADS)
    try:
        with torch.inference_mode():
            return model(make_images(TINY, BATCH, SEED))
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def voltage_p3() -> list[RankRecord]:
    return launch(3, "--strategy", "voltage")


@pytest.fixture(scope="module")
def prism_p3() -> list[RankRecord]:
    """Two runs: L = 1000 (capped at the partition: segment size 1), then L = 4."""
    return launch(3, "--strategy", "prism", "--segments", "1000", "4")


def test_single_process_run_is_the_model(single_logits: torch.Tensor) -> None:
    (record,) = launch(1, "--strategy", "single", threads=REFERENCE_THREADS)
    assert torch.equal(logits(record), single_logits)
    assert record.runs[0].max_abs_diff_vs_single is None
    assert record.runs[0].bytes_sent_per_forward == 0


def test_voltage_equals_single_on_three_ranks(
    voltage_p3: list[RankRecord], single_logits: torch.Tensor
) -> None:
    torch.testing.assert_close(logits(voltage_p3[0]), single_logits, **TIGHT)
    run = voltage_p3[0].runs[0]
    assert run.max_abs_diff_vs_single is not None and run.max_abs_diff_vs_single < 1e-5
    assert run.top1_agreement_vs_single == 1.0
    assert [r.runs[0].logits for r in voltage_p3[1:]] == [None, None]


def test_voltage_equals_single_on_two_ranks(single_logits: torch.Tensor) -> None:
    records = launch(2, "--strategy", "voltage")
    torch.testing.assert_close(logits(records[0]), single_logits, **TIGHT)


def test_voltage_on_four_ranks_with_replicated_input_equals_single(
    single_logits: torch.Tensor,
) -> None:
    records = launch(4, "--strategy", "voltage", "--input-source", "replicated")
    torch.testing.assert_close(logits(records[0]), single_logits, **TIGHT)
    layout = registry.layout("voltage", TINY.tokens, 4)  # 5, 4, 4, 4 rows
    per_block = BATCH * layout.padded_rows * TINY.width * 4  # no scatter: every rank embeds
    assert [r.runs[0].bytes_sent_per_forward for r in records] == [TINY.blocks * per_block] * 4


def test_bytes_sent_are_scatter_plus_padded_all_gathers(voltage_p3: list[RankRecord]) -> None:
    layout = registry.layout("voltage", TINY.tokens, 3)  # 6, 6, 5 rows
    row_bytes = BATCH * TINY.width * 4
    gathers = TINY.blocks * layout.padded_rows * row_bytes
    scatter = (6 + 5) * row_bytes
    sent = [r.runs[0].bytes_sent_per_forward for r in voltage_p3]
    assert sent == [scatter + gathers, gathers, gathers]


@pytest.mark.parametrize(("world", "source"), [(2, "terminal"), (3, "terminal"), (4, "replicated")])
def test_tensor_parallel_equals_single(
    world: int, source: str, single_logits: torch.Tensor
) -> None:
    """4 heads and 128 MLP columns over 2, 3 (2, 1, 1 heads; 43, 43, 42 columns) and 4
    ranks, each block's two partial sums all-reduced: the whole model's logits. Each rank
    sends its two [B, N, D] partial sums a block; the terminal also every row to each
    other rank, where the input is only there."""
    records = launch(world, "--strategy", "tensor_parallel", "--input-source", source)
    torch.testing.assert_close(logits(records[0]), single_logits, **TIGHT)
    assert [r.runs[0].logits for r in records[1:]] == [None] * (world - 1)
    whole = BATCH * TINY.tokens * TINY.width * 4
    reduces = TINY.blocks * 2 * whole
    terminal = reduces + (world - 1) * whole if source == "terminal" else reduces
    sent = [r.runs[0].bytes_sent_per_forward for r in records]
    assert sent == [terminal] + [reduces] * (world - 1)


def test_prism_with_segment_size_one_is_voltage(
    prism_p3: list[RankRecord], voltage_p3: list[RankRecord]
) -> None:
    assert torch.equal(logits(prism_p3[0], run=0), logits(voltage_p3[0]))
    # L 1000 runs, and is recorded, as the largest partition's 6 rows (it said 1000)
    assert [run.segments for run in prism_p3[0].runs] == [6, 4]
    sent = [records[0].runs[0].bytes_sent_per_forward for records in (prism_p3, voltage_p3)]
    assert sent[0] == sent[1]


def prism_by_repetition(model: ViT, images: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Prism in one process with no log bias: each received mean repeated (segment size)
    times among the keys/values, plain softmax."""
    assert layout.segment_rows is not None
    rows = model.embed_rows(images, 0, layout.tokens)
    parts = [rows[:, slice(*layout.bounds(rank))] for rank in range(layout.world)]
    for block in model.encoder_blocks():
        inputs = [block.attention_input(part) for part in parts]
        repeated = [
            segment_means(own, sizes).repeat_interleave(torch.tensor(sizes), dim=1)
            for own, sizes in zip(inputs, layout.segment_rows, strict=True)
        ]
        contexts = [
            torch.cat([inputs[q] if q == rank else repeated[q] for q in range(layout.world)], 1)
            for rank in range(layout.world)
        ]
        parts = [
            block.finish(parts[rank], inputs[rank], contexts[rank]) for rank in range(layout.world)
        ]
    return model.classify(parts[0][:, 0])


def test_prism_log_bias_equals_repeating_each_mean(
    prism_p3: list[RankRecord], model: ViT, single_logits: torch.Tensor
) -> None:
    layout = registry.layout("prism", TINY.tokens, 3, segments=4)
    assert layout.segment_rows == ((2, 2, 1, 1), (2, 2, 1, 1), (2, 1, 1, 1))
    with torch.inference_mode():
        reference = prism_by_repetition(model, make_images(TINY, BATCH, SEED), layout)
    distributed = logits(prism_p3[0], run=1)
    torch.testing.assert_close(distributed, reference, **TIGHT)
    # not vacuous: averaging changes the output well beyond the tolerance
    assert (distributed - single_logits).abs().max() > 20 * TIGHT["atol"]


# ---------------------------------------------------------------- failures


def rank_processes() -> dict[int, psutil.Process]:
    """Worker processes started by this test process, by rank."""
    found = {}
    for child in psutil.Process().children(recursive=True):
        try:
            command = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if "edgetwin.emu.vit.worker" in command:
            found[int(command[command.index("--rank") + 1])] = child
    return found


def in_process_group(process: psutil.Process) -> bool:
    """Connected to rank 0's store and to its GLOO peer."""
    connections = process.net_connections(kind="tcp")
    return sum(c.status == psutil.CONN_ESTABLISHED for c in connections) >= 2


def fail_one_rank(
    harm: Callable[[psutil.Process], None], timeout_s: float, computing: bool = True
) -> tuple[str, list]:
    """Launch 2 ranks that would run for ever, harm rank 1 once both run (once it is in
    its forward loop, or at once); return the launcher's error and the rank processes."""
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            launch_local(
                ["--strategy", "voltage", "--reps", "1000000", *model_args(TINY)], 2, timeout_s
            )
        except LaunchError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    ranks = rank_processes()
    while len(ranks) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        ranks = rank_processes()
    assert len(ranks) == 2, "the ranks did not start"
    if computing:
        while not in_process_group(ranks[1]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert in_process_group(ranks[1]), "rank 1 did not join the process group"
        time.sleep(0.5)  # well into the forward loop
    harm(ranks[1])
    thread.join(timeout_s + 30)
    assert not thread.is_alive(), "the launcher did not return"
    return str(outcome["error"]), list(ranks.values())


def test_the_rendezvous_port_is_kept_from_other_binders() -> None:
    """The launcher's port was merely free: a process binding port 0 in the seconds before
    rank 0 bound it could take it (on a busy machine: another suite's GLOO ranks), and the
    launch failed with "address already in use". Now no other binder gets it, and the
    rendezvous store binds it."""
    port = free_port()
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other,
        pytest.raises(OSError, match="in use"),
    ):
        other.bind((LOOPBACK_ADDR, port))
    store = torch.distributed.TCPStore(
        LOOPBACK_ADDR, port, 1, is_master=True, timeout=timedelta(seconds=30)
    )
    assert store.port == port


def test_a_killed_rank_fails_the_launch_and_stops_the_others() -> None:
    message, ranks = fail_one_rank(lambda process: process.kill(), timeout_s=120)
    assert "rank 1 was killed by SIGKILL (SIGKILL: most often the out-of-memory killer" in message
    assert "all ranks stopped" in message
    assert not any(process.is_running() for process in ranks)
    assert rank_processes() == {}


def test_a_hung_rank_times_out_and_every_rank_is_killed() -> None:
    """Stopped at once, a load-independent hang: it never joins and rank 0 waits for it.
    Stopped once in its forward loop, as before, the test failed whenever start-up (two
    torch imports on a busy machine) took most of the 8 s: the launcher had killed the
    ranks before the test looked at them (psutil.NoSuchProcess)."""
    message, ranks = fail_one_rank(lambda process: process.suspend(), 8, computing=False)
    assert "still running after 8 s" in message and "all ranks killed" in message
    assert not any(process.is_running() for process in ranks)
    assert rank_processes() == {}


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--world", "2", "--strategy", "single"], "single cannot run on 2 rank(s)"),
        (["--world", "2", "--strategy", "voltage", "--segments", "3"], "voltage takes no segments"),
        (["--world", "2", "--rank", "2", "--strategy", "voltage"], "--rank must be in [0, 2)"),
        (["--world", "1", "--strategy", "single", "--tokens", "18"], "a ViT needs"),
        # a traceback, or (world 2) a rank waiting for its peers, before they were refused
        (["--world", "1", "--strategy", "single", "--batch", "0"], "--batch must be >= 1"),
        (["--world", "2", "--strategy", "voltage", "--batch", "2", "-1"], "--batch must be"),
        (["--world", "2", "--strategy", "prism", "--cr", "0"], "--cr must be a finite number"),
        (["--world", "2", "--strategy", "prism", "--cr", "nan"], "--cr must be a finite"),
        (["--world", "2", "--strategy", "prism", "--cr", "9.9", "0.5"], "--cr must be"),
        (["--world", "1", "--strategy", "single", "--threads", "-1"], "--threads must be >= 1"),
        (["--world", "2", "--strategy", "voltage", "--threads", "0"], "--threads must be >= 1"),
        (
            ["--world", "13", "--strategy", "tensor_parallel"],  # ViT-B/16's 12 heads
            "12 heads cannot be split over 13 devices",
        ),
        (["--world", "2", "--strategy", "tensor_parallel", "--segments", "2"], "takes no segments"),
    ],
)
@pytest.mark.timeout(120)
def test_worker_refuses_inconsistent_arguments(
    args: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = args if "--rank" in args else ["--rank", "0", *args]
    with pytest.raises(SystemExit) as exit_:
        worker_main(command)
    assert exit_.value.code == 2
    assert problem in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "not a state_dict torch can load: [Errno 2]"),
        (b"not a torch file", "not a state_dict torch can load: Weights only load failed"),
        (b"", "not a state_dict torch can load"),
        (torch.zeros(2), "state_dict does not fit the model: Expected state_dict to be dict-like"),
        ({"cls_token": torch.zeros(2)}, "state_dict does not fit the model: Error(s)"),
    ],
)
def test_worker_refuses_weights_it_cannot_load(
    content: object, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--weights that are missing, not a torch file or not this model's: exit 2 naming the
    file, before the rank joins its group (it was a traceback and exit 1)."""
    path = tmp_path / "vit.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    args = ["--rank", "0", "--world", "2", "--strategy", "voltage", *model_args(TINY)]
    with pytest.raises(SystemExit) as exit_:
        worker_main([*args, "--weights", str(path)])
    assert exit_.value.code == 2
    assert f"{path}: {problem}" in capsys.readouterr().err
