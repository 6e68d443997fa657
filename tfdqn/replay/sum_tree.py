"""The sum tree behind proportional prioritized replay (Schaul et al. 2016), vectorised over the batch.

The tree is one flat array of 2P nodes, P the next power of two >= capacity: the root at 1, node i's
children at 2i and 2i+1, leaf j at P + j (leaves past `capacity` stay 0). Every operation touches
the whole batch with one NumPy operation per level, so a batch costs ~log2(P) array operations and
no Python loop over its samples. A parent is always recomputed as left + right (never by adding a
delta), so repeated writes cannot drift the sums and the same leaves always give the same tree.

`find` never returns a zero-priority leaf while the total is positive: at each node it steps into a
child only if that child's sum is positive, so rounding at an interval boundary, or a value equal to
the total, lands on the nearest positive leaf instead of an empty one.
"""

from __future__ import annotations

import numpy as np


def tree_size(capacity: int) -> int:
    """P, the number of leaf slots: the next power of two >= capacity."""
    if capacity < 1:
        raise ValueError(f"capacity = {capacity}; allowed: >= 1")
    return 1 << (capacity - 1).bit_length()


def check_priorities(priorities: np.ndarray) -> np.ndarray:
    """Refuse a negative, infinite or NaN priority: one would corrupt every sum above it."""
    bad = ~np.isfinite(priorities) | (priorities < 0)
    if bad.any():
        raise ValueError(f"priority = {priorities[bad].flat[0]!r}; allowed: finite and >= 0")
    return priorities


def build_tree(leaves: np.ndarray, size: int, dtype) -> np.ndarray:
    """The flat tree over `leaves`, built bottom-up one vectorised level at a time in `dtype`."""
    tree = np.zeros(2 * size, dtype)
    tree[size:size + len(leaves)] = leaves
    level = size
    while level > 1:
        tree[level // 2:level] = tree[level:2 * level:2] + tree[level + 1:2 * level:2]
        level //= 2
    return tree


class SumTree:
    """Leaf priorities 0..capacity-1 in float64, with batched set, prefix-sum search and stratified sampling."""

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        """The tree's size in bytes (float64 nodes), for the replay's memory check."""
        return 2 * tree_size(capacity) * 8

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._size = tree_size(capacity)
        self._depth = self._size.bit_length() - 1
        self._tree = np.zeros(2 * self._size, np.float64)

    @property
    def total(self) -> float:
        return float(self._tree[1])

    def _check_indices(self, indices) -> np.ndarray:
        indices = np.asarray(indices, np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.capacity):
            raise IndexError(f"leaf indices must lie in [0, {self.capacity}); got {indices.min()}..{indices.max()}")
        return indices

    def set(self, indices, priorities) -> None:
        """Write leaf priorities (a scalar broadcasts); an index repeated in one call keeps its last write."""
        indices = self._check_indices(indices).ravel()
        priorities = check_priorities(np.broadcast_to(np.asarray(priorities, np.float64), indices.shape))
        _, first_reversed = np.unique(indices[::-1], return_index=True)
        last = len(indices) - 1 - first_reversed
        nodes = indices[last] + self._size
        self._tree[nodes] = priorities[last]
        for _ in range(self._depth):
            nodes //= 2  # siblings share a parent: the repeated writes all store the same left + right
            self._tree[nodes] = self._tree[2 * nodes] + self._tree[2 * nodes + 1]

    def get(self, indices) -> np.ndarray:
        return self._tree[self._check_indices(indices) + self._size]

    def find(self, values) -> np.ndarray:
        """For each value in [0, total), the leaf whose prefix-sum interval holds it (never a zero leaf)."""
        values = np.array(values, np.float64)
        node = np.ones(values.shape, np.int64)
        for _ in range(self._depth):
            left = 2 * node
            left_sum, right_sum = self._tree[left], self._tree[left + 1]
            go_right = ((values >= left_sum) & (right_sum > 0)) | (left_sum <= 0)
            values -= np.where(go_right, left_sum, 0.0)
            node = left + go_right
        return node - self._size

    def _checked_total(self) -> float:
        total = self.total
        if total <= 0:
            raise ValueError("cannot sample: every priority is 0")
        return total

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Stratified draw: one uniform value in each of batch_size equal segments of [0, total)."""
        segment = self._checked_total() / batch_size
        return self.find((np.arange(batch_size) + rng.random(batch_size)) * segment)

    def sample_proportional(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """Independent proportional draws, for redrawing the few slots a batch refused."""
        return self.find(rng.random(count) * self._checked_total())

    def leaves(self) -> np.ndarray:
        return self._tree[self._size:self._size + self.capacity].copy()

    def load_leaves(self, leaves) -> None:
        """Rebuild the whole tree from leaf priorities (a checkpoint restore)."""
        leaves = check_priorities(np.asarray(leaves, np.float64))
        if leaves.shape != (self.capacity,):
            raise ValueError(f"leaves of shape {leaves.shape}; allowed: ({self.capacity},)")
        self._tree = build_tree(leaves, self._size, np.float64)
