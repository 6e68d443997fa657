"""Checkpoints of everything TensorFlow holds, each made valid only by a marker written last."""

import json
import pathlib
import sys

import tensorflow as tf

from tfdqn.agent import Agent
from tfdqn.errors import UserError

MARKER_SUFFIX = ".complete"


def _tracked(agent: Agent) -> tf.train.Checkpoint:
    return tf.train.Checkpoint(online=agent.online, target=agent.target, optimizer=agent.learner.optimizer,
                               updates=agent.learner.updates, env_steps=agent.actor.env_steps,
                               actor_rng=agent.actor.generator)


class Checkpointer:
    """`tf.train.CheckpointManager` over nets, optimizer, counters and the actor's RNG.

    A checkpoint counts only once its `<prefix>.complete` marker exists; the marker is written after
    TensorFlow has finished writing, so a run killed mid-save leaves the previous one in charge."""

    def __init__(self, directory: pathlib.Path, agent: Agent, max_to_keep: int = 3):
        self.directory = pathlib.Path(directory)
        self._checkpoint = _tracked(agent)
        self._manager = tf.train.CheckpointManager(self._checkpoint, str(self.directory), max_to_keep=max_to_keep)

    def save(self, env_steps: int) -> str:
        prefix = self._manager.save(checkpoint_number=env_steps)
        marker = pathlib.Path(prefix + MARKER_SUFFIX)
        tmp = marker.with_name(marker.name + ".tmp")
        tmp.write_text(json.dumps({"env_steps": env_steps}))
        tmp.replace(marker)
        kept = set(self._manager.checkpoints)
        for stale in self.directory.glob(f"*{MARKER_SUFFIX}"):
            if str(stale)[: -len(MARKER_SUFFIX)] not in kept:
                stale.unlink()
        return prefix

    def complete_prefixes(self) -> list[str]:
        """Checkpoint prefixes whose marker exists, newest first."""
        markers = sorted(self.directory.glob(f"*{MARKER_SUFFIX}"),
                         key=lambda m: json.loads(m.read_text())["env_steps"], reverse=True)
        return [str(m)[: -len(MARKER_SUFFIX)] for m in markers]

    def restore_latest(self) -> int:
        """Restore the newest complete checkpoint, warning about any newer one that would not load.

        Returns its env step; raises UserError when no complete checkpoint exists."""
        for prefix in self.complete_prefixes():
            try:
                self._checkpoint.restore(prefix).expect_partial()
            except (tf.errors.OpError, ValueError) as error:
                print(f"warning: skipped broken checkpoint {prefix}: {error.__class__.__name__}", file=sys.stderr)
                continue
            return int(json.loads(pathlib.Path(prefix + MARKER_SUFFIX).read_text())["env_steps"])
        raise UserError(f"no complete checkpoint in {self.directory}; allowed: a run folder written by tfdqn.train")
