"""How the replay draws its batches: the SAMPLER seam of the ring (storage and the predicate stay in ring.py).

`UniformSampler` draws every written slot alike. The prioritized samplers draw slot i with probability
p_i / sum p, where p_i = (loss_i + epsilon)^alpha is set from the update's per-sample loss and a new
transition enters at the running maximum (Schaul et al. 2016, proportional variant), with one draw in each
of B equal segments of the total per batch and importance weights (N P(i))^-beta divided by the batch's
largest (N and the total cancel: p_i^-beta / max_j p_j^-beta). `PrioritizedSampler` keeps its sum tree in
NumPy on the host; the device ring's samplers, which draw inside the update graph, are in graph_samplers.py
(this module runs without TensorFlow). Every sampler hands the ring raw slots: the ring redraws the ones its
predicate refuses, so a refused slot is never returned.
"""

from __future__ import annotations

import numpy as np

from tfdqn.replay.sum_tree import SumTree, check_priorities


class Sampler:
    """The interface the rings call; on its own, uniform sampling (Mnih et al. 2015)."""

    prioritized = False

    def attach(self, ring) -> None:
        """Called once by the ring that owns the sampler."""
        self._ring = ring

    def written(self, slots: np.ndarray, final_only: bool) -> None:
        """`slots` were just written (with an episode's final frame only, where `final_only`)."""

    def vacated(self, slots: np.ndarray) -> None:
        """`slots` hold nothing any more (the ring's memory budget): never draw them."""

    def draw(self, count: int, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        return self._ring.draw_uniform(count, rng)

    def redraw(self, count: int, rng: np.random.Generator) -> np.ndarray:
        return self._ring.draw_uniform(count, rng)

    def weights(self, indices: np.ndarray, beta: float) -> np.ndarray:
        """[count, B] importance weights of the drawn `indices` ([count, B])."""
        return np.ones(indices.shape, np.float32)

    def update(self, indices: np.ndarray, losses: np.ndarray) -> None:
        """The update's per-sample losses for `indices` (uniform sampling needs none)."""

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

    def vacated(self, slots: np.ndarray) -> None:
        self.tree.set(slots, np.zeros(len(slots)))

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


def make_sampler(replay_config, in_graph: bool) -> Sampler:
    """The sampler `replay.sampler` names, for the host ring or (`in_graph`) the device ring."""
    if in_graph:
        from tfdqn.replay.graph_samplers import make_graph_sampler  # TensorFlow, which the host ring does without

        return make_graph_sampler(replay_config)
    if replay_config.sampler == "uniform":
        return UniformSampler()
    return PrioritizedSampler(replay_config.priority_exponent, replay_config.priority_epsilon)
