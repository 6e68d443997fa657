"""The prioritized-replay sum tree in a tf.Variable, read and written inside the update graph.

The binary layout of tfdqn/replay/sum_tree.py (`tree_size`, `build_tree`) with `SumTree`'s semantics, so an
accelerator's update step can draw and reprioritise a batch with no host round trip. Sums and draws are float64,
as the NumPy tree's: in float32 a draw lands on a grid of total x 2^-24, which at 2^20 slots is a sixteenth of an
average slot, so slots of low priority were drawn far from their probability (most of them never) while the
importance weights assumed it. Each method
builds a fixed number of ops (a Python loop over the static number of levels), all shapes are static,
and nothing syncs with the host, so a tf.function calling them traces once and runs on the device.

Unlike the NumPy tree, `set` does not validate its priorities: a check would force a device-to-host
copy inside the update step. Feed it finite priorities >= 0 (|TD error| + epsilon is).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfdqn.replay.sum_tree import build_tree, check_priorities, tree_size


class GraphSumTree:
    """Leaf priorities 0..capacity-1 in a float64 tf.Variable (`variable`, the flat tree)."""

    def __init__(self, capacity: int, name: str = "priorities"):
        self.capacity = capacity
        self._size = tree_size(capacity)
        self._depth = self._size.bit_length() - 1
        # No tf.device here: the variable lands on whatever device scope the caller is in.
        self.variable = tf.Variable(tf.zeros([2 * self._size], tf.float64), trainable=False, name=name)

    def total(self) -> tf.Tensor:
        return tf.gather(self.variable, 1)

    def set(self, indices: tf.Tensor, priorities: tf.Tensor) -> tf.Tensor:
        """Write leaf priorities; an index repeated in one call keeps its last write. Returns the new total."""
        indices = tf.convert_to_tensor(indices, tf.int64)
        priorities = tf.cast(priorities, tf.float64)
        # Every copy of a repeated index takes the value of its last write, found by a stable sort and a
        # search for the end of its run, so the scatter's write order cannot matter (and shapes stay static).
        order = tf.argsort(indices, stable=True)
        run_end = tf.searchsorted(tf.gather(indices, order), indices, side="right") - 1
        nodes = indices + self._size
        self.variable.scatter_nd_update(nodes[:, None], tf.gather(priorities, tf.gather(order, run_end)))
        for _ in range(self._depth):
            nodes //= 2  # siblings share a parent: the repeated writes all store the same left + right
            sums = tf.gather(self.variable, 2 * nodes) + tf.gather(self.variable, 2 * nodes + 1)
            self.variable.scatter_nd_update(nodes[:, None], sums)
        return self.total()

    def get(self, indices: tf.Tensor) -> tf.Tensor:
        return tf.gather(self.variable, tf.convert_to_tensor(indices, tf.int64) + self._size)

    def find(self, values: tf.Tensor) -> tf.Tensor:
        """For each value in [0, total), the leaf (int64) whose prefix-sum interval holds it (never a zero leaf)."""
        values = tf.cast(values, tf.float64)
        node = tf.ones_like(values, tf.int64)
        for _ in range(self._depth):
            left = 2 * node
            left_sum, right_sum = tf.gather(self.variable, left), tf.gather(self.variable, left + 1)
            go_right = ((values >= left_sum) & (right_sum > 0)) | (left_sum <= 0)
            values = tf.where(go_right, values - left_sum, values)
            node = left + tf.cast(go_right, tf.int64)
        return node - self._size

    def _checked_total(self) -> tf.Tensor:
        """The total, with an assert that fails the call (eagerly: at once) if it is 0. Nothing waits on the
        assert, so in a graph it does not stall the draw."""
        total = self.total()
        tf.debugging.assert_positive(total, message="cannot sample: every priority is 0")
        return total

    def sample(self, batch_size: int, generator: tf.random.Generator) -> tf.Tensor:
        """Stratified draw: one uniform value in each of batch_size equal segments of [0, total)."""
        segment = self._checked_total() / batch_size
        offsets = tf.range(batch_size, dtype=tf.float64) + generator.uniform([batch_size], dtype=tf.float64)
        return self.find(offsets * segment)

    def sample_proportional(self, count: int, generator: tf.random.Generator) -> tf.Tensor:
        """Independent proportional draws, for redrawing the few slots a batch refused."""
        return self.find(generator.uniform([count], dtype=tf.float64) * self._checked_total())

    def leaves(self) -> np.ndarray:
        return self.variable[self._size:self._size + self.capacity].numpy()

    def load_leaves(self, leaves) -> None:
        """Rebuild the whole tree from leaf priorities (a checkpoint restore), summed as `set` sums."""
        leaves = check_priorities(np.asarray(leaves, np.float64))
        if leaves.shape != (self.capacity,):
            raise ValueError(f"leaves of shape {leaves.shape}; allowed: ({self.capacity},)")
        self.variable.assign(build_tree(leaves, self._size, np.float64))
