"""Q-networks. Image inputs stay uint8 until inside the model, so the replay can store bytes.

Every layer takes its dtype policy and its initializer's seed from the caller, never from Keras's
process-global policy or random state, so building a network changes nothing in the user's program."""

import random

import keras
import tensorflow as tf

# An unseeded Keras initializer draws its seed as randint(1, 10**9) from Python's global `random`; the
# same draw from a `random.Random(seed)` gives the weights that keras.utils.set_random_seed(seed) gave.
_KERAS_SEED_RANGE = (1, 10**9)


@tf.custom_gradient
def _matmul(x, kernel):
    """x @ kernel, whose input gradient is one BatchMatMul with the kernel read transposed in place.

    TensorFlow's MatMul gradient computes it as a MatMul with transpose_b, which oneDNN runs much slower
    on CPU (the Nature CNN's 3136x512 layer, and so the whole float32 update; bfloat16 is unchanged).
    Inputs are 2-D, as both networks feed their dense layers. (docs/performance.md has the timings.)"""
    def gradient(dy):
        return tf.raw_ops.BatchMatMulV2(x=dy, y=kernel, adj_y=True), tf.matmul(x, dy, transpose_a=True)
    return tf.matmul(x, kernel), gradient


@keras.saving.register_keras_serializable(package="tfdqn")
class Dense(keras.layers.Dense):
    """Keras's Dense (same weights, names and checkpoints) with `_matmul`'s faster input gradient.

    Registered as "tfdqn>Dense" when this module is imported, which `keras.models.load_model` needs to read
    a saved network; its constructor and `get_config` are Keras's own, so the config round-trips."""

    def call(self, inputs, training=None):
        x = _matmul(inputs, tf.cast(self.kernel, self.compute_dtype))
        if self.bias is not None:
            x = keras.ops.add(x, self.bias)
        return self.activation(x) if self.activation is not None else x


class _Layers:
    """Makes layers with one dtype policy and, where `seed` is given, initializers seeded in making
    order from it (None: Keras's own unseeded initializers)."""

    def __init__(self, dtype_policy: str, seed: int | None):
        self.dtype_policy = dtype_policy
        self._seeds = random.Random(seed) if seed is not None else None

    def _kernel_initializer(self):
        if self._seeds is None:
            return "glorot_uniform"
        return keras.initializers.GlorotUniform(seed=self._seeds.randint(*_KERAS_SEED_RANGE))

    def dense(self, units: int, **kwargs) -> Dense:
        return Dense(units, kernel_initializer=self._kernel_initializer(), **{"dtype": self.dtype_policy, **kwargs})

    def conv(self, filters: int, size: int, strides: int) -> keras.layers.Conv2D:
        return keras.layers.Conv2D(filters, size, strides=strides, activation="relu", dtype=self.dtype_policy,
                                   kernel_initializer=self._kernel_initializer())


def mlp(observation_shape: tuple, num_actions: int, hidden_sizes: tuple, dtype_policy: str = "float32",
        seed: int | None = None) -> keras.Model:
    """Fully connected Q-network for vector observations (CartPole, Acrobot, ...)."""
    layers = _Layers(dtype_policy, seed)
    inputs = keras.Input(observation_shape, dtype="float32", name="observation")
    x = keras.layers.Flatten(dtype=layers.dtype_policy)(inputs) if len(observation_shape) > 1 else inputs
    for units in hidden_sizes:
        x = layers.dense(units, activation="relu")(x)
    outputs = layers.dense(num_actions, name="q_values", dtype="float32")(x)  # float32 under mixed precision
    return keras.Model(inputs, outputs, name="mlp", dtype=layers.dtype_policy)


def nature_cnn(observation_shape: tuple, num_actions: int, dtype_policy: str = "float32",
               seed: int | None = None) -> keras.Model:
    """The Nature DQN (Mnih et al. 2015): conv 32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512.

    Input is a uint8 stack [stack, height, width]; it is moved to channels-last (the layout CPU
    convolutions support) and scaled to [0, 1] inside the graph."""
    layers, policy = _Layers(dtype_policy, seed), dtype_policy
    inputs = keras.Input(observation_shape, dtype="uint8", name="observation")
    x = keras.layers.Rescaling(1.0 / 255.0, dtype=policy)(keras.ops.cast(inputs, "float32"))
    x = keras.layers.Permute((2, 3, 1), dtype=policy)(x) if len(observation_shape) == 3 else x[..., None]
    x = layers.conv(32, 8, strides=4)(x)
    x = layers.conv(64, 4, strides=2)(x)
    x = layers.conv(64, 3, strides=1)(x)
    x = keras.layers.Flatten(dtype=policy)(x)
    x = layers.dense(512, activation="relu")(x)
    outputs = layers.dense(num_actions, name="q_values", dtype="float32")(x)  # float32 under mixed precision
    return keras.Model(inputs, outputs, name="nature_cnn", dtype=policy)


def make_network(kind: str, observation_shape: tuple, observation_dtype, num_actions: int,
                 hidden_sizes: tuple, dtype_policy: str = "float32", seed: int | None = None) -> keras.Model:
    """`auto` picks the Nature CNN for uint8 image observations and the MLP otherwise.

    `dtype_policy`: every layer's ("mixed_bfloat16": bfloat16 compute with float32 weights; the Q-values
    stay float32). `seed`: same seed, same initial weights (None: drawn as Keras draws unseeded ones)."""
    if kind == "auto":
        kind = "nature_cnn" if str(observation_dtype) == "uint8" else "mlp"
    if kind == "nature_cnn":
        return nature_cnn(observation_shape, num_actions, dtype_policy, seed)
    return mlp(observation_shape, num_actions, hidden_sizes, dtype_policy, seed)
