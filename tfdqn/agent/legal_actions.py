"""Acting and the target among legal actions only: Q of illegal actions pushed below every legal one for the
argmax and the max, and the epsilon-random action drawn uniformly over the legal ones (Huang and Ontañón 2022
mask invalid actions in the policy the same way). `legal` is [B, actions] bool, at least one True per row
(`observation_encoder.legal_actions` makes sure)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def masked_q(q_values: tf.Tensor, legal: tf.Tensor) -> tf.Tensor:
    """Q of each legal action, the dtype's lowest value for the others: argmax and max see legal actions only."""
    return tf.where(legal, q_values, tf.fill(tf.shape(q_values), q_values.dtype.min))


def random_legal_action(generator: tf.random.Generator, legal: tf.Tensor) -> tf.Tensor:
    """[B] int32: per row one legal action, each with the same probability."""
    draws = generator.uniform(tf.shape(legal))
    return tf.argmax(tf.where(legal, draws, -tf.ones_like(draws)), axis=-1, output_type=tf.int32)


def masked_q_numpy(q_values: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """`masked_q`'s NumPy twin, for policies run without TensorFlow and for the tests."""
    return np.where(legal, q_values, np.finfo(q_values.dtype).min)
