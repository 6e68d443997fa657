"""What an actor transport reports besides chunks, shared by actor processes and Ray actors."""

from __future__ import annotations

import signal
from typing import NamedTuple


class ActorDied(NamedTuple):
    """The actor's process ended without answering: `how` says how (`was killed by SIGKILL`)."""

    how: str


class ActorError(NamedTuple):
    """The actor's own code raised (its env, its network): `message` is the error in one line."""

    message: str


def describe_exit(exitcode: int | None) -> str:
    """`exited with code 1`, `was killed by SIGKILL`, or `stopped answering` for a process's exit code."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"
