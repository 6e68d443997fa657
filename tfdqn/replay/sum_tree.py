"""The sum trees behind proportional prioritized replay (Schaul et al. 2016), vectorised over the batch.

`SumTree` (the host ring's) is a wide tree of NumPy arrays, one per level; the binary layout below (`tree_size`,
`build_tree`) is the in-graph tree's (`graph_sum_tree.GraphSumTree`): one flat array of 2P nodes, P the
next power of two >= capacity, the root at 1, node i's children at 2i and 2i+1, leaf j at P + j. Every
operation touches the whole batch with one array operation per level and no Python loop over its
samples. A parent is always recomputed from its children (never by adding a delta), so repeated writes
cannot drift the sums and the same leaves always give the same tree.

Neither tree's search returns a zero-priority leaf while the total is positive: rounding at an interval
boundary, or a value equal to the total, lands on the nearest positive leaf instead of an empty one.
"""

from __future__ import annotations

import functools

import numpy as np


def tree_size(capacity: int) -> int:
    """P, the number of leaf slots: the next power of two >= capacity."""
    if capacity < 1:
        raise ValueError(f"capacity = {capacity}; allowed: >= 1")
    return 1 << (capacity - 1).bit_length()


def check_priorities(priorities: np.ndarray) -> np.ndarray:
    """Refuse a negative, infinite or NaN priority: one would corrupt every sum above it."""
    if priorities.size and not (np.isfinite(priorities).all() and priorities.min() >= 0):
        bad = ~np.isfinite(priorities) | (priorities < 0)
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


FAN_OUT = 32  # children per node below the top level
TOP_LEVEL = 1024  # the top level holds at most this many sums, searched all at once


