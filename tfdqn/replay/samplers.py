"""How the replay draws its batches: the SAMPLER seam of the ring (storage and the predicate stay in ring.py).

`UniformSampler` draws every written slot alike. The prioritized samplers draw slot i with probability
p_i / sum p, where p_i = (loss_i + epsilon)^alpha is set from the update's per-sample loss and a new
transition enters at the running maximum (Schaul et al. 2016, proportional variant), with one draw in each
of B equal segments of the total per batch and importance weights (N P(i))^-beta divided by the batch's
largest (N and the total cancel: p_i^-beta / max_j p_j^-beta). `PrioritizedSampler` keeps its sum tree in
NumPy on the host; `GraphPrioritizedSampler` in a tf.Variable, sampled and updated inside the update graph
of the device ring. Every sampler hands the ring raw slots: the ring redraws the ones its predicate
refuses, so a refused slot is never returned.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfdqn.replay.graph_sum_tree import GraphSumTree
from tfdqn.replay.sum_tree import SumTree, check_priorities


class Sampler:
    """The interface the rings call; on its own, uniform sampling (Mnih et al. 2015)."""

    prioritized = False

    def attach(self, ring) -> None:
        """Called once by the ring that owns the sampler."""
        self._ring = ring

    def written(self, slots: np.ndarray, final_only: bool) -> None:
        """`slots` were just written (with an episode's final frame only, where `final_only`)."""

    def flush(self) -> None:
        """The device ring's flush: what `written` staged reaches the graph."""

    def draw(self, count: int, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        return self._ring.draw_uniform(count, rng)

    def redraw(self, count: int, rng: np.random.Generator) -> np.ndarray:
        return self._ring.draw_uniform(count, rng)

    def weights(self, indices: np.ndarray, beta: float) -> np.ndarray:
        """[count, B] importance weights of the drawn `indices` ([count, B])."""
        return np.ones(indices.shape, np.float32)

    def update(self, indices: np.ndarray, losses: np.ndarray) -> None:
        """The update's per-sample losses for `indices` (uniform sampling needs none)."""

    def draw_in_graph(self, count: int, generator: tf.random.Generator) -> tf.Tensor:
        return self._ring.draw_uniform_in_graph(count)

    def redraw_in_graph(self, count: int, generator: tf.random.Generator) -> tf.Tensor:
        return self._ring.draw_uniform_in_graph(count)

    def weights_in_graph(self, slots: tf.Tensor, beta) -> tf.Tensor:
        return tf.ones(tf.shape(slots), tf.float32)

    def counters(self) -> dict:
        return {}

    def load_counters(self, counters: dict) -> None:
        """Restore what `counters` returned."""

    def arrays(self) -> dict:
        """Per-slot state saved beside the ring's chunks (none for uniform sampling)."""
        return {}

    def load_arrays(self, arrays: dict) -> None:
        """Restore what `arrays` returned."""


UniformSampler = Sampler


def priority(losses, alpha: float, epsilon: float):
    """(|loss| + epsilon)^alpha: NumPy arrays or tensors alike."""
    return (abs(losses) + epsilon) ** alpha


class PrioritizedSampler(Sampler):
    """Proportional prioritized sampling over a NumPy sum tree, one array operation per tree level for
    the whole batch (`SumTree`)."""

    prioritized = True

    def __init__(self, alpha: float, epsilon: float):
        self._alpha, self._epsilon = alpha, epsilon
        self.max_priority = 1.0  # of p^alpha, as stored in the tree

    def attach(self, ring) -> None:
        super().attach(ring)
        self.tree = SumTree(ring.capacity)

    def written(self, slots: np.ndarray, final_only: bool) -> None:
        """A new transition enters at the running maximum; a final frame is never a transition."""
        self.tree.set(slots, np.full(len(slots), 0.0 if final_only else self.max_priority))

    def draw(self, count: int, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Stratified per batch: one draw in each of `batch_size` equal segments of the total."""
        return self.tree.sample(batch_size, rng, batches=count // batch_size)

    def redraw(self, count: int, rng: np.random.Generator) -> np.ndarray:
        return self.tree.sample_proportional(count, rng)

    def weights(self, indices: np.ndarray, beta: float) -> np.ndarray:
        weight = self.tree.get_drawn(indices) ** -beta
        return (weight / weight.max(axis=-1, keepdims=True)).astype(np.float32)

    def update(self, indices: np.ndarray, losses: np.ndarray) -> None:
        """Indices the tree drew; losses from the update (a non-finite one is refused: it would corrupt
        every sum above it)."""
        priorities = priority(np.asarray(losses, np.float64), self._alpha, self._epsilon)
        if priorities.size:
            largest = float(priorities.max())
            if not (np.isfinite(largest) and priorities.min() >= 0):
                check_priorities(priorities)  # raises, naming the value
            self.max_priority = max(self.max_priority, largest)
            self.tree.set_drawn(indices, priorities)

    def counters(self) -> dict:
        return {"max_priority": self.max_priority}

    def load_counters(self, counters: dict) -> None:
        self.max_priority = counters["max_priority"]

    def arrays(self) -> dict:
        return {"priorities": self.tree.leaves()}

    def load_arrays(self, arrays: dict) -> None:
        self.tree.load_leaves(arrays["priorities"])


class GraphPrioritizedSampler(Sampler):
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


def make_sampler(replay_config, in_graph: bool) -> Sampler:
    """The sampler `replay.sampler` names, for the host ring or (`in_graph`) the device ring."""
    if replay_config.sampler == "uniform":
        return UniformSampler()
    kind = GraphPrioritizedSampler if in_graph else PrioritizedSampler
    return kind(replay_config.priority_exponent, replay_config.priority_epsilon)


def importance_exponent(env_steps, start: float, end: float, total_steps: int) -> tf.Tensor:
    """beta, linear from `start` at env step 0 to `end` at `total_steps` (Schaul et al. 2016), then held:
    one formula for the host sampler (a number in) and the in-graph one (the env-step variable in)."""
    fraction = tf.minimum(tf.cast(env_steps, tf.float32) / float(total_steps), 1.0)
    return start + (end - start) * fraction
