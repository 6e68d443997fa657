"""Factorised Gaussian noisy linear layer (Fortunato et al. 2018, "Noisy Networks for Exploration").

Exploration comes from learned noise on the weights instead of epsilon-greedy. The noise stream lives in
a `keras.random.SeedGenerator` whose state variable a tf.train.Checkpoint holds (as "noise_state"), so a
resumed run continues the same stream. That state is in `layer.variables` but not in `layer.weights`, so
syncing a target network from the online one through `weights` leaves each network its own noise stream.

A layer made with `hold_acting_noise` keeps a second noise draw for acting (`network.noise_refresh: update`),
also in `layer.variables` and not in `layer.weights`: graphs traced inside `acting_noise()` (the actor's act)
read it instead of drawing, and the learner redraws it after every update (`redraw_acting_noise`; during the
warm-up where updates would fall, `run.drivers.WarmupNoise`), as Fortunato et al. 2018 (section 3.1) sample
new noise after every optimisation step and act with it until the next."""

import contextlib
import math
import random
import threading

import keras
import tensorflow as tf

from tfdqn.agent.layers import KERAS_SEED_RANGE, matmul


def _scale_noise(x):
    """f(x) = sign(x) sqrt(|x|), the paper's factorised-noise transform."""
    return keras.ops.sign(x) * keras.ops.sqrt(keras.ops.abs(x))


def _normal(n: int, generator: keras.random.SeedGenerator, dtype) -> tf.Tensor:
    """n draws of N(0, 1) from the generator's next seed, with Philox named. `keras.random.normal` leaves the
    algorithm to TensorFlow ("auto_select"), which XLA on CPU lowers to a generator that took longer than
    a whole plain batch-1 act call (docs/experiments/performance.md). The seed is cast as Keras casts it."""
    seed = tf.cast(tf.math.floormod(generator.next(), tf.int32.max - 1), tf.int32)
    return tf.random.stateless_normal((n,), seed=seed, dtype=dtype, alg="philox")


_tracing = threading.local()  # set while the actor traces its act graph (tracing runs in the caller's thread)


@contextlib.contextmanager
def acting_noise():
    """Noisy layers that hold acting noise read it, instead of drawing, in the graphs traced inside this."""
    previous, _tracing.acting = getattr(_tracing, "acting", False), True
    try:
        yield
    finally:
        _tracing.acting = previous


def holding_layers(model: keras.Model) -> list:
    """The noisy layers of `model` that hold acting noise (none unless `network.noise_refresh: update`)."""
    return [layer for layer in model.layers if isinstance(layer, NoisyDense) and layer.hold_acting_noise]


@keras.saving.register_keras_serializable(package="tfdqn")
class NoisyDense(keras.layers.Layer):
    """y = x @ (mu + sigma * outer(f(eps_in), f(eps_out))) + mu_b + sigma_b * f(eps_out), eps ~ N(0, 1).

    Computed as (x @ mu + mu_b) + ((x * f(eps_in)) @ sigma + sigma_b) * f(eps_out), the same sum without the
    p x units noisy weight matrix: forming it on every call cost a batch-1 act call several times the plain
    network's (docs/experiments/performance.md). Outputs agree with the matrix form to float rounding.

    Fresh noise on every call with a truthy `training` (also each call inside one traced graph), except in
    a graph traced inside `acting_noise()` by a layer made with `hold_acting_noise`: that reads the noise
    `redraw_acting_noise` last drew. With training falsy (evaluation, export) only the means mu, mu_b, as
    Dopamine's and Rainbow's evaluation.
    Inputs are 2-D [batch, p]. Variables are float32; the output is in the policy's compute dtype.

    `seed`: same seed, same initial weights (None: drawn as Keras draws unseeded ones). `noise_seed`:
    same seed, same noise sequence (None: Keras draws one from Python's `random`)."""

    def __init__(self, units: int, activation=None, sigma0: float = 0.5, seed: int | None = None,
                 noise_seed: int | None = None, hold_acting_noise: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.hold_acting_noise = hold_acting_noise
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
        if self.hold_acting_noise:  # a tf.Variable, not a Keras weight: checkpointed, never synced to a copy
            self.acting_noise = tf.Variable(self._draw(), trainable=False, name="acting_noise")

    @property
    def variables(self) -> list:
        """Keras's (the weights and the noise stream's state) and the held acting noise: all the layer's state,
        as a model's `variables` gathers it (the run's update probe puts back what it holds)."""
        return [*super().variables, *([self.acting_noise] if self.hold_acting_noise and self.built else [])]

    def _draw(self) -> tf.Tensor:
        """f(eps_in) and f(eps_out), concatenated: one factorised draw from this layer's stream."""
        return _scale_noise(_normal(self.kernel_mu.shape[0] + self.units, self.seed_generator, self.variable_dtype))

    def redraw_acting_noise(self) -> None:
        self.acting_noise.assign(self._draw())

    def call(self, inputs, training=None):
        dtype = self.compute_dtype
        # tf.add, not keras.ops.add: Keras makes a bias add a BiasAdd, and Grappler's remapper then rewrites
        # MatMul + BiasAdd + Add + Relu into a graph that TensorFlow 2.21's TFG passes reject (an error
        # logged for every traced update). Under XLA the two are the same add.
        x = tf.add(matmul(inputs, tf.cast(self.kernel_mu, dtype)), tf.cast(self.bias_mu, dtype))
        if training:
            p = self.kernel_mu.shape[0]
            held = self.hold_acting_noise and getattr(_tracing, "acting", False)
            f = self.acting_noise.read_value() if held else self._draw()  # f(eps_in), f(eps_out)
            f_in, f_out = tf.cast(f[:p], dtype), tf.cast(f[p:], dtype)
            # The bias noise shares f(eps_out) with the product's: each product then ends in its bias add,
            # which XLA on CPU fuses into the product at batch 1 (docs/experiments/performance.md).
            noisy = tf.add(matmul(inputs * f_in, tf.cast(self.kernel_sigma, dtype)), tf.cast(self.bias_sigma, dtype))
            x = tf.add(x, noisy * f_out)
        return self.activation(x)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.units)

    def _trackable_children(self, save_type="checkpoint", **kwargs):
        # Keras tracks a SeedGenerator's state for `variables` only, not as a tf.train.Checkpoint dependency.
        # (`acting_noise`, a tf.Variable attribute, is tracked as a dependency already.)
        return {**super()._trackable_children(save_type, **kwargs), "noise_state": self.seed_generator.state}

    def get_config(self):
        return {**super().get_config(), "units": self.units, "activation": keras.activations.serialize(self.activation),
                "sigma0": self.sigma0, "seed": self.seed, "noise_seed": self.noise_seed,
                "hold_acting_noise": self.hold_acting_noise}
