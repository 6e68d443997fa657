"""Shared timing for tools/bench.py and its peers: calls per second of a callable that waits for its result."""

import time


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
