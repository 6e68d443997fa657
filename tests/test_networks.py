import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdqn.agent.heads import HeadSpec
from tfdqn.agent.networks import Dense, image_cnn


def _pair(policy, activation="relu"):
    """tfdqn's Dense and Keras's, with the same weights, under a dtype policy."""
    keras.mixed_precision.set_global_policy(policy)
    try:
        ours, theirs = Dense(5, activation=activation, name="d"), keras.layers.Dense(5, activation=activation, name="d")
        ours.build((None, 7))
        theirs.build((None, 7))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=(7, 5)).astype(np.float32), rng.normal(size=5).astype(np.float32)]
    ours.set_weights(weights)
    theirs.set_weights(weights)
    return ours, theirs


@pytest.mark.parametrize("policy, tolerance", [("float32", 1e-6), ("mixed_bfloat16", 1e-2)])
@pytest.mark.parametrize("activation", ["relu", None])
def test_dense_gives_keras_dense_values_and_gradients(policy, tolerance, activation):
    ours, theirs = _pair(policy, activation)
    x = tf.constant(np.random.default_rng(1).normal(size=(6, 7)).astype(np.float32))
    results = []
    for layer in (ours, theirs):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * np.arange(30, dtype=np.float32).reshape(6, 5))
        results.append([y, *tape.gradient(loss, [x, *layer.trainable_variables])])
    assert results[0][0].dtype == results[1][0].dtype
    for a, b in zip(*results):
        np.testing.assert_allclose(np.float32(a), np.float32(b), rtol=tolerance, atol=tolerance)


def test_dense_reads_keras_dense_checkpoints(tmp_path):
    ours, theirs = _pair("float32")
    theirs.set_weights([w + 1 for w in theirs.get_weights()])
    path = tf.train.Checkpoint(layer=theirs).write(str(tmp_path / "keras_dense"))
    tf.train.Checkpoint(layer=ours).read(path).assert_consumed()
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert [v.path for v in ours.variables] == [v.path for v in theirs.variables] == ["d/kernel", "d/bias"]


def test_nature_cnn_takes_uint8_stacks_and_gives_float32_q_values():
    model = image_cnn("nature_cnn", (4, 84, 84), 6)
    q = model(np.zeros((3, 4, 84, 84), np.uint8))
    assert q.shape == (3, 6) and q.dtype == tf.float32
    conv = (8 * 8 * 4 + 1) * 32 + (4 * 4 * 32 + 1) * 64 + (3 * 3 * 64 + 1) * 64
    assert model.count_params() == conv + (7 * 7 * 64 + 1) * 512 + (512 + 1) * 6


def test_same_padding_is_dopamines_atari_100k_network():
    """jax/networks.py FullRainbowNetwork (Dopamine 5873f54): flax convolutions padded SAME, 84 -> 21 -> 11 -> 11,
    one shared dense 512, then dueling value and advantage layers."""
    model = image_cnn("nature_cnn", (4, 84, 84), 4, head=HeadSpec(dueling=True), padding="same")
    assert model(np.zeros((2, 4, 84, 84), np.uint8)).shape == (2, 4)
    flatten = next(layer for layer in model.layers if isinstance(layer, keras.layers.Flatten))
    assert flatten.output.shape == (None, 11 * 11 * 64)
    conv = (8 * 8 * 4 + 1) * 32 + (4 * 4 * 32 + 1) * 64 + (3 * 3 * 64 + 1) * 64
    assert model.count_params() == conv + (7_744 + 1) * 512 + (512 + 1) * (1 + 4)
    assert round(model.count_params() / 1e6, 2) == 4.05


def test_small_cnn_keeps_an_11x11_map_of_a_42x42_frame():
    model = image_cnn("small_cnn", (4, 42, 42), 6)
    q = model(np.zeros((3, 4, 42, 42), np.uint8))
    assert q.shape == (3, 6) and q.dtype == tf.float32
    assert model.layers[-2].input.shape == (None, 11 * 11 * 32)  # 'same' padding: 42 -> 21 -> 11
    conv = (4 * 4 * 4 + 1) * 16 + (4 * 4 * 16 + 1) * 32
    assert model.count_params() == conv + (11 * 11 * 32 + 1) * 256 + (256 + 1) * 6


@pytest.mark.parametrize("side, map_side", [(84, 11), (42, 6)])
def test_the_impala_network_is_three_residual_stacks_then_dopamines_dense_512(side, map_side):
    """Espeholt et al. 2018's encoder as Dopamine's ImpalaDQNNetwork runs it (jax/networks.py): stacks of 16, 32
    and 32 channels, each a 3x3 conv, a 3x3/2 max-pool ('same': 84 -> 42 -> 21 -> 11) and two residual blocks
    of two 3x3 convs; then relu, dense 512 and the head."""
    model = image_cnn("impala", (4, side, side), 6)
    frames = np.random.default_rng(0).integers(0, 256, (2, 4, side, side), dtype=np.uint8)
    assert model(frames).shape == (2, 6)
    flatten = next(layer for layer in model.layers if isinstance(layer, keras.layers.Flatten))
    assert flatten.output.shape == (None, map_side * map_side * 32)
    assert sum(isinstance(layer, keras.layers.Add) for layer in model.layers) == 6  # two blocks per stack
    conv = 0
    for before, channels in zip((4, 16, 32), (16, 32, 32)):  # the stack's first conv, then its blocks' four
        conv += (9 * before + 1) * channels + 4 * (9 * channels + 1) * channels
    assert model.count_params() == conv + (map_side * map_side * 32 + 1) * 512 + (512 + 1) * 6
    same = image_cnn("impala", (4, side, side), 6, seed=3), image_cnn("impala", (4, side, side), 6, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(*(m.get_weights() for m in same)))


def test_an_impala_policy_exports_and_loads_back_the_same_q_values(tmp_path):
    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent
    from tfdqn.envs.make import make_env
    from tfdqn.policy.saved_model import export_policy

    config = config_lib.resolve_config([], {"env.id": "Pong", "network.kind": "impala", "env.screen_size": 42})
    env, spec = make_env(config.env, seed=0)
    env.close()
    agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)
    export_policy(agent.online, config, spec, tmp_path / "policy", tmp_path, "latest", 0)
    frames = np.random.default_rng(1).integers(0, 256, (3, *spec.observation_shape), dtype=np.uint8)
    served = tf.saved_model.load(str(tmp_path / "policy")).signatures["serving_default"](observation=tf.constant(frames))
    np.testing.assert_allclose(served["q_values"].numpy(), agent.online(frames).numpy(), rtol=1e-5, atol=1e-5)
    loaded = keras.models.load_model(tmp_path / "policy" / "network.keras")
    np.testing.assert_allclose(loaded(frames).numpy(), agent.online(frames).numpy(), rtol=1e-5, atol=1e-5)
