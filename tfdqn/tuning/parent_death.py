"""A child process that dies with its parent, set up by the child itself.

A parent that starts a child with `child_environment()` names itself in the child's environment; the child's
command line calls `die_with_parent()` first thing, which asks Linux for SIGKILL when that parent dies
(PR_SET_PDEATHSIG) and exits at once if the parent died before the request. Setting it in the child, rather than
through `subprocess.Popen(preexec_fn=...)`, keeps the fork safe in a parent with threads running (Optuna's
heartbeat), which Python's documentation warns `preexec_fn` is not.
"""

from __future__ import annotations

import ctypes
import os
import signal

PARENT_VARIABLE = "TFDQN_DIE_WITH_PARENT"  # the pid of the parent the child dies with
PR_SET_PDEATHSIG = 1


def child_environment() -> dict:
    """This process's environment, naming this process as the parent the child dies with."""
    return {**os.environ, PARENT_VARIABLE: str(os.getpid())}


def die_with_parent() -> None:
    """In a child started with `child_environment()`: die when that parent dies, or now if it already has. The
    variable is removed, so this process's own children do not inherit it."""
    parent = os.environ.pop(PARENT_VARIABLE, None)
    if parent is None:
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):  # the parent died between our start and the request: we are an orphan
        os._exit(1)
