"""What every loaded policy does with NumPy observations, whatever runs its network (TensorFlow's SavedModel
or the LiteRT interpreter): one observation or a batch in, greedy or epsilon-greedy actions and Q-values out.
Imports no TensorFlow."""

from __future__ import annotations

import numpy as np


class NumpyPolicy:
    """Greedy or epsilon-greedy actions and Q-values of a trained network, NumPy in and NumPy out.

    `observations` is one observation of `observation_shape` or a batch of them, as `tfdqn.envs`
    makes them (Atari: uint8 stacks [4, 84, 84], oldest frame first); one observation gives a scalar
    action and a vector of Q-values, a batch gives arrays. Random actions (epsilon > 0) come from a
    NumPy generator seeded with `seed`. A subclass computes `_outputs(batch)`: {"action", "q_values"}."""

    def __init__(self, observation_shape: tuple, observation_dtype, num_actions: int, env_id: str, env_steps: int,
                 seed: int | None = None):
        self.observation_shape, self.observation_dtype = tuple(observation_shape), np.dtype(observation_dtype)
        self.num_actions, self.env_id, self.env_steps = num_actions, env_id, env_steps
        self._rng = np.random.default_rng(seed)

    def q_values(self, observations) -> np.ndarray:
        return self._call(observations)["q_values"]

    def act(self, observations, epsilon: float = 0.0):
        actions = self._call(observations)["action"]
        if epsilon > 0:
            explore = self._rng.random(np.shape(actions)) < epsilon
            actions = np.where(explore, self._rng.integers(self.num_actions, size=np.shape(actions)), actions)
            actions = actions.astype(np.int32)[()]
        return actions

    def _outputs(self, batch: np.ndarray) -> dict:
        raise NotImplementedError

    def _call(self, observations) -> dict:
        batch = np.asarray(observations)
        single = batch.shape == self.observation_shape
        batch = batch[None] if single else batch
        if batch.shape[1:] != self.observation_shape:
            dims = ", ".join(map(str, self.observation_shape))
            raise ValueError(f"observations of shape {np.shape(observations)} do not fit this policy; allowed: "
                             f"({dims}) or (batch, {dims})")
        outputs = self._outputs(batch.astype(self.observation_dtype, casting="same_kind"))
        return {name: value[0] if single else value for name, value in outputs.items()}
