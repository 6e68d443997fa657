"""make_agent inside a user's program: it leaves Keras's global dtype policy and the global random
states alone, and the same seed still gives the same initial weights."""

import random

import keras
import numpy as np
import tensorflow as tf

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent
from tfdqn.agent.networks import make_network


def _config(seed: int, **overrides):
    return config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"], {"run.seed": seed, **overrides})


def _weights(agent) -> list:
    return [w.copy() for w in agent.online.get_weights()]


def test_same_seed_same_weights_and_another_seed_other_weights():
    first, again, other = (make_agent(_config(seed), (4,), np.float32, 2) for seed in (3, 3, 4))
    assert all(np.array_equal(a, b) for a, b in zip(_weights(first), _weights(again)))
    assert not np.array_equal(_weights(first)[0], _weights(other)[0])


def test_the_seeded_weights_are_those_keras_drew_after_set_random_seed():
    """So runs keep the initial weights they had when make_agent seeded Keras globally (the golden
    episodes of tests/test_loop.py stay valid)."""
    for kind, shape, dtype in (("mlp", (4,), np.float32), ("nature_cnn", (4, 84, 84), np.uint8)):
        keras.utils.set_random_seed(11)
        global_way = make_network(kind, shape, dtype, 4, (64, 64)).get_weights()
        random.seed(0)
        seeded = make_network(kind, shape, dtype, 4, (64, 64), seed=11).get_weights()
        assert all(np.array_equal(a, b) for a, b in zip(global_way, seeded)), kind


def test_make_agent_leaves_the_global_policy_and_random_states_alone():
    random.seed(5)
    np.random.seed(5)
    python_state, numpy_state = random.getstate(), np.random.get_state()
    tf.random.set_seed(5)
    tf_draws = [float(tf.random.uniform([])) for _ in range(2)]
    tf.random.set_seed(5)
    assert float(tf.random.uniform([])) == tf_draws[0]
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        agent = make_agent(_config(0, **{"compute.mixed_precision": True}), (4,), np.float32, 2)
        assert keras.mixed_precision.global_policy().name == "mixed_float16"
        plain = make_agent(_config(0), (4,), np.float32, 2)
        assert keras.mixed_precision.global_policy().name == "mixed_float16"
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert random.getstate() == python_state
    numpy_after = np.random.get_state()
    assert numpy_after[0] == numpy_state[0] and np.array_equal(numpy_after[1], numpy_state[1])
    assert numpy_after[2:] == numpy_state[2:]
    assert float(tf.random.uniform([])) == tf_draws[1]  # TensorFlow's global seed stream goes on
    # Each agent computes in the config's precision, whatever the global policy said.
    assert [layer.compute_dtype for layer in agent.online.layers[1:]] == ["bfloat16", "bfloat16", "float32"]
    assert all(layer.compute_dtype == "float32" for layer in plain.online.layers[1:])
