"""Whole games as they end: one `episodes.csv` row each, means for the next summary, a recent window."""

from __future__ import annotations

import collections
import os
import pathlib
import sys

import numpy as np

from tfdqn.atomic import atomic_write

HEADER = "env_steps,return,length"


class EpisodeLog:
    """Raw returns of whole games, appended a line at a time. On resume the file is rewritten (atomically)
    with the complete rows up to the checkpoint: the rows written after it are dropped, so the file
    repeats the uninterrupted run's rows exactly, and so is a last line a crash tore mid-write."""

    def __init__(self, path: pathlib.Path, resume_from: int | None = None):
        rows = complete_rows(path, resume_from) if resume_from is not None and path.exists() else []
        atomic_write(path, "".join(f"{line}\n" for line in [HEADER, *rows]))
        self._file = path.open("a", buffering=1)
        self._returns, self._lengths = [], []
        self.recent = collections.deque((float(row.split(",")[1]) for row in rows[-20:]), maxlen=20)
        self.count = len(rows)

    def record(self, env_steps: int, games: list) -> None:
        """`games`: (stream, raw return, length) of the whole games that ended at `env_steps`."""
        for _, episode_return, length in games:
            self._file.write(f"{env_steps},{episode_return:g},{length}\n")
            self._returns.append(episode_return)
            self._lengths.append(length)
            self.recent.append(episode_return)
            self.count += 1

    def drain(self) -> dict:
        """Mean return and length of the games since the last drain (None where there was none)."""
        values = {"charts/episode_return": np.mean(self._returns) if self._returns else None,
                  "charts/episode_length": np.mean(self._lengths) if self._lengths else None}
        self._returns, self._lengths = [], []
        return values

    def sync(self) -> None:
        """Put every row written so far on disk: a checkpoint that survives a power loss keeps its games."""
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _parses(row: str) -> bool:
    """Whether `row` is a whole `env_steps,return,length` row."""
    fields = row.split(",")
    try:
        int(fields[0]), float(fields[1]), int(fields[2])
    except (ValueError, IndexError):
        return False
    return len(fields) == 3


def complete_rows(path: pathlib.Path, up_to: int) -> list[str]:
    """The rows of `path` (header left out) of games that ended by env step `up_to`. A line a crash tore
    mid-write (the last one, without its newline, or any that does not parse) is dropped with a
    one-line warning."""
    *lines, unfinished = path.read_text(errors="replace").split("\n")
    torn = ([unfinished] if unfinished else []) + [line for line in lines[1:] if not _parses(line)]
    if torn:
        print(f"warning: {path}: dropped {len(torn)} line(s) torn by a crash mid-write (first: {torn[0]!r})",
              file=sys.stderr)
    return [row for row in lines[1:] if _parses(row) and int(row.split(",")[0]) <= up_to]
