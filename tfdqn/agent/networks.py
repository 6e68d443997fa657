"""Q-networks. Image inputs stay uint8 until inside the model, so the replay can store bytes."""

import keras
import tensorflow as tf


@tf.custom_gradient
def _matmul(x, kernel):
    """x @ kernel, whose input gradient is one BatchMatMul with the kernel read transposed in place.

    TensorFlow's MatMul gradient computes it as a MatMul with transpose_b, which oneDNN runs at a third
    of the speed on CPU: for the Nature CNN's 3136x512 layer at batch 32, 2.2 ms against 0.95 ms, and
    the whole float32 update goes from 44 to 48 per s (side by side on 2 cores; bfloat16 is unchanged).
    Inputs are 2-D, as both networks feed their dense layers."""
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


def mlp(observation_shape: tuple, num_actions: int, hidden_sizes: tuple) -> keras.Model:
    """Fully connected Q-network for vector observations (CartPole, Acrobot, ...)."""
    inputs = keras.Input(observation_shape, dtype="float32", name="observation")
    x = keras.layers.Flatten()(inputs) if len(observation_shape) > 1 else inputs
    for units in hidden_sizes:
        x = Dense(units, activation="relu")(x)
    outputs = Dense(num_actions, name="q_values", dtype="float32")(x)  # float32 under mixed precision
    return keras.Model(inputs, outputs, name="mlp")


def nature_cnn(observation_shape: tuple, num_actions: int) -> keras.Model:
    """The Nature DQN (Mnih et al. 2015): conv 32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512.

    Input is a uint8 stack [stack, height, width]; it is moved to channels-last (the layout CPU
    convolutions support) and scaled to [0, 1] inside the graph."""
    inputs = keras.Input(observation_shape, dtype="uint8", name="observation")
    x = keras.layers.Rescaling(1.0 / 255.0)(keras.ops.cast(inputs, "float32"))
    x = keras.layers.Permute((2, 3, 1))(x) if len(observation_shape) == 3 else x[..., None]
    x = keras.layers.Conv2D(32, 8, strides=4, activation="relu")(x)
    x = keras.layers.Conv2D(64, 4, strides=2, activation="relu")(x)
    x = keras.layers.Conv2D(64, 3, strides=1, activation="relu")(x)
    x = keras.layers.Flatten()(x)
    x = Dense(512, activation="relu")(x)
    outputs = Dense(num_actions, name="q_values", dtype="float32")(x)  # float32 under mixed precision
    return keras.Model(inputs, outputs, name="nature_cnn")


def make_network(kind: str, observation_shape: tuple, observation_dtype, num_actions: int,
                 hidden_sizes: tuple) -> keras.Model:
    """`auto` picks the Nature CNN for uint8 image observations and the MLP otherwise."""
    if kind == "auto":
        kind = "nature_cnn" if str(observation_dtype) == "uint8" else "mlp"
    if kind == "nature_cnn":
        return nature_cnn(observation_shape, num_actions)
    return mlp(observation_shape, num_actions, hidden_sizes)
