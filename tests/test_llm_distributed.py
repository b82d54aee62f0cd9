"""The real decoder over GLOO: one process per rank on loopback against one process.

Small decoders (2-3 layers, width 128, GQA), prompt 16 of 3 sequences, 6 output tokens,
2 ranks; fp32. Bytes are checked against the contract of docs/llm.md, computed here
from the shapes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch

from edgetwin.decoder_spec import DecoderSpec, kept_positions
from edgetwin.emu.llm.generation import RankSetup, SingleRank
from edgetwin.emu.llm.launcher import WORKER, launch_decoder, run_decoder
from edgetwin.emu.llm.model import build_decoder, make_prompt
from edgetwin.emu.llm.records import RankRecord, measured
from edgetwin.emu.llm.runs import DecoderRun
from edgetwin.emu.llm.timing import GenerationClock
from edgetwin.emu.llm.worker import main as worker_main
from edgetwin.errors import LaunchError
from edgetwin.models import registry
from edgetwin.models.decoder_costs import DecoderWorkload
from edgetwin.models.layout import full_rows

LLAMA_KIND = DecoderSpec(
    layers=2, width=128, heads=4, kv_heads=2, ffn_size=256, ffn="swiglu", norm="rmsnorm",
    positions="rope", vocab=500, max_positions=64, bias="qkv",
)  # fmt: skip
GPT2_KIND = DecoderSpec(layers=3, width=128, heads=4, kv_heads=4, ffn_size=256, vocab=500,
                        max_positions=64)  # fmt: skip
B, T, OUT, P = 3, 16, 6, 2
FP32, INT64 = 4, 8
CPU = torch.device("cpu")
EXACT = 1e-4
pytestmark = pytest.mark.timeout(240)


def launch(strategy: str, spec: DecoderSpec = LLAMA_KIND, **options: object) -> list[RankRecord]:
    return run_decoder(spec, strategy, P, T, OUT, B, seed=2, threads=1, timeout_s=180, **options)


def assert_equals_single(records: list[RankRecord]) -> None:
    last = records[-1]
    assert last.prefix_agreement_vs_single == 1.0
    assert last.max_abs_diff_vs_single is not None and last.max_abs_diff_vs_single <= EXACT
    assert records[0].tokens == last.tokens  # rank 0, the terminal, holds the tokens too
    for record in records:
        assert len(record.reps[0].token_ms) == OUT  # every rank timed each token
        assert record.reps[0].tpot_ms is not None and record.reps[0].ttft_ms > 0


def assert_kv_cache_as_the_twin_says(
    records: list[RankRecord], strategy: str, spec: DecoderSpec = LLAMA_KIND, **options: Any
) -> None:
    """Each rank allocated the KV cache the twin's plan gives it: its layers, KV heads and
    kept positions (a position-wise rank: its prompt rows and its share of decode steps)."""
    work = DecoderWorkload(spec, len(records), B, T, **options)
    plan = registry.decoder_plan(strategy, work)
    kept = kept_positions(T, OUT)
    assert [r.kv_cache_bytes for r in records] == [plan.kv_bytes(r, kept) for r in range(P)]


@pytest.fixture(scope="module")
def voltage() -> list[RankRecord]:
    return launch("voltage")


def test_pipeline_equals_single_and_sends_what_the_contract_says() -> None:
    records = launch("pipeline")
    assert_equals_single(records)
    hidden = B * LLAMA_KIND.width * FP32  # one position of every sequence
    sent = [record.bytes_sent for record in records]
    # rank 0: [B, T, D] once, then [b, 1, D] per micro-batch per step (b summing to B)
    # last rank: the B first tokens, then b ids per micro-batch per step
    assert sent[0] == {"prefill": T * hidden, "decode": (OUT - 1) * hidden}
    assert sent[1] == {"prefill": B * INT64, "decode": (OUT - 1) * B * INT64}
    assert_kv_cache_as_the_twin_says(records, "pipeline")


@pytest.mark.slow
def test_pipeline_with_an_uneven_split_on_a_gpt2_kind_equals_single() -> None:
    records = launch("pipeline", GPT2_KIND, layer_split=(1, 2))
    assert_equals_single(records)


@pytest.mark.parametrize("spec", [LLAMA_KIND, GPT2_KIND], ids=["llama", "gpt2"])
def test_tensor_parallel_equals_single_with_two_all_reduces_per_layer(spec: DecoderSpec) -> None:
    records = launch("tensor_parallel", spec)
    assert_equals_single(records)
    reduce = B * spec.width * FP32  # [B, t, D] per position
    expected = {
        "prefill": spec.layers * 2 * T * reduce,
        "decode": (OUT - 1) * spec.layers * 2 * reduce,
    }
    assert [record.bytes_sent for record in records] == [expected, expected]
    assert_kv_cache_as_the_twin_says(records, "tensor_parallel", spec)


def test_voltage_equals_single_over_the_distributed_kv(voltage: list[RankRecord]) -> None:
    assert_equals_single(voltage)
    spec = LLAMA_KIND
    gathered = B * full_rows(T, P).padded_rows * spec.width * FP32
    partials = B * spec.heads * (spec.head_dim + 2) * FP32
    decode = (OUT - 1) * spec.layers * partials
    assert voltage[0].bytes_sent == {"prefill": spec.layers * gathered, "decode": decode}
    # the last rank also broadcasts the B first tokens
    assert voltage[1].bytes_sent == {
        "prefill": spec.layers * gathered + B * INT64,
        "decode": decode,
    }
    assert_kv_cache_as_the_twin_says(voltage, "voltage")  # 8 + 3 and 8 + 2 positions


def test_a_launch_is_summarised_as_rank_0_times_and_every_rank_bytes(
    voltage: list[RankRecord],
) -> None:
    (row,) = measured(voltage)
    timing = voltage[0].reps[0]
    assert row.ttft_ms == timing.token_ms[0] and row.total_ms == timing.token_ms[-1]
    assert row.total_ms == pytest.approx(row.ttft_ms + (OUT - 1) * row.tpot_ms)
    assert row.comm_ms > 0 and row.compute_ms > 0
    assert row.bytes_sent == sum(sum(record.bytes_sent.values()) for record in voltage)
    assert row.prefix_agreement_vs_single == voltage[-1].prefix_agreement_vs_single == 1.0


def test_prism_reports_agreement_and_sends_less_than_voltage(voltage: list[RankRecord]) -> None:
    records = launch("prism", segments=2)
    last = records[-1]
    assert last.max_abs_diff_vs_single is not None and last.max_abs_diff_vs_single > EXACT
    # the agreement: each sequence's tokens equal to one device's before the first that
    # differs, as a share of the output (single generating in this process, as the worker)
    run = DecoderRun(LLAMA_KIND, "single", 1, T, OUT, B, seed=2)
    model = build_decoder(LLAMA_KIND, seed=2)
    prompt = make_prompt(LLAMA_KIND, B, T, seed=2)
    with torch.inference_mode():
        alone = SingleRank(RankSetup(run, model, 0, GenerationClock(CPU), None)).generate(prompt)
    assert alone.tokens is not None and last.tokens is not None
    firsts = [
        next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b), OUT)
        for mine, theirs in zip(last.tokens, alone.tokens.tolist(), strict=True)
    ]
    assert last.prefix_agreement_vs_single == pytest.approx(sum(firsts) / (B * OUT))
    means = B * 2 * LLAMA_KIND.width * FP32  # two segment means per rank per layer
    assert records[0].bytes_sent["prefill"] == LLAMA_KIND.layers * means
    assert records[0].bytes_sent["prefill"] < voltage[0].bytes_sent["prefill"]
    assert records[0].bytes_sent["decode"] == voltage[0].bytes_sent["decode"]
    assert_kv_cache_as_the_twin_says(records, "prism", segments=2)


def test_prism_with_segments_of_one_token_is_exact() -> None:
    # a mean of one row is that row: prism's causal context is then voltage's
    assert_equals_single(launch("prism", segments=T))


FOUR_KV_HEADS = LLAMA_KIND.model_copy(
    update={"layers": 3, "kv_heads": 4, "ffn_size": 250, "tied_embeddings": False}
)  # 4 ranks of tensor_parallel get 63, 63, 62 and 62 FFN columns


@pytest.mark.slow
@pytest.mark.parametrize(
    ("strategy", "world", "options"),
    [
        ("pipeline", 3, {}),  # 3 micro-batches in flight, a middle stage
        ("voltage", 3, {}),  # 6, 5 and 5 prompt rows
        ("prism", 3, {"segments": T}),
        ("tensor_parallel", 4, {}),
    ],
)
def test_more_ranks_equal_single(strategy: str, world: int, options: dict) -> None:
    records = run_decoder(
        FOUR_KV_HEADS, strategy, world, T, OUT, B, seed=4, threads=1, timeout_s=180, **options
    )
    assert_equals_single(records)


def test_a_run_that_cannot_be_done_starts_nothing() -> None:
    with pytest.raises(ValueError, match="divisible by 2 ranks"):
        run_decoder(LLAMA_KIND.model_copy(update={"kv_heads": 1}), "tensor_parallel", 2, T)
    assert rank_processes() == {}


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"reps": 0}, r"reps must be >= 1 \(got 0\)"),
        ({"warmup": -1}, r"warmup must be >= 0 \(got -1\)"),
        ({"threads": -2}, r"threads must be >= 1 \(got -2\)"),
        ({"timeout_s": 0.0}, r"timeout_s must be > 0 \(got 0.0\)"),
    ],
    ids=["reps", "warmup", "threads", "timeout_s"],
)
def test_launch_options_that_cannot_be_done_start_nothing(
    options: dict[str, Any], problem: str
) -> None:
    """reps 0 or warmup -1 passed run_decoder's checks and started every rank, each of
    which refused its --reps/--warmup (exit 2): a LaunchError holding a usage text after
    the ranks' start-up, not the ValueError docs/llm.md promises with nothing started;
    threads below 1 and a deadline of 0 s likewise failed only in or after the ranks."""
    with pytest.raises(ValueError, match=problem):
        run_decoder(LLAMA_KIND, "voltage", P, T, OUT, B, **options)
    assert rank_processes() == {}


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--model", '{"layers": 0}'], "bad --model: Input should be greater than 0"),
        (["--model", "{"], "bad --model: Expecting property name"),
        (["--model", '{"kv_heads": 5}'], "bad --model: kv_heads: 12 heads are not divisible"),
        (["--rank", "1"], "--rank must be in [0, 1)"),
        (["--weights", "nothing.pt"], "--weights nothing.pt: file not found"),
        (["--weights", "WRONG"], "state_dict does not fit the model"),
    ],
)
def test_worker_refuses_bad_arguments(
    args: list[str], problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = tmp_path / "wrong.pt"
    torch.save({"embed_tokens.weight": torch.zeros(3, 3)}, wrong)
    args = [str(wrong) if arg == "WRONG" else arg for arg in args]
    base = ["--rank", "0", "--world", "1", "--strategy", "single", "--prompt-tokens", "4"]
    base += ["--model", LLAMA_KIND.model_dump_json()]  # later flags win
    with pytest.raises(SystemExit) as exit_:
        worker_main([*base, *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err  # one line: argparse's usage came first
    assert problem in err and err.count("\n") == 1, err


# ---------------------------------------------------------------- failures


def rank_processes() -> dict[int, psutil.Process]:
    """LLM worker processes below this test process, by rank."""
    found = {}
    for child in psutil.Process().children(recursive=True):
        try:
            command = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if WORKER in command:
            found[int(command[command.index("--rank") + 1])] = child
    return found


def wait_for_ranks(deadline_s: float = 60) -> dict[int, psutil.Process]:
    deadline = time.monotonic() + deadline_s
    ranks = rank_processes()
    while len(ranks) < P and time.monotonic() < deadline:
        time.sleep(0.05)
        ranks = rank_processes()
    assert len(ranks) == P, "the ranks did not start"
    return ranks


def in_process_group(process: psutil.Process) -> bool:
    """Connected to rank 0's store and to its GLOO peer."""
    connections = process.net_connections(kind="tcp")
    return sum(c.status == psutil.CONN_ESTABLISHED for c in connections) >= 2


