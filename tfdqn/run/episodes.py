"""Whole games as they end: one `episodes.csv` row each, means for the next summary, a recent window."""

from __future__ import annotations

import collections
import pathlib

import numpy as np

from tfdqn.run.csv_log import CsvLog

HEADER = "env_steps,return,length"


class EpisodeLog:
    """Raw returns of whole games, one `CsvLog` row each (cut back to the checkpoint on resume)."""

    def __init__(self, path: pathlib.Path, resume_from: int | None = None):
        self._log = CsvLog(path, HEADER, resume_from)
        self._returns, self._lengths = [], []
        self.recent = collections.deque((float(row.split(",")[1]) for row in self._log.rows[-20:]), maxlen=20)
        self.count = len(self._log.rows)

    def record(self, env_steps: int, games: list) -> None:
        """`games`: (stream, raw return, length) of the whole games that ended at `env_steps`."""
        for _, episode_return, length in games:
            self._log.write(env_steps, float(episode_return), length)
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
        self._log.sync()

    def close(self) -> None:
        self._log.close()
