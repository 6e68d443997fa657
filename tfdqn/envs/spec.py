"""What the rest of tfdqn sees of an env: its `EnvSpec`, and the `VectorStep` every vector env returns."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """What the rest of tfdqn needs to know about an env, without holding the env."""

    env_id: str  # resolved gymnasium id, e.g. "CartPole-v1", "ALE/Breakout-v5"
    is_atari: bool
    frame_shape: tuple  # shape of ONE frame the env returns: (84, 84) for Atari, the obs shape otherwise
    frame_dtype: np.dtype  # uint8 for images (Atari's and any env's) and byte frames (`layout`), float32 for vectors
    stack_size: int  # frames per network input: config.frame_stack for images, 1 for vector observations
    observation_shape: tuple  # what the network sees: (stack_size, *frame_shape), or frame_shape if stack_size 1
    num_actions: int
    action_meanings: tuple | None  # Atari only, e.g. ("NOOP", "FIRE", "RIGHT", "LEFT")
    env_channels_last: bool = False  # the env gives [H, W, C] images, which tfdqn stores as [C, H, W] frames
    layout: object = None  # an ObservationLayout where frames are byte-encoded observations (envs.observation_layout)

    @property
    def env_observation_shape(self) -> tuple:
        """An observation as the env gives it (a stack of them where frames are stacked): [H, W, C] images
        where the env gives those, though tfdqn stores them channels first."""
        shape = self.observation_shape
        return (*shape[:-3], *shape[-2:], shape[-3]) if self.env_channels_last else tuple(shape)

    def as_env_gives(self, observations: np.ndarray) -> np.ndarray:
        """A batch of observations as tfdqn stores them, laid out as the env gives them."""
        return np.moveaxis(observations, -3, -1) if self.env_channels_last else observations


class VectorStep(NamedTuple):
    """One step of N envs. An env whose episode ended has already been reset (or, after a lost life that
    is terminal for learning, continued): its next frame is the new episode's first frame. Where no
    episode ended, final_frames equals next_frames."""

    next_frames: np.ndarray   # [N, *frame_shape]: where each env acts from next
    reward: np.ndarray        # [N] float32, raw, of the agent's actions only (not of the envs' own presses)
    terminated: np.ndarray    # [N] bool (a lost life counts for learning when the config says so)
    truncated: np.ndarray     # [N] bool
    final_frames: np.ndarray  # [N, *frame_shape]: where an episode ended the frame its last action produced
    games: list               # (env index, raw return, length in agent steps) of each whole game that ended
