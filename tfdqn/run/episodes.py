"""Whole games as they end: one `episodes.csv` row each, means for the next summary, a recent window."""

from __future__ import annotations

import collections
import pathlib

import numpy as np

from tfdqn.atomic import atomic_write

HEADER = "env_steps,return,length"


class EpisodeLog:
    """Raw returns of whole games. On resume, the rows written after the checkpoint are dropped, so the
    file repeats the uninterrupted run's rows exactly."""

    def __init__(self, path: pathlib.Path, resume_from: int | None = None):
        rows = path.read_text().splitlines()[1:] if resume_from is not None and path.exists() else []
        rows = [row for row in rows if int(row.split(",")[0]) <= resume_from]
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

    def close(self) -> None:
        self._file.close()