class SumTree:
    """Leaf priorities 0..capacity-1 in float64, with batched set, prefix-sum search and stratified sampling.

    The leaves and the sums above them are one array per level, each node summing `FAN_OUT` entries of
    the level below, up to a top level of at most `TOP_LEVEL` sums. A search takes the running sums of
    the top level once for the whole batch (`np.searchsorted` picks each value's top node), then steps
    down one level at a time through each value's `FAN_OUT` children; a write recomputes the sums above
    the leaves it wrote. At 1,000,000 slots that is three levels: drawing 32 slots and writing 32
    priorities are a few dozen small NumPy calls, none of them a Python loop over the batch."""

    @staticmethod
    def _level_sizes(capacity: int) -> list[int]:
        """Entries per level, leaves first, each padded to whole groups of FAN_OUT except the top."""
        if capacity < 1:
            raise ValueError(f"capacity = {capacity}; allowed: >= 1")
        sizes = [capacity]
        while sizes[-1] > TOP_LEVEL:
            sizes[-1] = -(-sizes[-1] // FAN_OUT) * FAN_OUT
            sizes.append(sizes[-1] // FAN_OUT)
        return sizes

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        """The tree's size in bytes (float64 nodes), for the replay's memory check."""
        return 8 * sum(SumTree._level_sizes(capacity))

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._levels = [np.zeros(size, np.float64) for size in SumTree._level_sizes(capacity)]

    @property
    def total(self) -> float:
        return float(self._levels[-1].sum())

    def _check_indices(self, indices) -> np.ndarray:
        indices = np.asarray(indices, np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.capacity):
            raise IndexError(f"leaf indices must lie in [0, {self.capacity}); got {indices.min()}..{indices.max()}")
        return indices

    def set(self, indices, priorities) -> None:
        """Write leaf priorities (a scalar broadcasts); an index repeated in one call keeps its last write
        (NumPy's fancy assignment writes in order)."""
        indices = self._check_indices(indices).ravel()
        priorities = np.asarray(priorities, np.float64)
        if priorities.shape != indices.shape:
            priorities = np.broadcast_to(priorities, indices.shape)
        self.set_drawn(indices, check_priorities(priorities))

    def set_drawn(self, nodes: np.ndarray, priorities: np.ndarray) -> None:
        """`set` for leaves this tree drew and priorities already checked: the prioritized sampler's path."""
        self._levels[0][nodes] = priorities
        for below, above in zip(self._levels, self._levels[1:]):
            nodes = nodes // FAN_OUT
            above[nodes] = np.take(below.reshape(-1, FAN_OUT), nodes, axis=0).sum(axis=1)

    def get(self, indices) -> np.ndarray:
        return self._levels[0][self._check_indices(indices)]

    def get_drawn(self, indices: np.ndarray) -> np.ndarray:
        """`get` for leaves this tree drew: no range check."""
        return self._levels[0][indices]

    def find(self, values) -> np.ndarray:
        """For each value in [0, total), the leaf whose prefix-sum interval holds it, never a zero leaf."""
        return self._find(np.array(values, np.float64), np.cumsum(self._levels[-1]))

    def _find(self, values: np.ndarray, running: np.ndarray) -> np.ndarray:
        """`find`, given the running sums of the top level. A value that rounding (or a value at the total)
        puts past the last positive entry of a group is moved back to that entry."""
        top = self._levels[-1]
        node = np.minimum(np.searchsorted(running, values, side="right"), len(top) - 1)
        chosen = top[node]
        if not chosen.all():
            node, chosen = _last_positive(node, chosen, top[None, :], np.zeros_like(node))
        values -= running[node] - chosen
        rows, starts, ends = _rows(len(values))
        for level in reversed(self._levels[:-1]):
            children = np.take(level.reshape(-1, FAN_OUT), node, axis=0).ravel()
            # The chosen groups laid end to end: their running sums are one sorted array, in which each
            # value (offset by the sums of the groups before its own) is found by one searchsorted.
            running = np.cumsum(children)
            before = running - children  # each entry's exclusive running sum
            values += before[starts]
            found = np.minimum(np.searchsorted(running, values, side="right"), ends)
            if not children[found].all():
                child, _ = _last_positive(found - starts, children[found], children.reshape(-1, FAN_OUT), rows)
                found = starts + child
            values -= before[found]
            node = (node - rows) * FAN_OUT + found
        return node

    def _checked_running(self) -> np.ndarray:
        running = np.cumsum(self._levels[-1])
        if running[-1] <= 0:
            raise ValueError("cannot sample: every priority is 0")
        return running

    def sample(self, batch_size: int, rng: np.random.Generator, batches: int = 1) -> np.ndarray:
        """Stratified draws: for each of `batches` batches, one uniform value in each of batch_size equal
        segments of [0, total); [batches * batch_size], batch after batch."""
        running = self._checked_running()
        segments = _segments(batch_size, batches)
        return self._find((segments + rng.random(len(segments))) * (running[-1] / batch_size), running)

    def sample_proportional(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """Independent proportional draws, for redrawing the few slots a batch refused."""
        running = self._checked_running()
        return self._find(rng.random(count) * running[-1], running)

    def leaves(self) -> np.ndarray:
        return self._levels[0][:self.capacity].copy()

    def load_leaves(self, leaves) -> None:
        """Rebuild the whole tree from leaf priorities (a checkpoint restore)."""
        leaves = check_priorities(np.asarray(leaves, np.float64))
        if leaves.shape != (self.capacity,):
            raise ValueError(f"leaves of shape {leaves.shape}; allowed: ({self.capacity},)")
        self._levels[0][:] = 0.0
        self._levels[0][:self.capacity] = leaves
        for below, above in zip(self._levels, self._levels[1:]):
            above[:] = 0.0
            above[:len(below) // FAN_OUT] = below.reshape(-1, FAN_OUT).sum(axis=1)


@functools.lru_cache(maxsize=8)
def _rows(count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row numbers of a batch of `count`, and where each row's group starts and ends when the groups are
    laid end to end (constant for a batch size, so made once)."""
    rows = np.arange(count)
    return rows, rows * FAN_OUT, rows * FAN_OUT + FAN_OUT - 1


@functools.lru_cache(maxsize=8)
def _segments(batch_size: int, batches: int) -> np.ndarray:
    """0..batch_size-1, `batches` times: each stratified draw's segment."""
    return np.tile(np.arange(batch_size), batches)


def _last_positive(position: np.ndarray, chosen: np.ndarray, groups: np.ndarray, rows) -> tuple:
    """Where a search chose a zero entry (only rounding at a group's end gets there, so this is rare):
    the last positive entry of that row's group instead, and its value."""
    bad = chosen <= 0
    group = groups[rows[bad]]
    position, chosen = position.copy(), chosen.copy()
    position[bad] = groups.shape[1] - 1 - np.argmax(group[:, ::-1] > 0, axis=1)
    chosen[bad] = group[np.arange(len(group)), position[bad]]
    return position, chosen
