"""A run's per-window TensorBoard figures, and which windows are steady state (the benchmarks' reading)."""

from __future__ import annotations

import pathlib


def window_series(run_dir: pathlib.Path) -> dict[str, list[tuple[int, float]]]:
    """Every perf/ and system/ scalar of a run as (step, value) per summary window, from one read of its logs."""
    from tfdqn.telemetry.tensorboard import read_events, scalars

    events = read_events(run_dir)
    return {tag: scalars(events, tag) for tag in events.Tags()["tensors"] if tag.startswith(("perf/", "system/"))}


def steady_state(series: dict[str, list[tuple[int, float]]], learning_starts: int,
                 warmup: int) -> dict[str, list[float]]:
    """Each tag's values in the steady windows: a window runs from the previous summary's step, so it is
    steady if it starts at or after learning_starts and is not among the first `warmup` such windows."""
    steps = sorted({step for pairs in series.values() for step, _ in pairs})
    starts = dict(zip(steps, [0, *steps[:-1]]))
    steady = [step for step in steps if starts[step] >= learning_starts][warmup:]
    return {tag: [value for step, value in pairs if step in steady] for tag, pairs in series.items()
            if any(step in steady for step, _ in pairs)}
