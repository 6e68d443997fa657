"""The exploration schedule as TF ops, so the actor computes epsilon inside its graph."""

import tensorflow as tf


def linear_epsilon(env_steps, start: float, end: float, decay_steps: int) -> tf.Tensor:
    """Epsilon decays linearly from `start` to `end` over `decay_steps` env steps, then stays at `end`."""
    progress = tf.cast(env_steps, tf.float32) / float(max(decay_steps, 1))
    if decay_steps == 0:
        progress = tf.ones_like(progress)
    return start + tf.minimum(progress, 1.0) * (end - start)

