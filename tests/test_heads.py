"""Heads and their losses: dueling, noisy, C51 and QR-DQN against NumPy references, the expected Q that
acting and the export read, noise per call and per network, and an export round trip of a C51 head."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.test_losses import np_projection, np_quantile_loss, np_softmax
from tfdqn import config as config_lib
from tfdqn.agent import noisy
from tfdqn.agent.agent import make_agent
from tfdqn.agent.heads import HeadSpec, distribution_model
from tfdqn.agent.networks import make_network
from tfdqn.agent.objectives import CategoricalObjective, QuantileObjective
from tfdqn.envs.make import make_env
from tfdqn.policy.saved_model import export_policy

OBSERVATION = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)


def _network(**head):
    return make_network("mlp", (4,), "float32", 3, (16, 16), seed=1, head=HeadSpec(**head))


def _outputs(network, *names):
    return keras.Model(network.inputs, [network.get_layer(name).output for name in names])(OBSERVATION)


def test_dueling_q_is_value_plus_advantage_minus_its_mean():
    network = _network(dueling=True)
    value, advantage = (x.numpy() for x in _outputs(network, "value", "advantage"))
    expected = value + advantage - advantage.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(network(OBSERVATION).numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dueling", [False, True])
def test_a_c51_head_acts_on_the_expected_value_of_its_atoms(dueling):
    network = _network(dueling=dueling, loss="categorical", outputs=11, v_min=-2.0, v_max=3.0)
    logits = distribution_model(network)(OBSERVATION).numpy()
    assert logits.shape == (6, 3, 11)
    expected = (np_softmax(logits) * np.linspace(-2.0, 3.0, 11)).sum(axis=-1)
    np.testing.assert_allclose(network(OBSERVATION).numpy(), expected, rtol=1e-5, atol=1e-6)
    if dueling:  # the streams combine per atom
        value, advantage = (x.numpy().reshape(6, -1, 11) for x in _outputs(network, "value", "advantage"))
        np.testing.assert_allclose(logits, value + advantage - advantage.mean(axis=1, keepdims=True), rtol=1e-5,
                                   atol=1e-6)


def test_a_qr_head_acts_on_the_mean_of_its_quantiles():
    network = _network(loss="quantile", outputs=7)
    quantiles = distribution_model(network)(OBSERVATION).numpy()
    np.testing.assert_allclose(network(OBSERVATION).numpy(), quantiles.mean(axis=-1), rtol=1e-5, atol=1e-6)


def test_the_c51_objective_projects_n_step_terminated_and_truncated_targets_as_numpy_does():
    rng = np.random.default_rng(3)
    support = np.linspace(-10.0, 10.0, 51)
    online, target = rng.normal(size=(5, 2, 51)).astype(np.float32), rng.normal(size=(5, 2, 51)).astype(np.float32)
    action, next_action = np.array([0, 1, 1, 0, 1], np.int32), np.array([1, 0, 1, 1, 0], np.int32)
    reward = np.array([0.5, 30.0, -30.0, 2.97, 1.0], np.float32)  # beyond the support on both sides
    discount = 0.99 * np.array([0.99 ** 2, 1.0, 1.0, 0.0, 0.99], np.float32)  # 3-step, 1-step, terminated
    loss, priority = CategoricalObjective(51, -10.0, 10.0)(online, action, reward, discount, target, next_action)
    rows = np.arange(5)
    projected = np_projection(np_softmax(target[rows, next_action]), reward, discount, support)
    expected = -(projected * np.log(np_softmax(online[rows, action]))).sum(axis=1)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-4)
    np.testing.assert_allclose(priority.numpy(), loss.numpy())


def test_the_qr_objective_is_the_quantile_huber_loss_to_the_bootstrapped_quantiles():
    rng = np.random.default_rng(4)
    online, target = rng.normal(size=(4, 3, 8)).astype(np.float32), rng.normal(size=(4, 3, 8)).astype(np.float32)
    action, next_action = np.array([0, 2, 1, 0], np.int32), np.array([1, 1, 2, 0], np.int32)
    reward, discount = rng.normal(size=4).astype(np.float32), np.array([0.99, 0.0, 0.97, 0.5], np.float32)
    loss, _ = QuantileObjective()(online, action, reward, discount, target, next_action)
    rows = np.arange(4)
    bootstrapped = reward[:, None] + discount[:, None] * target[rows, next_action]
    np.testing.assert_allclose(loss.numpy(), np_quantile_loss(online[rows, action], bootstrapped, 1.0), rtol=1e-4)


def _noisy_agent(seed=0):
    config = config_lib.resolve_config([], {"env.id": "CartPole", "network.noisy": True, "network.dueling": True,
                                            "run.seed": seed})
    return make_agent(config, (4,), np.float32, 2)


def test_noisy_nets_draw_new_noise_per_call_from_each_networks_own_seeded_stream():
    agent, again = _noisy_agent(), _noisy_agent()
    first, second = (agent.online(OBSERVATION, training=True).numpy() for _ in range(2))
    assert not np.allclose(first, second)  # fresh noise on every call
    np.testing.assert_array_equal(agent.online(OBSERVATION).numpy(), agent.online(OBSERVATION).numpy())  # mean weights
    same_seed = [again.online(OBSERVATION, training=True).numpy() for _ in range(2)]
    np.testing.assert_array_equal(first, same_seed[0])
    np.testing.assert_array_equal(second, same_seed[1])
    # online and target hold the same weights but draw from independent streams, also after a sync
    agent.learner._sync_target()
    np.testing.assert_array_equal(agent.target(OBSERVATION).numpy(), agent.online(OBSERVATION).numpy())
    assert not np.allclose(agent.target(OBSERVATION, training=True).numpy(),
                           agent.online(OBSERVATION, training=True).numpy())
    other_seed = _noisy_agent(seed=1)
    other_seed.online.set_weights(agent.online.get_weights())
    assert not np.allclose(other_seed.online(OBSERVATION, training=True).numpy(),
                           agent.online(OBSERVATION, training=True).numpy())


def _noise_states(network) -> list:
    return [layer.seed_generator.state.numpy().copy() for layer in network.layers if hasattr(layer, "seed_generator")]


def test_noisy_acting_draws_noise_in_the_act_graph_and_evaluation_acts_on_the_mean_weights():
    config = config_lib.resolve_config([], {"env.id": "CartPole", "network.noisy": True,
                                            "network.noise_refresh": "call"})  # the rule would hold it
    agent = make_agent(config, (4,), np.float32, 6)
    observation = np.random.default_rng(5).normal(size=(512, 4)).astype(np.float32)
    before = _noise_states(agent.online)
    acted = [agent.actor.act(observation).numpy() for _ in range(2)]  # epsilon is 0 with noisy nets
    after = _noise_states(agent.online)
    assert float(agent.actor.epsilon()) == 0.0 and (acted[0] != acted[1]).any()  # new noise per act call
    assert all((a != b).any() for a, b in zip(before, after))  # each noisy layer drew in the act graph
    greedy = [agent.actor.act_with_epsilon(observation, 0.0).numpy() for _ in range(2)]
    np.testing.assert_array_equal(greedy[0], greedy[1])
    np.testing.assert_array_equal(greedy[0], np.argmax(agent.online(observation).numpy(), axis=1))
    assert all((a == b).all() for a, b in zip(after, _noise_states(agent.online)))  # evaluation draws no noise
    assert agent.actor.act_function.experimental_get_tracing_count() == 1


def test_held_noise_acts_alike_until_an_update_redraws_it_from_the_seeded_stream():
    """network.noise_refresh: update: the online network holds its acting noise (target holds none); act calls
    draw nothing and agree until an update redraws it, the same way for the same seed. The update runs without
    XLA, as tests/data/cartpole_small.yaml runs it (its compile cost 3 CPU-s per agent; XLA graphs holding and
    redrawing noise: tests/test_noisy.py)."""
    config = config_lib.resolve_config([], {"env.id": "CartPole", "network.noisy": True,
                                            "network.noise_refresh": "update", "compute.update_jit_compile": False})
    agent, again = (make_agent(config, (4,), np.float32, 2) for _ in range(2))
    assert len(noisy.holding_layers(agent.online)) == 2 and noisy.holding_layers(agent.target) == []
    observation = np.random.default_rng(5).normal(size=(512, 4)).astype(np.float32)
    states = _noise_states(agent.online)
    acted = [agent.actor.act(observation).numpy() for _ in range(2)]
    np.testing.assert_array_equal(acted[0], acted[1])
    assert all((a == b).all() for a, b in zip(states, _noise_states(agent.online)))  # the act graph drew nothing
    rng = np.random.default_rng(6)
    batch = (rng.normal(size=(32, 4)).astype(np.float32), rng.integers(0, 2, 32).astype(np.int32),
             np.ones(32, np.float32), np.ones(32, np.float32), rng.normal(size=(32, 4)).astype(np.float32),
             np.ones(32, np.float32))
    for each in (agent, again):
        each.learner.update(*batch)
    after = agent.actor.act(observation).numpy()
    assert (after != acted[0]).any()
    np.testing.assert_array_equal(after, again.actor.act(observation).numpy())
    assert agent.actor.act_function.experimental_get_tracing_count() == 1


def test_a_c51_policy_exports_its_expected_q_with_the_usual_signature(tmp_path):
    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"],
                                     {"learner.loss": "categorical", "network.dueling": True, "network.noisy": True,
                                      "learner.v_min": -5.0, "learner.v_max": 5.0})
    env, spec = make_env(config.env, seed=0)
    env.close()
    agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)
    export_policy(agent.online, config, spec, tmp_path / "policy", tmp_path, "latest", 0)
    served = tf.saved_model.load(str(tmp_path / "policy")).signatures["serving_default"](
        observation=tf.constant(OBSERVATION))
    expected = agent.online(OBSERVATION).numpy()
    np.testing.assert_allclose(served["q_values"].numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(served["action"].numpy(), expected.argmax(axis=1))
    loaded = keras.models.load_model(tmp_path / "policy" / "network.keras")
    np.testing.assert_allclose(loaded(OBSERVATION).numpy(), expected, rtol=1e-5, atol=1e-6)
