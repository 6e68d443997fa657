"""The actor class Ray runs: an `ActorWorker` that says which node of the cluster it runs on, and starts its envs
and network at its first chunk.

Its constructor only keeps its arguments, so the actor answers `whereabouts` as soon as Ray has placed it, and
`actors.ray_placement_timeout` measures placement (a node with the CPUs free), not TensorFlow's start-up, which
on a loaded machine takes tens of seconds. An env or network that fails to build then fails the first `collect`,
which the learner reports in one line as it does any error of the actor's own code. A module of its own so that
Ray's workers import it by name, and the learner only when it starts Ray actors."""

from __future__ import annotations

import os

import ray

from tfdqn.actors.worker import ActorWorker


class RayActorWorker(ActorWorker):
    def __init__(self, config, index: int, seed: int):  # the parent's constructor runs at the first chunk
        self._arguments = (config, index, seed)

    def whereabouts(self) -> dict:
        """This actor's process id and Ray node id, for the run's per-actor report."""
        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}

    def collect(self, weights: list | None, weights_updates: int, env_steps: int):
        if self._arguments is not None:
            super().__init__(*self._arguments)
            self._arguments = None
        return super().collect(weights, weights_updates, env_steps)
