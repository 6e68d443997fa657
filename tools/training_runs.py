"""Training runs a benchmark tool starts, each a `python -m tfdqn.train` process as a user would run it,
resumed from its checkpoint where one was stopped: a tool killed midway loses no finished run and at
most one checkpoint period of the run it was in."""

from __future__ import annotations

import pathlib
import shlex
import subprocess
import sys

from tfdqn.run.run_dir import finished_summary


def finished(run_dir: pathlib.Path) -> dict | None:
    """The run's summary where it ended by itself (no stop signal), at its total steps or its target, else None."""
    return finished_summary(run_dir, total_steps=0)


def train_command(run_dir: pathlib.Path, arguments: list[str]) -> list[str]:
    """`--resume run_dir` where it holds a checkpoint, else a new run named for `run_dir` with `arguments`."""
    checkpoints = run_dir / "checkpoints"
    train = [sys.executable, "-m", "tfdqn.train", "--quiet"]
    if checkpoints.is_dir() and any(checkpoints.iterdir()):
        return [*train, "--resume", str(run_dir)]
    return [*train, "--logdir", str(run_dir.parent), "--run-name", run_dir.name, *arguments]


def train_or_resume(run_dir: pathlib.Path, arguments: list[str], what: str) -> int:
    """Run (or resume) the run in `run_dir` to its end unless it has ended already; its exit code."""
    if finished(run_dir) is not None:
        return 0
    command = train_command(run_dir, arguments)
    print(f"{what}: {shlex.join(command)}", flush=True)
    code = subprocess.run(command).returncode
    if code != 0:
        print(f"{what}: the run exited with {code}; run this tool again to resume it", file=sys.stderr)
    return code
