"""The run's two counters, in one place: env steps and gradient updates.

They are variables so that the graphs read them where they are: `act` reads `env_steps` for the
epsilon schedule, and every update adds one to `updates` (target sync reads it there). The training
loop (run/loop.py) is the one writer of `env_steps`: it adds the env steps each collect made. They
are saved once, in the agent's TensorFlow checkpoint."""

import tensorflow as tf


class Counters:
    def __init__(self):
        self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="env_steps")
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")

    def read(self) -> tuple[int, int]:
        """(env_steps, updates) as Python ints."""
        return int(self.env_steps.numpy()), int(self.updates.numpy())
