"""The device ring's samplers: they draw, weight and write priorities inside the update graph (the host
samplers and the shared interface are in samplers.py)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfdqn.replay.graph_sum_tree import GraphSumTree
from tfdqn.replay.samplers import Sampler, priority


class GraphUniformSampler(Sampler):
    """Uniform sampling over the device ring's held slots, in the graph (Mnih et al. 2015)."""

    def flush(self) -> None:
        """The device ring's flush: what `written` staged reaches the graph."""

    def draw_in_graph(self, count: int, generator: tf.random.Generator) -> tf.Tensor:
        return self._ring.draw_uniform_in_graph(count)

    def redraw_in_graph(self, count: int, generator: tf.random.Generator) -> tf.Tensor:
        return self._ring.draw_uniform_in_graph(count)

    def weights_in_graph(self, slots: tf.Tensor, beta) -> tf.Tensor:
        return tf.ones(tf.shape(slots), tf.float32)


class GraphPrioritizedSampler(GraphUniformSampler):
    """The same sampling with the sum tree and the running maximum in tf.Variables (`GraphSumTree`), for
    the device ring: each update of a fused call draws with the priorities the previous one wrote, and no
    priority crosses to the host. New slots enter the tree at the device ring's flush."""

    prioritized = True

    def __init__(self, alpha: float, epsilon: float):
        self._alpha, self._epsilon = alpha, epsilon
        self._staged = []  # (slots, final_only) written since the last flush

    def attach(self, ring) -> None:
        super().attach(ring)
        self.tree = GraphSumTree(ring.capacity)
        self.max_priority = tf.Variable(1.0, trainable=False, name="max_priority")
        slots = tf.TensorSpec([None], tf.int64)
        self._enter = tf.function(self._enter_new, input_signature=[slots, tf.TensorSpec([None], tf.bool)],
                                  autograph=False)

    def written(self, slots: np.ndarray, final_only: bool) -> None:
        self._staged.append((slots.copy(), np.full(len(slots), final_only)))

    def flush(self) -> None:
        if self._staged:
            slots, final_only = (np.concatenate(column) for column in zip(*self._staged))
            self._staged = []
            self._enter(tf.constant(slots, tf.int64), tf.constant(final_only))

    def _enter_new(self, slots, final_only):
        """New transitions at the running maximum, final frames at 0 (in write order: the last write wins)."""
        return self.tree.set(slots, tf.where(final_only, 0.0, self.max_priority))

    def draw_in_graph(self, count: int, generator: tf.random.Generator) -> tf.Tensor:
        return self.tree.sample(count, generator)

    def redraw_in_graph(self, count: int, generator: tf.random.Generator) -> tf.Tensor:
        return self.tree.sample_proportional(count, generator)

    def weights_in_graph(self, slots: tf.Tensor, beta) -> tf.Tensor:
        weight = self.tree.get(slots) ** -tf.cast(beta, tf.float64)
        return tf.cast(weight / tf.reduce_max(weight), tf.float32)

    def write_in_graph(self, slots: tf.Tensor, losses: tf.Tensor) -> tf.Tensor:
        """The update's priorities for the slots it drew, and the running maximum."""
        priorities = priority(tf.cast(losses, tf.float32), self._alpha, self._epsilon)
        self.max_priority.assign(tf.maximum(self.max_priority, tf.reduce_max(priorities)))
        return self.tree.set(slots, priorities)

    # The host API (tests, the ring's `sample`) runs the graph versions eagerly.
    def draw(self, count: int, batch_size: int, rng) -> np.ndarray:
        generator = self._ring.graph_generator
        return np.concatenate([self.tree.sample(batch_size, generator).numpy() for _ in range(count // batch_size)])

    def redraw(self, count: int, rng) -> np.ndarray:
        return self.tree.sample_proportional(count, self._ring.graph_generator).numpy()

    def weights(self, indices: np.ndarray, beta: float) -> np.ndarray:
        return np.stack([self.weights_in_graph(tf.constant(row), beta).numpy() for row in indices])

    def update(self, indices: np.ndarray, losses: np.ndarray) -> None:
        self.write_in_graph(tf.constant(indices, tf.int64), tf.constant(losses, tf.float32))

    def counters(self) -> dict:
        return {"max_priority": float(self.max_priority.numpy())}

    def load_counters(self, counters: dict) -> None:
        self.max_priority.assign(counters["max_priority"])

    def arrays(self) -> dict:
        self.flush()
        return {"priorities": self.tree.leaves()}

    def load_arrays(self, arrays: dict) -> None:
        self._staged = []
        self.tree.load_leaves(arrays["priorities"])


def make_graph_sampler(replay_config) -> GraphUniformSampler:
    """The in-graph sampler `replay.sampler` names."""
    if replay_config.sampler == "uniform":
        return GraphUniformSampler()
    return GraphPrioritizedSampler(replay_config.priority_exponent, replay_config.priority_epsilon)


def importance_exponent(env_steps, start: float, end: float, total_steps: int) -> tf.Tensor:
    """beta, linear from `start` at env step 0 to `end` at `total_steps` (Schaul et al. 2016), then held:
    one formula for the host sampler (a number in) and the in-graph one (the env-step variable in)."""
    fraction = tf.minimum(tf.cast(env_steps, tf.float32) / float(total_steps), 1.0)
    return start + (end - start) * fraction
