"""The actor-side frame stack: the last k frames of each of a batch of env streams, oldest first.

The convention matches gymnasium's FrameStackObservation(padding_type="zero") and the replay's rebuilt
stacks: a new episode starts with its first frame in the newest position and zeros in the older ones.
"""

from __future__ import annotations

import numpy as np


class FrameStack:
    """Stacks of the last `stack_size` frames for `num_streams` envs, updated in one NumPy op per step.

    Each `push` builds a new array, so an `observation` handed out earlier never changes under its
    holder; the arrays handed out are read-only.

    Typical use, per env step: `push(frames)` with every stream's new frame, then `reset(i, first_frame)`
    for each stream `i` whose episode ended (its env was reset), then `observation` for the actor.
    """

    def __init__(self, num_streams: int, stack_size: int, frame_shape: tuple, dtype):
        if num_streams < 1 or stack_size < 1:
            raise ValueError(f"num_streams ({num_streams}) and stack_size ({stack_size}) must be >= 1")
        self.num_streams = int(num_streams)
        self.stack_size = int(stack_size)
        self.frame_shape = tuple(frame_shape)
        self.dtype = np.dtype(dtype)
        self._stacks = self._publish(np.zeros((self.num_streams, self.stack_size, *self.frame_shape), self.dtype))

    @property
    def observation_shape(self) -> tuple:
        """Shape of one stream's observation: (stack_size, *frame_shape), or frame_shape if stack_size is 1."""
        return self.frame_shape if self.stack_size == 1 else (self.stack_size, *self.frame_shape)

    @property
    def observation(self) -> np.ndarray:
        """[num_streams, *observation_shape], oldest frame first; read-only."""
        if self.stack_size == 1:
            return self._stacks.reshape(self.num_streams, *self.frame_shape)
        return self._stacks

    def reset(self, stream_index: int, frame: np.ndarray) -> None:
        """Start a new episode in one stream: `frame` is newest, the older positions are zeros."""
        stacks = self._stacks.copy()
        stacks[stream_index, :-1] = 0
        stacks[stream_index, -1] = self._check(frame, self.frame_shape, "frame")
        self._stacks = self._publish(stacks)

    def reset_all(self, frames: np.ndarray) -> None:
        """Start a new episode in every stream, with frames of shape [num_streams, *frame_shape]."""
        stacks = np.zeros_like(self._stacks)
        stacks[:, -1] = self._check(frames, (self.num_streams, *self.frame_shape), "frames")
        self._stacks = self._publish(stacks)

    def push(self, frames: np.ndarray) -> None:
        """Append one new frame per stream (shape [num_streams, *frame_shape]); the oldest drops out."""
        stacks = np.empty_like(self._stacks)
        stacks[:, :-1] = self._stacks[:, 1:]
        stacks[:, -1] = self._check(frames, (self.num_streams, *self.frame_shape), "frames")
        self._stacks = self._publish(stacks)

    @staticmethod
    def _check(array, shape: tuple, what: str) -> np.ndarray:
        array = np.asarray(array)
        if array.shape != shape:
            raise ValueError(f"{what} has shape {array.shape}, expected {shape}")
        return array

    @staticmethod
    def _publish(stacks: np.ndarray) -> np.ndarray:
        stacks.flags.writeable = False
        return stacks
