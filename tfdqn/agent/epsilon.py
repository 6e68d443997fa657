"""The exploration schedule as TF ops, so the actor computes epsilon inside its graph."""

import tensorflow as tf


def linear_epsilon(env_steps, start: float, end: float, decay_steps: int) -> tf.Tensor:
    """Epsilon decays linearly from `start` to `end` over `decay_steps` env steps, then stays at `end`."""
    progress = tf.cast(env_steps, tf.float32) / float(max(decay_steps, 1))
    if decay_steps == 0:
        progress = tf.ones_like(progress)
    return start + tf.minimum(progress, 1.0) * (end - start)



def apex_epsilon(actor: int, actors: int) -> float:
    """Ape-X's fixed epsilon of actor `actor` of `actors` (Horgan et al. 2018): 0.4^(1 + 7 i / (N - 1)),
    from 0.4 down to 0.4^8 (about 0.00066); 0.4 for a single actor."""
    return 0.4 ** (1 + 7 * actor / (actors - 1)) if actors > 1 else 0.4
