"""The sum-tree peer for benchmarks: prioritized replay's sum tree written the way most DQN code writes
it, one node at a time in Python (one walk up per update, one walk down per draw, a Python loop over
the batch). It exists so a bench can say what tfdqn's vectorised `SumTree` and `GraphSumTree` buy."""

from __future__ import annotations

import numpy as np


class PythonSumTree:
    """Leaves at P..P+capacity-1 of a flat list (P the next power of two >= capacity), root at 1."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.size = 1
        while self.size < capacity:
            self.size *= 2
        self.tree = [0.0] * (2 * self.size)

    @property
    def total(self) -> float:
        return self.tree[1]

    def update(self, index: int, priority: float) -> None:
        node = index + self.size
        self.tree[node] = priority
        node //= 2
        while node >= 1:
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]
            node //= 2

    def update_batch(self, indices, priorities) -> None:
        for index, priority in zip(indices, priorities):
            self.update(int(index), float(priority))

    def find(self, value: float) -> int:
        node = 1
        while node < self.size:
            left = 2 * node
            if value < self.tree[left]:
                node = left
            else:
                value -= self.tree[left]
                node = left + 1
        return node - self.size

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        segment = self.total / batch_size
        return np.array([self.find(rng.uniform(i * segment, (i + 1) * segment)) for i in range(batch_size)],
                        np.int64)
