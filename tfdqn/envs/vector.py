"""Envs stepped together behind one interface, so the training loop has a single shape for 1 or N envs.

- one env: the `make_env` env itself (its wrappers, pickling and exact resume are kept);
- N Atari envs: ale-py's `AtariVectorEnv`, whose C++ threads run the emulators and the Nature
  preprocessing (no-op starts, frame skip with max-pooling, 84x84 grayscale) in parallel;
- N other envs: a gymnasium `SyncVectorEnv` of `make_env` envs.

Every `step` returns the frames to act from next (a new episode's first frame where one ended), the
final frames of the episodes that ended (for the replay), and the whole games that ended (raw returns).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import gymnasium
import numpy as np
from ale_py.vector_env import AtariVectorEnv

from tfdqn.config import EnvConfig
from tfdqn.envs.make import make_env, resolve_env_id


class VectorStep(NamedTuple):
    next_frames: np.ndarray   # [N, *frame_shape]: where each env acts from next
    reward: np.ndarray        # [N] float32, raw
    terminated: np.ndarray    # [N] bool (a lost life counts for learning when the config says so)
    truncated: np.ndarray     # [N] bool
    final_frames: np.ndarray  # [N, *frame_shape]: the last frame where an episode ended, else next_frames
    games: list               # (env index, raw return, length in agent steps) of each whole game that ended


class SingleEnv:
    """One `make_env` env as a vector of one. Pickles whenever the env does (exact CartPole resume)."""

    num_envs = 1

    def __init__(self, env: gymnasium.Env):
        self.env = env

    def reset(self, seed: int | None = None) -> np.ndarray:
        return self.env.reset(seed=seed)[0][None]

    def step(self, actions: np.ndarray) -> VectorStep:
        frame, reward, terminated, truncated, info = self.env.step(int(actions[0]))
        next_frame = self.env.reset()[0] if terminated or truncated else frame
        games = [(0, float(np.asarray(info["episode"]["r"])), int(np.asarray(info["episode"]["l"])))] \
            if "episode" in info else []
        return VectorStep(next_frame[None], np.float32([reward]), np.bool_([terminated]), np.bool_([truncated]),
                          frame[None], games)

    def close(self) -> None:
        self.env.close()


class GymVectorEnv:
    """N `make_env` envs in a gymnasium SyncVectorEnv that resets an ended env within the same step."""

    def __init__(self, config: EnvConfig, num_envs: int, seed: int):
        # Each env seeds itself on its first reset with seed + its index: streams never repeat each other.
        self._vector = gymnasium.vector.SyncVectorEnv(
            [lambda i=i: make_env(config, seed=seed + i)[0] for i in range(num_envs)],
            autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
        self.num_envs = num_envs

    def reset(self, seed: int | None = None) -> np.ndarray:
        return self._vector.reset(seed=seed)[0]

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


def ale_game_name(env_id: str) -> str:
    """"ALE/MsPacman-v5" -> "ms_pacman": the ROM name AtariVectorEnv takes."""
    name = env_id.split("/")[-1].split("-")[0]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class AtariVector:
    """N Atari games in ale-py's AtariVectorEnv, configured like `make_env`'s training env.

    Lost lives are terminal for learning (`life_loss_info`) while the game continues; a game that ends
    (or hits the frame cap) is reset in the same step and its final frame comes back in `final_obs`.
    Whole-game raw returns are summed here, since ALE resets the game without reporting them."""

    def __init__(self, config: EnvConfig, num_envs: int, seed: int, num_threads: int = 0):
        self._vector = AtariVectorEnv(
            ale_game_name(resolve_env_id(config.id)), num_envs,
            num_threads=num_threads, stack_num=1, img_height=config.screen_size, img_width=config.screen_size,
            frameskip=config.frame_skip, noop_max=config.noop_max, use_fire_reset=config.fire_on_reset,
            repeat_action_probability=config.repeat_action_probability, reward_clipping=False,
            max_num_frames_per_episode=config.max_episode_frames, episodic_life=False,
            life_loss_info=config.terminal_on_life_loss, autoreset_mode="SameStep")
        self.num_envs = num_envs
        self._seed = seed
        self._returns = np.zeros(num_envs)
        self._lengths = np.zeros(num_envs, np.int64)
        self._frame_numbers = np.zeros(num_envs, np.int64)

    def reset(self, seed: int | None = None) -> np.ndarray:
        frames, info = self._vector.reset(seed=self._seed if seed is None else seed)
        self._returns[:], self._lengths[:] = 0.0, 0
        self._frame_numbers = info["episode_frame_number"].astype(np.int64)
        return frames[:, 0]

    def step(self, actions: np.ndarray) -> VectorStep:
        frames, reward, terminated, truncated, info = self._vector.step(actions.astype(np.int32))
        frames = frames[:, 0]
        final_frames = frames.copy()
        if "final_obs" in info:
            ended = terminated | truncated
            final_frames[ended] = info["final_obs"][ended, 0]
        self._returns += reward
        self._lengths += 1
        frame_numbers = info["episode_frame_number"].astype(np.int64)
        # The emulator restarted (its frame count fell): the game is over, not just a life.
        new_game = (terminated | truncated) & (frame_numbers < self._frame_numbers)
        self._frame_numbers = frame_numbers
        games = [(int(i), float(self._returns[i]), int(self._lengths[i])) for i in np.flatnonzero(new_game)]
        self._returns[new_game], self._lengths[new_game] = 0.0, 0
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
        return AtariVector(config, num_envs, seed), spec
    return GymVectorEnv(config, num_envs, seed), spec

