"""What every loaded policy does with NumPy observations, whatever runs its network (TensorFlow's SavedModel
or the LiteRT interpreter): one observation or a batch in, greedy or epsilon-greedy actions and Q-values out.
Imports no TensorFlow."""

from __future__ import annotations

import numpy as np

from tfdqn.envs.observation_layout import MASK


class NumpyPolicy:
    """Greedy or epsilon-greedy actions and Q-values of a trained network, NumPy in and NumPy out.

    `observations` is one observation of `observation_shape` or a batch of them, as `tfdqn.envs`
    makes them (Atari: uint8 stacks [4, 84, 84], oldest frame first); one observation gives a scalar
    action and a vector of Q-values, a batch gives arrays. Where the env's observations are not one Box
    (`layout`, an `ObservationLayout`), they are given as the env gives them (a Dict's dict, a Tuple's tuple, a
    Discrete's index; a batch with a leading axis on each), with the legal actions as `action_mask` (one, or
    one per observation), or the step's `info` they are read from, where the env gives them in its info (a call
    with neither is refused: a deployed policy must not act as if every action were legal); a Dict's own
    `action_mask` entry is read from it. Random actions (epsilon > 0, drawn among the legal ones; a mask with none
    counts every action as legal, as the graphs do) come from a NumPy generator seeded with `seed`. A subclass computes `outputs(batch)`: {"action", "q_values"}, `batch` an array, or with a layout
    a dict of arrays (`ObservationLayout.batch_inputs`)."""

    def __init__(self, observation_shape: tuple, observation_dtype, num_actions: int, env_id: str, env_steps: int,
                 seed: int | None = None, layout=None):
        self.observation_shape, self.observation_dtype = tuple(observation_shape), np.dtype(observation_dtype)
        self.num_actions, self.env_id, self.env_steps, self.layout = num_actions, env_id, env_steps, layout
        self._rng = np.random.default_rng(seed)

    def q_values(self, observations, action_mask=None, info=None) -> np.ndarray:
        return self._call(observations, action_mask, info)[0]["q_values"]

    def act(self, observations, epsilon: float = 0.0, action_mask=None, info=None):
        outputs, legal = self._call(observations, action_mask, info)
        actions = outputs["action"]
        if epsilon > 0:
            legal = np.ones((*np.shape(actions), self.num_actions), bool) if legal is None else \
                legal | ~legal.any(axis=-1, keepdims=True)  # none legal: all are, as legal_actions in the graph
            draws = np.where(legal, self._rng.random(legal.shape), -1.0)
            explore = self._rng.random(np.shape(actions)) < epsilon
            actions = np.where(explore, draws.argmax(axis=-1), actions).astype(np.int32)[()]
        return actions

    def outputs(self, batch) -> dict:
        raise NotImplementedError

    def _call(self, observations, action_mask, info) -> tuple[dict, np.ndarray | None]:
        """(outputs, the legal actions where the env gives a mask, else None), unbatched for one observation."""
        if self.layout is not None:
            batch, single = self.layout.batch_inputs(observations, action_mask, info)
            legal = batch[MASK] != 0 if MASK in batch else None
        else:
            if action_mask is not None:
                raise ValueError("action_mask given, but this policy's env gives no legal-action mask; allowed: None")
            batch, single = self._batch(observations)
            legal = None
        outputs = self.outputs(batch)
        if single:
            outputs = {name: value[0] for name, value in outputs.items()}
            legal = None if legal is None else legal[0]
        return outputs, legal

    def _batch(self, observations) -> tuple[np.ndarray, bool]:
        batch = np.asarray(observations)
        single = batch.shape == self.observation_shape
        batch = batch[None] if single else batch
        if batch.shape[1:] != self.observation_shape:
            dims = ", ".join(map(str, self.observation_shape))
            raise ValueError(f"observations of shape {np.shape(observations)} do not fit this policy; allowed: "
                             f"({dims}) or (batch, {dims})")
        return batch.astype(self.observation_dtype, casting="same_kind"), single
