"""The prioritized-replay peer for benchmarks: the sum tree as most DQN code writes it (OpenAI Baselines'
segment trees, which RLlib and CleanRL's Rainbow carry): a sum tree and a min tree over NumPy float32
arrays, walked one node at a time in Python, with Python loops over the batch for drawing (one
`np.random.uniform` per stratum), weighting and updating (one NumPy-scalar power per priority). It
exists so a bench can say what tfdqn's vectorised `SumTree` and `GraphSumTree` buy; tfdqn never uses it."""

from __future__ import annotations

import numpy as np


class SegmentTree:
    """`combine` (add or min) over leaves at size-1..2*size-2 of a flat float32 array, the root at 0."""

    def __init__(self, capacity: int, combine, neutral: float):
        self.size = 1
        while self.size < capacity:
            self.size *= 2
        self.combine = combine
        self.values = np.full(2 * self.size - 1, neutral, np.float32)

    def update(self, index: int, value) -> None:
        node = index + self.size - 1
        self.values[node] = value
        while node > 0:
            node = (node - 1) // 2
            self.values[node] = self.combine(self.values[2 * node + 1], self.values[2 * node + 2])

    def leaf(self, index: int):
        return self.values[index + self.size - 1]

    def root(self):
        return self.values[0]


class SumTree(SegmentTree):
    def __init__(self, capacity: int):
        super().__init__(capacity, lambda a, b: a + b, 0.0)

    def retrieve(self, mass) -> int:
        """The leaf whose prefix-sum interval holds `mass`."""
        node = 0
        while 2 * node + 1 < len(self.values):
            left = 2 * node + 1
            if mass <= self.values[left]:
                node = left
            else:
                mass -= self.values[left]
                node = left + 1
        return node - (self.size - 1)


class PythonPrioritizedSampler:
    """Stratified proportional draws with importance weights (N P(i))^-beta / max and priority updates,
    one sample at a time."""

    def __init__(self, capacity: int, alpha: float):
        self.capacity, self.alpha = capacity, alpha
        self.sums, self.mins = SumTree(capacity), SegmentTree(capacity, min, float("inf"))

    def sample(self, batch_size: int, beta: float) -> tuple[list, np.ndarray]:
        total = self.sums.root()
        segment = total / batch_size
        indices = [self.sums.retrieve(np.random.uniform(segment * i, segment * (i + 1))) for i in range(batch_size)]
        probabilities = np.array([self.sums.leaf(i) for i in indices]) / total
        weights = (self.capacity * probabilities) ** -beta
        return indices, weights / weights.max()

    def update(self, indices, losses: np.ndarray, epsilon: float = 1e-6) -> None:
        for index, priority in zip(indices, np.abs(losses) + epsilon):
            priority = priority ** self.alpha
            self.sums.update(index, priority)
            self.mins.update(index, priority)
