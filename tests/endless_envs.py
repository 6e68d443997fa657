"""An env of the tests' own that registers no time limit and never ends a game by itself, for `--env
tests.endless_envs:Endless-v0`: a greedy policy there plays forever unless something caps its games."""

import gymnasium
import numpy as np


class Endless(gymnasium.Env):
    """One float observation (the step count, scaled) and two actions, each worth a reward of 0.1; no terminal."""

    observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._steps = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self._steps += 1
        return np.array([min(self._steps / 1000, 1.0)], np.float32), 0.1, False, False, {}


gymnasium.register("Endless-v0", entry_point=Endless)
