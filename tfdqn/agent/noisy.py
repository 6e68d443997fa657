"""Factorised Gaussian noisy linear layer (Fortunato et al. 2018, "Noisy Networks for Exploration").

Exploration comes from learned noise on the weights instead of epsilon-greedy. The noise stream lives in
a `keras.random.SeedGenerator` whose state variable a tf.train.Checkpoint holds (as "noise_state"), so a
resumed run continues the same stream. That state is in `layer.variables` but not in `layer.weights`, so
syncing a target network from the online one through `weights` leaves each network its own noise stream."""

import math
import random

import keras
import tensorflow as tf

from tfdqn.agent.layers import KERAS_SEED_RANGE, matmul


def _scale_noise(x):
    """f(x) = sign(x) sqrt(|x|), the paper's factorised-noise transform."""
    return keras.ops.sign(x) * keras.ops.sqrt(keras.ops.abs(x))


@keras.saving.register_keras_serializable(package="tfdqn")
class NoisyDense(keras.layers.Layer):
    """y = x @ (mu + sigma * outer(f(eps_in), f(eps_out))) + mu_b + sigma_b * f(eps_out), eps ~ N(0, 1).

    Fresh noise on every call with a truthy `training` (also each call inside one traced graph); with
    training falsy (evaluation, export) only the means mu, mu_b, as Dopamine's and Rainbow's evaluation.
    Inputs are 2-D [batch, p]. Variables are float32; the output is in the policy's compute dtype.

    `seed`: same seed, same initial weights (None: drawn as Keras draws unseeded ones). `noise_seed`:
    same seed, same noise sequence (None: Keras draws one from Python's `random`)."""

    def __init__(self, units: int, activation=None, sigma0: float = 0.5, seed: int | None = None,
                 noise_seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.activation = keras.activations.get(activation)
        self.sigma0 = sigma0
        self.seed = seed
        self.noise_seed = noise_seed
        self.seed_generator = keras.random.SeedGenerator(noise_seed)

    def build(self, input_shape):
        p = int(input_shape[-1])
        bound, sigma = 1.0 / math.sqrt(p), self.sigma0 / math.sqrt(p)
        seeds = random.Random(self.seed) if self.seed is not None else None

        def mu_initializer():
            init_seed = seeds.randint(*KERAS_SEED_RANGE) if seeds is not None else None
            return keras.initializers.RandomUniform(-bound, bound, seed=init_seed)

        self.kernel_mu = self.add_weight(name="kernel_mu", shape=(p, self.units), initializer=mu_initializer())
        self.kernel_sigma = self.add_weight(name="kernel_sigma", shape=(p, self.units),
                                            initializer=keras.initializers.Constant(sigma))
        self.bias_mu = self.add_weight(name="bias_mu", shape=(self.units,), initializer=mu_initializer())
        self.bias_sigma = self.add_weight(name="bias_sigma", shape=(self.units,),
                                          initializer=keras.initializers.Constant(sigma))

    def call(self, inputs, training=None):
        kernel, bias = self.kernel_mu, self.bias_mu
        if training:
            dtype = self.variable_dtype
            f_in = _scale_noise(keras.random.normal(self.kernel_mu.shape[:1], dtype=dtype, seed=self.seed_generator))
            f_out = _scale_noise(keras.random.normal((self.units,), dtype=dtype, seed=self.seed_generator))
            kernel = kernel + self.kernel_sigma * keras.ops.outer(f_in, f_out)
            bias = bias + self.bias_sigma * f_out
        x = matmul(inputs, tf.cast(kernel, self.compute_dtype))
        x = keras.ops.add(x, tf.cast(bias, self.compute_dtype))
        return self.activation(x)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.units)

    def _trackable_children(self, save_type="checkpoint", **kwargs):
        # Keras tracks a SeedGenerator's state for `variables` only, not as a tf.train.Checkpoint dependency.
        return {**super()._trackable_children(save_type, **kwargs), "noise_state": self.seed_generator.state}

    def get_config(self):
        return {**super().get_config(), "units": self.units, "activation": keras.activations.serialize(self.activation),
                "sigma0": self.sigma0, "seed": self.seed, "noise_seed": self.noise_seed}
