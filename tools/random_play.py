"""Uniform random play through the trainer's vector envs, each step added to a ring as the trainer's loop adds
it: the frames tools/fill_replay.py, tools/bench_replay.py and tools/checkpoint_cost.py fill replays with.
No TensorFlow."""

from __future__ import annotations

import numpy as np


class RandomPlay:
    """Steps `vector` with actions drawn uniformly from a generator seeded with `seed` (the envs reset with it)."""

    def __init__(self, vector, num_actions: int, seed: int):
        self._vector, self._num_actions = vector, num_actions
        self._rng = np.random.default_rng(seed)
        self._frames = vector.reset(seed=seed)
        self.played = 0  # env steps, over all envs

    def step(self):
        """One vector step: (frames the actions were chosen from, actions, the env's step result)."""
        actions = self._rng.integers(self._num_actions, size=self._vector.num_envs)
        step = self._vector.step(actions)
        frames, self._frames = self._frames, step.next_frames
        self.played += self._vector.num_envs
        return frames, actions, step

    def fill(self, replay, transitions: int) -> None:
        """Play at least `transitions` more env steps into `replay`."""
        target = self.played + transitions
        while self.played < target:
            frames, actions, step = self.step()
            replay.add(frames, actions, step.reward, step.terminated, step.truncated, step.final_frames)
