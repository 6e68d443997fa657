"""The run clock: seconds since the run's process started, summed over resumes.

Time to a score is read on it (`tfdqn time-to-score`), so it counts what a user waits for: starting
Python and TensorFlow, building the run, acting, learning, evaluating and checkpointing. A resumed run
goes on from the reading its checkpoint saved. The time a stopped run spent after its last checkpoint
is not counted: the resumed run plays those steps again and counts them then; nor is the time the
run was stopped.
"""

from __future__ import annotations

import os
import pathlib
import time

import psutil


def process_start() -> float:
    """When this process started (Unix seconds): a command line's run counts from there.

    Read as the process's age on the kernel's boot clock (uptime less the start tick in /proc), as
    psutil's `create_time` adds that tick to a boot time which some sandboxes (gVisor) report on another
    clock, seconds off; psutil's where there is no /proc."""
    try:
        start_ticks = int(pathlib.Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(pathlib.Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return psutil.Process().create_time()
    return time.time() - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


class RunClock:
    """Reads `saved` (the checkpointed `Counters.run_seconds`) once, after any resume, and counts on
    from `started` (Unix seconds: the process start for a command line, else when the run was built)."""

    def __init__(self, saved, started: float):
        self._saved, self._base, self._started = saved, float(saved.numpy()), started

    def seconds(self) -> float:
        return self._base + time.time() - self._started

    def save(self) -> None:
        """Put the reading where the next checkpoint takes it from."""
        self._saved.assign(self.seconds())
