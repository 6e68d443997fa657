"""The run's counters, in one place: env steps, gradient updates and the run's seconds.

They are variables so that the graphs read them where they are: `act` reads `env_steps` for the
epsilon schedule, and every update adds one to `updates` (target sync reads it there). The training
loop (run/loop.py) is the one writer of `env_steps`: it adds the env steps each collect made;
`run_seconds` is the run clock's reading at the checkpoint (`run.clock.RunClock`). They are saved
once, in the agent's TensorFlow checkpoint."""

import tensorflow as tf


class Counters:
    def __init__(self):
        self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="env_steps")
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")
        self.run_seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="run_seconds")

    def read(self) -> tuple[int, int]:
        """(env_steps, updates) as Python ints."""
        return int(self.env_steps.numpy()), int(self.updates.numpy())
