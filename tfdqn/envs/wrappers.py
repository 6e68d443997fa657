"""Wrappers every env gets, Atari or not: the `game_over` info, float32 vector observations, images channels
first, other observations as byte frames, seeding; and a step delay for measuring latency-bound envs."""

from __future__ import annotations

import time

import gymnasium
import numpy as np


class GameOverInfo(gymnasium.Wrapper):
    """Puts `game_over` (and for Atari `lives`, `life_lost`) in every step's info.

    Sits right outside RecordEpisodeStatistics, so `game_over` is True exactly when `episode` is present.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self._lives = None

    def reset(self, *, seed=None, options=None):
        observation, info = self.env.reset(seed=seed, options=options)
        self._lives = info.get("lives")
        info["game_over"] = False
        if self._lives is not None:
            info["life_lost"] = False
        return observation, info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        info["game_over"] = bool(terminated or truncated)
        if "lives" in info:
            lives = int(info["lives"])
            info["life_lost"] = self._lives is not None and lives < self._lives
            self._lives = lives
        return observation, reward, terminated, truncated, info


IMAGE_CHANNELS = (1, 3, 4)  # grey, RGB, RGBA


def image_layout(space) -> str | None:
    """How a Box observation holds an image, or None if it is no image: uint8 [H, W] ("hw"), [H, W, C]
    ("hwc", gymnasium's usual) or [C, H, W] ("chw") with 1, 3 or 4 channels."""
    if not isinstance(space, gymnasium.spaces.Box) or space.dtype != np.uint8:
        return None
    if len(space.shape) == 2:
        return "hw"
    if len(space.shape) == 3 and space.shape[-1] in IMAGE_CHANNELS:
        return "hwc"
    if len(space.shape) == 3 and space.shape[0] in IMAGE_CHANNELS:
        return "chw"
    return None


def holds_image(space) -> bool:
    """Whether the observation space is, or a Dict or Tuple of it holds, an image (`image_layout`)."""
    if isinstance(space, (gymnasium.spaces.Dict, gymnasium.spaces.Tuple)):
        return any(holds_image(sub) for sub in (space.spaces.values() if isinstance(space, gymnasium.spaces.Dict)
                                                else space.spaces))
    return image_layout(space) is not None


class StepCap(gymnasium.wrappers.TimeLimit):
    """gymnasium's TimeLimit, for an env that registers none (`env.max_episode_steps`), which also says in the
    info of the step it cuts a game at that the cap cut it (`step_capped`), so an evaluation counts such games."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        if truncated and self._elapsed_steps >= self._max_episode_steps:
            info["step_capped"] = True
        return observation, reward, terminated, truncated, info


class ChannelsFirst(gymnasium.ObservationWrapper):
    """[H, W, C] images as [C, H, W], the layout tfdqn stores and stacks (its networks take stacks channels
    first, as Atari's [stack, H, W]); pickles, so a checkpoint can hold the env."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gymnasium.spaces.Box(np.moveaxis(space.low, -1, 0), np.moveaxis(space.high, -1, 0),
                                                      (space.shape[-1], *space.shape[:-1]), np.uint8)

    def observation(self, observation):
        return np.ascontiguousarray(np.moveaxis(observation, -1, 0))


class EncodedObservation(gymnasium.Wrapper):
    """Observations as their byte frames (`observation_layout.ObservationLayout.encode`), the legal-action mask
    included where the layout has one; pickles, so a checkpoint can hold the env."""

    def __init__(self, env: gymnasium.Env, layout):
        super().__init__(env)
        self.layout = layout
        self.observation_space = gymnasium.spaces.Box(0, 255, (layout.width,), np.uint8)

    def reset(self, *, seed=None, options=None):
        observation, info = self.env.reset(seed=seed, options=options)
        return self.layout.encode(observation, info), info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        return self.layout.encode(observation, info), reward, terminated, truncated, info


class Float32Observation(gymnasium.ObservationWrapper):
    """Vector observations as float32; unlike gymnasium's DtypeObservation it pickles, so a
    checkpoint can hold the env mid-episode and a resumed run continues it exactly."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gymnasium.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32),
                                                      space.shape, np.float32)

    def observation(self, observation):
        return np.asarray(observation, dtype=np.float32)


class SeedOnFirstReset(gymnasium.Wrapper):
    """Seeds the env with `reset(seed=seed)` on its first reset only, and its action space at once."""

    def __init__(self, env: gymnasium.Env, seed: int):
        super().__init__(env)
        self._seed = seed
        self.action_space.seed(seed)

    def reset(self, *, seed=None, options=None):
        if seed is None:
            seed = self._seed
        self._seed = None
        return self.env.reset(seed=seed, options=options)


class StepDelay(gymnasium.Wrapper):
    """Each step first sleeps `milliseconds`: an env whose step waits without using the CPU, as a simulator
    behind a socket does (`env.step_delay_ms`). Actors in their own processes overlap such waits."""

    def __init__(self, env: gymnasium.Env, milliseconds: float):
        super().__init__(env)
        self._seconds = milliseconds / 1000.0

    def step(self, action):
        time.sleep(self._seconds)
        return self.env.step(action)
