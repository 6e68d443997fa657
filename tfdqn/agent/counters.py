"""The run's two counters, in one place: env steps and gradient updates.

They are variables so that the graphs that move them keep them: `act` adds its batch size to
`env_steps` (the epsilon schedule reads it there) and every update adds one to `updates` (target sync
reads it there). Python reads them; nothing else counts. They are saved once, in the agent's
TensorFlow checkpoint."""

import tensorflow as tf


class Counters:
    def __init__(self):
        self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="env_steps")
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")

    def read(self) -> tuple[int, int]:
        """(env_steps, updates) as Python ints."""
        return int(self.env_steps.numpy()), int(self.updates.numpy())
