"""FLOPs of the act and update programs, counted from the layer shapes (one multiply-add = 2 FLOPs).

Benchmarks divide measured calls/s by these counts to say how close a program runs to the machine's
matmul peak. Only convolutions and dense layers are counted: activations, the loss and the optimizer
add well under 1% for the networks here."""

import keras

from tfdqn.agent import implicit_quantile as iqn
from tfdqn.agent.noisy import NoisyDense


def layer_flops(model: keras.Model, fractions: int | None = None) -> list[int]:
    """Forward FLOPs per sample of each convolution and dense layer, input to output. IQN's head layers run once per
    fraction: `fractions` times, or the network's own K where not given."""
    per_fraction = set(iqn.PER_FRACTION) if iqn.FRACTIONS in {layer.name for layer in model.layers} else set()
    rows = fractions or (model.get_layer(iqn.FRACTIONS).count if per_fraction else 1)
    counts = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            out_h, out_w, filters = layer.output.shape[1:]
            kernel_h, kernel_w, channels_in, _ = layer.kernel.shape
            counts.append(2 * out_h * out_w * filters * kernel_h * kernel_w * channels_in)
        elif isinstance(layer, (keras.layers.Dense, NoisyDense)):
            kernel = layer.kernel_mu if isinstance(layer, NoisyDense) else layer.kernel
            counts.append(2 * kernel.shape[0] * kernel.shape[1] * (rows if layer.name in per_fraction else 1))
    return counts


def forward_flops(model: keras.Model, batch_size: int) -> int:
    """One forward pass over `batch_size` observations (what `act` costs)."""
    return batch_size * sum(layer_flops(model))


def update_flops(model: keras.Model, batch_size: int, double_dqn: bool, fractions: tuple = (None, None),
                 reads_target_now: bool = False) -> int:
    """One gradient update: the online forward on the observations; its backward pass (weight
    gradients for every layer, input gradients for all but the first); the target forward on the
    next observations; and, for double DQN, the online forward on them too, or with Munchausen's target
    (`reads_target_now`, which takes no next action) the target forward on the observations. IQN's `fractions`
    (N, N'): the online and target passes' fractions per sample."""
    online, target = layer_flops(model, fractions[0]), sum(layer_flops(model, fractions[1]))
    forward = sum(online)
    backward = forward + (forward - online[0])
    third = target if reads_target_now else sum(layer_flops(model)) if double_dqn else 0
    return batch_size * (forward + backward + target + third)
