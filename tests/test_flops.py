import keras
import numpy as np

from tfdqn.telemetry.flops import forward_flops, layer_flops, update_flops
from tfdqn.agent.networks import image_cnn, mlp


def test_nature_cnn_flops_follow_the_layer_shapes():
    """Hand count: conv1 20x20 outputs x 32 filters x 8x8x4 taps, conv2 9x9x64 x 4x4x32, conv3 7x7x64 x
    3x3x64, dense 3136x512 and 512x4; two FLOPs per multiply-add."""
    expected = [2 * 20 * 20 * 32 * 8 * 8 * 4, 2 * 9 * 9 * 64 * 4 * 4 * 32, 2 * 7 * 7 * 64 * 3 * 3 * 64,
                2 * 3136 * 512, 2 * 512 * 4]
    model = image_cnn("nature_cnn", (4, 84, 84), 4)
    assert layer_flops(model) == expected
    assert forward_flops(model, 8) == 8 * sum(expected)
    forward = sum(expected)
    assert update_flops(model, 32, double_dqn=True) == 32 * (4 * forward + forward - expected[0])
    assert update_flops(model, 32, double_dqn=False) == 32 * (3 * forward + forward - expected[0])


def test_mlp_flops_match_its_weight_count():
    model = mlp((4,), 2, (256, 256))
    weights = sum(int(np.prod(w.shape)) for w in model.weights if len(w.shape) == 2)
    assert forward_flops(model, 1) == 2 * weights
    assert isinstance(model.layers[-1], keras.layers.Dense)


def test_iqn_head_layers_count_once_per_fraction():
    """The Nature CNN's convolutions once per sample; the embedding (64 cosines to 3,136), the dense 512 and the
    outputs once per fraction: K = 32 when acting, N = N' = 64 in the update's online and target passes."""
    from tfdqn.agent.heads import HeadSpec

    model = image_cnn("nature_cnn", (4, 84, 84), 4, head=HeadSpec(loss="implicit_quantile", outputs=32))
    conv = [2 * 20 * 20 * 32 * 8 * 8 * 4, 2 * 9 * 9 * 64 * 4 * 4 * 32, 2 * 7 * 7 * 64 * 3 * 3 * 64]
    head = [2 * 64 * 3136, 2 * 3136 * 512, 2 * 512 * 4]
    assert layer_flops(model) == conv + [32 * count for count in head]
    assert layer_flops(model, 64) == conv + [64 * count for count in head]
    forward_64, forward_32 = sum(conv) + 64 * sum(head), sum(conv) + 32 * sum(head)
    assert update_flops(model, 32, double_dqn=True, fractions=(64, 64)) == \
        32 * (3 * forward_64 - conv[0] + forward_64 + forward_32)
    assert update_flops(model, 32, double_dqn=False, fractions=(64, 64), reads_target_now=True) == \
        32 * (3 * forward_64 - conv[0] + 2 * forward_64)
