"""Envs that misbehave on purpose, registered for `--env tests.faulty_envs:<Id>` in fault tests."""

import gymnasium
import numpy as np


class NanRewardAfter(gymnasium.Env):
    """A small Box/Discrete env whose reward turns NaN after `nan_after` env steps in total."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, nan_after: int = 1200):
        self._nan_after = nan_after
        self._steps = 0
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action):
        self._steps += 1
        self._t += 1
        reward = float("nan") if self._steps > self._nan_after else float(action)
        observation = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        return observation, reward, self._t >= 50, False, {}


class CrashAfter(NanRewardAfter):
    """Its step raises after `crash_after` env steps, like an emulator or simulator that dies."""

    def __init__(self, crash_after: int = 700):
        super().__init__(nan_after=10**9)
        self._crash_after = crash_after

    def step(self, action):
        if self._steps >= self._crash_after:
            raise RuntimeError("simulator lost its connection")
        return super().step(action)


gymnasium.register("NanRewardAfter-v0", entry_point=NanRewardAfter)
gymnasium.register("CrashAfter-v0", entry_point=CrashAfter)
