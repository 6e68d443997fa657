"""IQN's head (Dabney, Ostrovski, Silver and Munos 2018): the return's quantile function at any fractions tau.

Each fraction tau is embedded as relu(W [cos(pi i tau)] + b) over i = 1..n (n = 64, as Dopamine's
ImplicitQuantileNetwork; the paper's i = 0 term is a constant, which the bias already holds), multiplied
elementwise into the body's features, and passed through the head's hidden and output layers: one row per
(sample, fraction), so the dense layers stay 2-D. The network's own output, what acting, evaluation, the
SavedModel and LiteRT read, is the expected Q at K fixed fractions, the midpoints (2k + 1) / 2K: the same
observation always gets the same Q (a greedy evaluation and an exported policy repeat, and a LiteRT model
needs no random op), and the midpoint rule estimates the mean of a smooth quantile function with less error
than K uniform draws. The learner reads `fraction_model`: the same layers at fractions it samples.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfdqn.agent import losses
from tfdqn.agent.heads import DISTRIBUTION, DuelingCombine

FRACTIONS = "fractions"  # the layer giving the K midpoint fractions; its input is the body's features
COSINES, EMBEDDING, MERGE, HIDDEN = "quantile_cosines", "quantile_embedding", "quantile_merge", "quantile_hidden"
PER_FRACTION = (EMBEDDING, HIDDEN, "outputs", "value", "advantage")  # the dense layers that run once per fraction


class _Counted(keras.layers.Layer):
    """A weightless layer of `count` outputs per row, which its config keeps."""

    def __init__(self, count: int, **kwargs):
        super().__init__(**kwargs)
        self.count = count

    def get_config(self):
        return {**super().get_config(), "count": self.count}


@keras.saving.register_keras_serializable(package="tfdqn")
class MidpointFractions(_Counted):
    """[batch, features] -> [batch, K]: the fractions (2k + 1) / 2K for every sample."""

    def call(self, features):
        return tf.broadcast_to(losses.quantile_midpoints(self.count), [tf.shape(features)[0], self.count])

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.count)


@keras.saving.register_keras_serializable(package="tfdqn")
class QuantileCosines(_Counted):
    """[batch, N] fractions -> [batch * N, n]: cos(pi i tau) for i = 1..n, one row per (sample, fraction)."""

    def call(self, fractions):
        i = tf.range(1.0, self.count + 1.0)
        return tf.cos(math.pi * tf.reshape(tf.cast(fractions, tf.float32), [-1, 1]) * i)

    def compute_output_shape(self, input_shape):
        return (None, self.count)


@keras.saving.register_keras_serializable(package="tfdqn")
class QuantileMerge(keras.layers.Layer):
    """([batch, D] features, [batch * N, D] embeddings) -> [batch * N, D]: each sample's features times each of
    its fractions' embeddings (the paper's elementwise product)."""

    def call(self, inputs):
        features, embedding = inputs
        batch, width = tf.shape(features)[0], tf.shape(features)[1]
        rows = tf.reshape(embedding, [batch, -1, width]) * features[:, None, :]
        return tf.reshape(rows, [-1, width])

    def compute_output_shape(self, input_shapes):
        return (None, input_shapes[0][-1])


@keras.saving.register_keras_serializable(package="tfdqn")
class QuantileRows(keras.layers.Layer):
    """([batch * N, actions] rows, [batch, N] fractions) -> [batch, actions, N], the layout of every
    distributional head here."""

    def call(self, inputs):
        rows, fractions = inputs
        per_sample = tf.reshape(rows, [tf.shape(fractions)[0], tf.shape(fractions)[1], tf.shape(rows)[1]])
        return tf.transpose(per_sample, [0, 2, 1])

    def compute_output_shape(self, input_shapes):
        rows, fractions = input_shapes
        return (fractions[0], rows[-1], fractions[1])


def quantile_distribution(layer, features, fractions, dueling: bool):
    """[batch, actions, N]: the quantiles at `fractions` [batch, N], through the layers `layer(name)` gives: the
    network's own (`keras.Model.get_layer`), or new ones where the network is being made."""
    embedding = layer(EMBEDDING)(layer(COSINES)(fractions))
    x = layer(HIDDEN)(layer(MERGE)([features, embedding]))
    rows = DuelingCombine(dtype="float32")([layer("value")(x), layer("advantage")(x)]) if dueling else \
        layer("outputs")(x)
    return QuantileRows(name=DISTRIBUTION, dtype="float32")([rows, fractions])


def fraction_model(network: keras.Model) -> keras.Model:
    """The network's layers and variables as a model of [observation, fractions [batch, N]] -> [batch, actions, N],
    what IQN's loss reads at the fractions the learner samples."""
    features = network.get_layer(FRACTIONS).input
    fractions = keras.Input((None,), dtype="float32", name="sampled_fractions")
    names = {layer.name for layer in network.layers}
    distribution = quantile_distribution(network.get_layer, features, fractions, dueling="advantage" in names)
    return keras.Model([*network.inputs, fractions], distribution, name=f"{network.name}_{FRACTIONS}")