ENDLESS = DecoderRun(LLAMA_KIND, "voltage", P, T, OUT, B)


def fail_one_rank(
    harm: Callable[[psutil.Process], None], timeout_s: float, generating: bool = True
) -> tuple[str, list]:
    """Launch ranks that would generate for ever, harm rank 1 once both run (once it is
    generating, or at once); return the launcher's error and the rank processes."""
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            launch_decoder(ENDLESS, timeout_s, threads=1, extra_args=["--reps", "1000000"])
        except LaunchError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    ranks = wait_for_ranks()
    if generating:
        deadline = time.monotonic() + 60
        while not in_process_group(ranks[1]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert in_process_group(ranks[1]), "rank 1 did not join the process group"
        time.sleep(0.5)  # well into generating
    harm(ranks[1])
    thread.join(timeout_s + 30)
    assert not thread.is_alive(), "the launcher did not return"
    return str(outcome["error"]), list(ranks.values())


def test_a_killed_rank_fails_the_launch_and_stops_the_others() -> None:
    message, ranks = fail_one_rank(lambda process: process.kill(), timeout_s=120)
    assert "rank 1 was killed by SIGKILL" in message and "all ranks stopped" in message
    assert not any(process.is_running() for process in ranks)
    assert rank_processes() == {}


def test_a_hung_rank_times_out_and_every_rank_is_killed() -> None:
    # stopped at once (a load-independent hang: it never joins, rank 0 waits for it)
    message, ranks = fail_one_rank(lambda process: process.suspend(), 8, generating=False)
    assert "still running after 8 s" in message and "all ranks killed" in message
    assert not any(process.is_running() for process in ranks)
    assert rank_processes() == {}


def test_ranks_exit_when_their_launcher_is_killed_outright(tmp_path: Path) -> None:
    """The killed launcher cannot remove its folder of rank logs: it is made in tmp_path
    (TMPDIR), not left in the system's temporary folder by every run of the suite."""
    code = (
        "from edgetwin.emu.llm.launcher import launch_decoder\n"
        "from edgetwin.emu.llm.runs import DecoderRun\n"
        "from edgetwin.decoder_spec import DecoderSpec\n"
        f"run = DecoderRun(DecoderSpec.model_validate_json({LLAMA_KIND.model_dump_json()!r}),"
        f" 'voltage', {P}, {T}, {OUT}, {B})\n"
        "launch_decoder(run, 300, threads=1, extra_args=['--reps', '1000000'])\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(tmp_path)}
    launcher = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        ranks = wait_for_ranks()
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(30)
        _, alive = psutil.wait_procs(list(ranks.values()), timeout=30)
        assert alive == [], "a rank outlived its launcher"
        assert list(tmp_path.glob("edgetwin-local-*-llm-*")), "its folder is not in TMPDIR"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
