"""Envs stepped together behind one interface, so the training loop has a single shape for 1 or N envs.

- one env: the `make_env` env itself (its wrappers, pickling and exact resume are kept);
- N Atari envs: `AtariVector` (tfdqn.envs.atari_vector), ale-py's C++ emulators with the Nature
  preprocessing, playing what the one-env pipeline plays (FIRE after each new game, NOOP then FIRE after
  a lost life that is terminal for learning), with the same no-op start and frame cap;
- N other envs: a gymnasium `SyncVectorEnv` of `make_env` envs.

Env i of a run seeded `seed` is seeded `env_seed(seed, i)` (tfdqn.envs.seeds): env 0 keeps `seed`.

Every `step` returns the frames to act from next (a new episode's first frame where one ended), the
final frames of the episodes that ended (for the replay), and the whole games that ended (raw returns).
"""

from __future__ import annotations

import functools

import gymnasium
import numpy as np

from tfdqn.config import EnvConfig
from tfdqn.envs.atari_vector import AtariVector, ale_game_name
from tfdqn.envs.make import make_env
from tfdqn.envs.seeds import env_seed, env_seeds
from tfdqn.envs.spec import VectorStep
from tfdqn.errors import UserError

__all__ = ["VectorStep", "SingleEnv", "GymVectorEnv", "AtariVector", "ale_game_name", "make_vector_env", "env_seed"]


def _games(info: dict) -> list:
    """[(0, raw return, length)] where `info` holds a whole game's `episode`, else []."""
    if "episode" not in info:
        return []
    return [(0, float(np.asarray(info["episode"]["r"])), int(np.asarray(info["episode"]["l"])))]


class SingleEnv:
    """One `make_env` env as a vector of one. Pickles whenever the env does (exact CartPole resume)."""

    num_envs = 1

    def __init__(self, env: gymnasium.Env):
        self.env = env

    def reset(self, seed: int | None = None) -> np.ndarray:
        return self.env.reset(seed=seed)[0][None]

    def step(self, actions: np.ndarray) -> VectorStep:
        frame, reward, terminated, truncated, info = self.env.step(int(actions[0]))
        games = _games(info)
        next_frame = frame
        if terminated or truncated:
            next_frame, reset_info = self.env.reset()
            games += _games(reset_info)  # a game that ended inside the reset (the wrappers' own step hit the cap)
        return VectorStep(next_frame[None], np.float32([reward]), np.bool_([terminated]), np.bool_([truncated]),
                          frame[None], games)

    def close(self) -> None:
        self.env.close()


def _make_one(config: EnvConfig, seed: int) -> gymnasium.Env:
    """A module-level env maker: SyncVectorEnv keeps its env makers, and lambdas do not pickle."""
    return make_env(config, seed=seed)[0]


class GymVectorEnv:
    """N `make_env` envs in a gymnasium SyncVectorEnv that resets an ended env within the same step.

    Pickles (its env makers are partials of a module-level function), so a checkpoint can hold it
    mid-episode and a resumed run continues every env exactly."""

    def __init__(self, config: EnvConfig, num_envs: int, seed: int):
        # Env i seeds itself on its first reset with env_seed(seed, i).
        self._vector = gymnasium.vector.SyncVectorEnv(
            [functools.partial(_make_one, config, env_seed(seed, i)) for i in range(num_envs)],
            autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
        self.num_envs = num_envs

    def reset(self, seed: int | None = None) -> np.ndarray:
        seeds = None if seed is None else env_seeds(seed, self.num_envs)  # not gymnasium's seed + i
        return self._vector.reset(seed=seeds)[0]

    def step(self, actions: np.ndarray) -> VectorStep:
        frames, reward, terminated, truncated, info = self._vector.step(actions.astype(np.int64))
        final_frames = frames.copy()
        games = []
        if "final_obs" in info:
            for i in np.flatnonzero(info["_final_obs"]):
                final_frames[i] = info["final_obs"][i]
            episode = info["final_info"].get("episode")
            if episode is not None:
                games = [(int(i), float(episode["r"][i]), int(episode["l"][i]))
                         for i in np.flatnonzero(info["final_info"]["_episode"])]
        return VectorStep(frames, reward.astype(np.float32), terminated, truncated, final_frames, games)

    def close(self) -> None:
        self._vector.close()


def make_vector_env(config: EnvConfig, num_envs: int, seed: int) -> tuple:
    """(vector env, spec): the single env itself for one env, else the batched implementation."""
    env, spec = make_env(config, seed=seed)
    if num_envs == 1:
        return SingleEnv(env), spec
    env.close()
    if spec.is_atari:
        if config.kwargs:
            raise UserError(f"env.kwargs with {num_envs} ALE envs: ale-py's vector emulator takes no keyword "
                            f"arguments of gymnasium.make; allowed: run.num_envs = 1, or no env.kwargs")
        return AtariVector(config, num_envs, seed), spec
    return GymVectorEnv(config, num_envs, seed), spec
