"""Pure schedule functions: epsilon as TF ops (usable inside graphs) and the training cadence."""

import tensorflow as tf


def linear_epsilon(env_steps, start: float, end: float, decay_steps: int) -> tf.Tensor:
    """Epsilon decays linearly from `start` to `end` over `decay_steps` env steps, then stays at `end`."""
    progress = tf.cast(env_steps, tf.float32) / float(max(decay_steps, 1))
    if decay_steps == 0:
        progress = tf.ones_like(progress)
    return start + tf.minimum(progress, 1.0) * (end - start)


def updates_due(env_steps: int, learning_starts: int, training_interval: int) -> int:
    """Total gradient updates owed after `env_steps` env steps: one per `training_interval` steps past
    `learning_starts`. The loop runs `updates_due(...) - updates_done`; this is the only cadence rule."""
    return max(0, env_steps - learning_starts) // training_interval
