"""The exploration schedule as TF ops, so the actor computes epsilon inside its graph."""

import tensorflow as tf


def linear_epsilon(env_steps, start: float, end: float, decay_steps: int, delay_steps: int = 0) -> tf.Tensor:
    """Epsilon holds at `start` for `delay_steps` env steps, decays linearly to `end` over the next
    `decay_steps`, then stays at `end`: Dopamine's `linearly_decaying_epsilon` with its warm-up as the delay."""
    progress = tf.cast(env_steps - delay_steps, tf.float32) / float(max(decay_steps, 1))
    if decay_steps == 0:
        progress = tf.cast(env_steps >= delay_steps, tf.float32)
    return start + tf.clip_by_value(progress, 0.0, 1.0) * (end - start)


def apex_epsilon(actor: int, actors: int) -> float:
    """Ape-X's fixed epsilon of actor `actor` of `actors` (Horgan et al. 2018): 0.4^(1 + 7 i / (N - 1)),
    from 0.4 down to 0.4^8 (about 0.00066); 0.4 for a single actor."""
    return 0.4 ** (1 + 7 * actor / (actors - 1)) if actors > 1 else 0.4
