"""FLOPs of the act and update programs, counted from the layer shapes (one multiply-add = 2 FLOPs).

Benchmarks divide measured calls/s by these counts to say how close a program runs to the machine's
matmul peak. Only convolutions and dense layers are counted: activations, the loss and the optimizer
add well under 1% for the networks here."""

import keras

from tfdqn.agent.noisy import NoisyDense


def layer_flops(model: keras.Model) -> list[int]:
    """Forward FLOPs per sample of each convolution and dense layer, input to output."""
    counts = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            out_h, out_w, filters = layer.output.shape[1:]
            kernel_h, kernel_w, channels_in, _ = layer.kernel.shape
            counts.append(2 * out_h * out_w * filters * kernel_h * kernel_w * channels_in)
        elif isinstance(layer, keras.layers.Dense):
            counts.append(2 * layer.kernel.shape[0] * layer.kernel.shape[1])
        elif isinstance(layer, NoisyDense):
            counts.append(2 * layer.kernel_mu.shape[0] * layer.kernel_mu.shape[1])
    return counts


def forward_flops(model: keras.Model, batch_size: int) -> int:
    """One forward pass over `batch_size` observations (what `act` costs)."""
    return batch_size * sum(layer_flops(model))


def update_flops(model: keras.Model, batch_size: int, double_dqn: bool) -> int:
    """One gradient update: the online forward on the observations; its backward pass (weight
    gradients for every layer, input gradients for all but the first); the target forward on the
    next observations; and, for double DQN, the online forward on them too."""
    layers = layer_flops(model)
    forward = sum(layers)
    backward = forward + (forward - layers[0])
    next_forwards = 2 if double_dqn else 1
    return batch_size * (forward + backward + next_forwards * forward)
