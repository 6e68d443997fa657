"""Which code a run trained with: the tfdqn version and, from a git checkout, the commit and whether the tree
had changes. Taken once per process (at its first call, which a run makes as it starts), because that is the
code the process imported; commits made while it trains do not change it."""

from __future__ import annotations

import functools
import pathlib
import subprocess

import tfdqn


def code_now() -> dict:
    """The version, commit and tree state as they are at this call, not cached: what a process started now from
    this checkout imports (a benchmark takes it as it starts each training process, one per stretch of a run)."""
    source = pathlib.Path(tfdqn.__file__).resolve().parent.parent
    facts = {"tfdqn_version": tfdqn.__version__, "commit": None}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, timeout=10)
        changes = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=source,
                                 capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return facts
    if commit.returncode == 0 and changes.returncode == 0:
        facts.update(commit=commit.stdout.strip(), commit_had_changes=bool(changes.stdout.strip()))
    return facts


_taken = functools.cache(code_now)


def provenance() -> dict:
    """The tfdqn version, and where tfdqn runs from a git checkout its commit and whether it had changes, as
    they were at this process's first call (a copy: the cached facts stay as taken)."""
    return dict(_taken())
