"""Shared timing for tools/bench.py and its peers: calls per second of a callable that waits for its result,
the random batch every peer is timed on, and the peers' command line."""

import json
import time

import numpy as np


def calls_per_second(call, seconds: float, warmup: int = 3) -> float:
    """Run `call` for about `seconds` after `warmup` calls; `call` must block until its work is done.

    The rate is the best of five equal slices: on a shared machine the fastest slice is the one least
    disturbed by other work, and it is taken the same way for tfdqn and its peers."""
    for _ in range(warmup):
        call()
    rates = []
    for _ in range(5):
        calls, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds / 5 or calls == 0:
            call()
            calls += 1
        rates.append(calls / elapsed)
    return max(rates)


def peer_inputs(batch_size: int, num_actions: int) -> tuple:
    """A random Atari batch (frames, actions, rewards, discounts, next frames) and act inputs at batch 1 and 8."""
    rng = np.random.default_rng(0)
    frames = lambda n: rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8)  # noqa: E731
    batch = (frames(batch_size), rng.integers(0, num_actions, batch_size).astype(np.int32),
             rng.normal(size=batch_size).astype(np.float32), np.ones(batch_size, np.float32), frames(batch_size))
    return batch, frames(1), frames(8)


def peer_main(prog: str, doc: str, measure, argv: list[str] | None) -> int:
    """`python -m tools.<peer> [SECONDS]`: one JSON line of `measure(seconds)`."""
    from tfdqn.cli import OneLineErrorParser, number

    parser = OneLineErrorParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("seconds", nargs="?", type=number(float), default=3.0, metavar="SECONDS",
                        help="seconds per timing (default 3)")
    print(json.dumps(measure(parser.parse_args(argv).seconds)))
    return 0


def matmul_peak_flops(seconds: float, bfloat16: bool = False) -> float:
    """FLOP/s of a 2048x2048 matmul in TensorFlow: the machine's practical peak, against which updates are placed."""
    import tensorflow as tf

    x = tf.random.normal([2048, 2048])
    x = tf.cast(x, tf.bfloat16) if bfloat16 else x
    matmul = tf.function(lambda x: tf.matmul(x, x))
    return calls_per_second(lambda: matmul(x).numpy(), seconds) * 2 * 2048**3
