"""tfdqn's dense layer: Keras's own, with a faster input gradient on CPU, shared by plain and noisy layers."""

import keras
import tensorflow as tf

# An unseeded Keras initializer draws its seed as randint(1, 10**9) from Python's global `random`; the
# same draw from a `random.Random(seed)` gives the weights that keras.utils.set_random_seed(seed) gave.
KERAS_SEED_RANGE = (1, 10**9)


@tf.custom_gradient
def matmul(x, kernel):
    """x @ kernel, whose input gradient is one BatchMatMul with the kernel read transposed in place.

    TensorFlow's MatMul gradient computes it as a MatMul with transpose_b, which oneDNN runs much slower
    on CPU (the Nature CNN's 3136x512 layer, and so the whole float32 update; bfloat16 is unchanged).
    Inputs are 2-D, as both networks feed their dense layers. (docs/experiments/performance.md has the timings.)"""
    def gradient(dy):
        return tf.raw_ops.BatchMatMulV2(x=dy, y=kernel, adj_y=True), tf.matmul(x, dy, transpose_a=True)
    return tf.matmul(x, kernel), gradient


@keras.saving.register_keras_serializable(package="tfdqn")
class Dense(keras.layers.Dense):
    """Keras's Dense (same weights, names and checkpoints) with `matmul`'s faster input gradient.

    Registered as "tfdqn>Dense" when this module is imported, which `keras.models.load_model` needs to read
    a saved network; its constructor and `get_config` are Keras's own, so the config round-trips."""

    def call(self, inputs, training=None):
        x = matmul(inputs, tf.cast(self.kernel, self.compute_dtype))
        if self.bias is not None:
            x = keras.ops.add(x, self.bias)
        return self.activation(x) if self.activation is not None else x
