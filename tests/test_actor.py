import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdqn.agent.actor import Actor
from tfdqn.config import ExplorationConfig


def _known_model(num_actions=3):
    """Linear Q = x @ W with W chosen so that the greedy action is always 2 for positive inputs."""
    inputs = keras.Input((4,), dtype="float32")
    layer = keras.layers.Dense(num_actions, use_bias=False)
    model = keras.Model(inputs, layer(inputs))
    layer.set_weights([np.tile(np.array([[0.0, 1.0, 5.0]], np.float32), (4, 1))])
    return model


def _actor(epsilon_start, epsilon_end, decay, seed=0):
    exploration = ExplorationConfig(epsilon_start=epsilon_start, epsilon_end=epsilon_end,
                                    epsilon_decay_steps=decay)
    return Actor(_known_model(), 3, exploration, (4,), np.float32, seed=seed)


def test_act_reads_epsilon_from_the_step_counter_and_never_moves_it():
    """Acting reads the schedule at the counter's step; only the loop advances the counter. With
    epsilon 1 before step 100 and 0 after, act explores fully then acts greedily (action 2)."""
    actor = _actor(1.0, 0.0, 100)
    observation = np.ones((2000, 4), np.float32)
    assert np.mean(actor.act(observation).numpy() != 2) == pytest.approx(2 / 3, abs=0.04)
    assert int(actor.env_steps.numpy()) == 0
    seen = []
    for t in range(150):
        actor.env_steps.assign(t)
        seen.append(float(actor.epsilon()))
    reference = [1.0 + min(t / 100, 1.0) * (0.0 - 1.0) for t in range(150)]
    np.testing.assert_allclose(seen, reference, atol=1e-6)
    assert (actor.act(observation).numpy() == 2).all() and int(actor.env_steps.numpy()) == 149


@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0])
def test_empirical_random_action_rate(epsilon):
    actor = _actor(epsilon, epsilon, 1, seed=1)
    observation = np.ones((4000, 4), np.float32)
    actions = actor.act(observation).numpy()
    non_greedy = np.mean(actions != 2)
    # A random action equals the greedy one with probability 1/3, so the non-greedy rate is 2/3 epsilon.
    assert non_greedy == pytest.approx(epsilon * 2 / 3, abs=0.03)
    if epsilon == 1.0:
        assert np.bincount(actions, minlength=3) / len(actions) == pytest.approx([1 / 3] * 3, abs=0.03)


def test_greedy_evaluation_leaves_training_step_alone():
    actor = _actor(1.0, 1.0, 1)
    actions = actor.act_with_epsilon(np.ones((100, 4), np.float32), tf.constant(0.0)).numpy()
    assert (actions == 2).all() and int(actor.env_steps.numpy()) == 0


def test_same_seed_same_actions_and_one_trace_each():
    a, b = _actor(0.5, 0.5, 1, seed=4), _actor(0.5, 0.5, 1, seed=4)
    for batch in (1, 8, 1, 3) * 25:
        observation = np.random.default_rng(batch).normal(size=(batch, 4)).astype(np.float32)
        np.testing.assert_array_equal(a.act(observation).numpy(), b.act(observation).numpy())
        np.testing.assert_array_equal(a.act_with_epsilon(observation, tf.constant(0.05)).numpy(),
                                      b.act_with_epsilon(observation, tf.constant(0.05)).numpy())
    assert a.act_function.experimental_get_tracing_count() == 1
    assert a.act_with_epsilon_function.experimental_get_tracing_count() == 1


def test_flat_call_matches_the_concrete_function_call():
    """The fast call path gives the same actions and leaves the same RNG state and step counter."""
    a, b = _actor(0.5, 0.5, 1, seed=7), _actor(0.5, 0.5, 1, seed=7)
    observation = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    for _ in range(5):
        np.testing.assert_array_equal(a.act(observation).numpy(), b.act.concrete(observation).numpy())
        np.testing.assert_array_equal(a.act_with_epsilon(observation, 0.3).numpy(),
                                      b.act_with_epsilon.concrete(observation, tf.constant(0.3)).numpy())
    np.testing.assert_array_equal(a.generator.state.numpy(), b.generator.state.numpy())
    assert int(a.env_steps.numpy()) == int(b.env_steps.numpy()) == 0


@pytest.mark.parametrize("observation", [np.ones((2, 5), np.float32), np.ones((2, 4), np.float64),
                                         np.ones(4, np.float32)])
def test_flat_call_refuses_a_wrong_shape_or_dtype_by_name(observation):
    actor = _actor(0.5, 0.5, 1)
    with pytest.raises(ValueError, match=r"allowed is float32 \[None, 4\]"):
        actor.act(observation)
    assert int(actor.env_steps.numpy()) == 0
