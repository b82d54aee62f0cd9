"""The network component's prediction: the communication phase of a staged exchange, the
traced loop replayed on the twin's own ``Channel`` (the measured copies as gaps between
messages), so a token bucket and the stack rate act as they do in a run.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import simpy

from edgetwin.calibration.group_fit import GroupKey, Predictor
from edgetwin.profile import NetworkParams
from edgetwin.sim.network import Channel

# messages a replay runs before it looks for its steady state: a short loop costs little to
# replay whole, and a whole replay is exact to the clock's last bit, where a block repeated
# differs by its rounding, enough to move a flat direction of the network fit (docs/
# calibration.md, "A trace fit on another BLAS kernel"); two forwards of 12 blocks, every
# shipped trace's, replay whole
WHOLE_REPLAY_MESSAGES = 24


def network_predictor(gaps_ms: Mapping[GroupKey, float], burst_kb: float | None) -> Predictor:
    """Mean comm time per block of the traced loop (its group's blocks), replayed on the
    twin's Channel.

    Each block: the measured copies (a gap in which tokens refill), then a
    message of the piece's size. One warm-up forward runs first, as in the trace.
    Past ``WHOLE_REPLAY_MESSAGES``, a block that leaves the token bucket as it found it
    (the channel idle between messages) begins a steady state: every later block
    repeats it, so the replay stops there (10,000 blocks were 20,000 messages).
    """

    def predict(params: dict[str, float], key: GroupKey) -> float:
        bandwidth_mbps, _batch, _rows, piece_bytes, blocks = key
        stack = NetworkParams(**params)
        env = simpy.Environment()
        burst = None if burst_kb is None else burst_kb * 1024
        channel = Channel(env, bandwidth_mbps, burst_bytes=burst, stack_mbps=params["stack_mbps"])
        comm_ms: list[float] = []

        def loop() -> simpy.events.ProcessGenerator:
            for message in range(2 * blocks):
                bucket_bits = channel.bucket_bits
                yield env.timeout(gaps_ms[key])
                start = env.now
                yield env.timeout(stack.overhead_ms(piece_bytes))
                yield channel.send(
                    piece_bytes,
                    window_bytes=params["loss_window_kb"] * 1024,
                    loss_goodput=params["loss_goodput"],
                )
                comm_ms.append(env.now - start)
                if message >= WHOLE_REPLAY_MESSAGES and channel.bucket_bits == bucket_bits:
                    return

        env.process(loop())
        env.run()
        repeated = [comm_ms[-1]] * min(2 * blocks - len(comm_ms), blocks)  # the steady state's
        return float(np.mean(comm_ms[blocks:] + repeated))

    return predict
