"""The Q-network's head: the layers after the body, and what turns their output into Q-values.

A head is plain or dueling (Wang et al. 2016), with ordinary or noisy layers (Fortunato et al. 2018), and
returns one value per action or a distribution per action: the logits of C51's atoms (Bellemare et al.
2017) or QR-DQN's quantiles (Dabney et al. 2018). The network's output is always the expected Q
[batch, actions], so acting, evaluation and the export read any head alike; the learner reads the
distribution through `distribution_model`.
"""

from __future__ import annotations

from typing import NamedTuple

import keras

from tfdqn.agent import losses

DISTRIBUTION = "distribution"  # the layer whose output the loss reads, where it differs from the Q-values
Q_VALUES = "q_values"  # the network's output layer: the expected Q of any head


class HeadSpec(NamedTuple):
    """What `make_network` builds after the body. `outputs` per action: 1 (Q), atoms or quantiles."""

    dueling: bool = False
    noisy: bool = False
    sigma0: float = 0.5
    loss: str = "huber"
    outputs: int = 1
    v_min: float = -10.0
    v_max: float = 10.0
    noise_seed: int | None = None
    embedding_cosines: int = 64  # implicit_quantile: the cosines embedding each fraction
    hold_acting_noise: bool = False  # noisy: the network acts with noise redrawn after each update


def head_spec(network_config, learner_config, noise_seed: int | None = None, acts: bool = False) -> HeadSpec:
    """The head a config asks for (`network.dueling`, `network.noisy`, `learner.loss`); IQN's outputs are the K
    fractions its Q averages (`learner.num_quantile_samples`). `acts`: the network the trainer acts with, whose
    noisy layers hold their acting noise between updates under `network.noise_refresh: update`."""
    l = learner_config  # noqa: E741
    outputs = {"huber": 1, "categorical": l.num_atoms, "quantile": l.num_quantiles,
               "implicit_quantile": l.num_quantile_samples}
    return HeadSpec(network_config.dueling, network_config.noisy, network_config.noisy_sigma0, l.loss,
                    outputs[l.loss], l.v_min, l.v_max, noise_seed, l.quantile_embedding_dim,
                    acts and network_config.noisy and network_config.noise_refresh == "update")


@keras.saving.register_keras_serializable(package="tfdqn")
class DuelingCombine(keras.layers.Layer):
    """Q = V + A - mean_a A (Wang et al. 2016, eq. 9), per atom or quantile for a distributional head."""

    def call(self, inputs):
        value, advantage = inputs
        return value + advantage - keras.ops.mean(advantage, axis=1, keepdims=True)


@keras.saving.register_keras_serializable(package="tfdqn")
class ExpectedQ(keras.layers.Layer):
    """[batch, actions, outputs] -> [batch, actions]: the mean over C51's atoms (softmax of the logits
    times the support) or over QR-DQN's or IQN's quantiles."""

    def __init__(self, loss: str, num_atoms: int, v_min: float, v_max: float, **kwargs):
        super().__init__(**kwargs)
        self.loss, self.num_atoms, self.v_min, self.v_max = loss, num_atoms, v_min, v_max

    def call(self, distribution):
        if self.loss == "categorical":
            return losses.categorical_q(distribution, losses.categorical_support(self.num_atoms, self.v_min, self.v_max))
        return losses.quantile_q(distribution)

    def get_config(self):
        return {**super().get_config(), "loss": self.loss, "num_atoms": self.num_atoms, "v_min": self.v_min,
                "v_max": self.v_max}


def q_values_of(network: keras.Model, output):
    """The Q-values of `output`, what `distribution_model(network)` returned: a distributional head's
    output goes through the network's own `ExpectedQ` layer; the others' is the Q-values already."""
    return network.get_layer(Q_VALUES)(output) if output.shape.rank == 3 else output


def distribution_model(network: keras.Model) -> keras.Model:
    """The same layers and variables, returning what the loss reads: the distribution of a C51 or QR head,
    the Q-values of the others."""
    names = {layer.name for layer in network.layers}
    if DISTRIBUTION not in names:
        return network
    return keras.Model(network.inputs, network.get_layer(DISTRIBUTION).output, name=f"{network.name}_distribution")
