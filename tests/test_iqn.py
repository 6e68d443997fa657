"""IQN (Dabney, Ostrovski, Silver and Munos 2018) and M-IQN against NumPy references written from the papers: the
head's cosine embedding, product and layers; the quantile Huber loss at sampled fractions with terminations and
n-step discounts, eagerly and under XLA; a whole update's loss with the fractions the learner drew; Munchausen's
target per quantile; and the checkpoint and export round trips."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from tests.test_losses import np_huber
from tests.test_munchausen import np_tau_log_pi
from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent
from tfdqn.agent.heads import HeadSpec
from tfdqn.agent.implicit_quantile import fraction_model
from tfdqn.agent.learner import Learner
from tfdqn.agent.munchausen import munchausen_target
from tfdqn.agent.networks import make_network
from tfdqn.agent.objectives import QuantileObjective
from tfdqn.config import LearnerConfig
from tfdqn.envs.make import make_env
from tfdqn.policy.saved_model import export_policy
from tfdqn.run.checkpoint import Checkpointer

OBSERVATION = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)


def _network(seed=1, dueling=False, k=8, cosines=16):
    head = HeadSpec(dueling=dueling, loss="implicit_quantile", outputs=k, embedding_cosines=cosines)
    return make_network("mlp", (4,), "float32", 3, (16, 16), seed=seed, head=head)


def np_quantile_loss(theta, target, fractions, kappa=1.0):
    """The paper's eq. 3 per sample: sum over the N online quantiles i of the mean over the N' targets j of
    |tau_i - 1{u_ij < 0}| huber(u_ij) / kappa, u_ij = target_j - theta_i, written with loops."""
    out = np.zeros(len(theta))
    for b in range(len(theta)):
        for i, tau in enumerate(fractions[b]):
            for j in range(target.shape[1]):
                u = float(target[b, j]) - float(theta[b, i])
                out[b] += abs(tau - (u < 0)) * np_huber(u, kappa) / kappa / target.shape[1]
    return out


def np_head(network, observation, fractions):
    """The IQN head in NumPy from the network's weights: psi(x) * relu(W cos(pi i tau) + b), i = 1..n, then the
    hidden layer and the outputs (V + A - mean A when dueling); [batch, actions, N]."""
    weights = {layer.name: [w.numpy() for w in layer.weights] for layer in network.layers if layer.weights}
    dense = [name for name in weights if name.startswith("dense")]
    features = np.maximum(observation @ weights[dense[0]][0] + weights[dense[0]][1], 0.0)  # the body: one layer
    n = weights["quantile_embedding"][0].shape[0]
    cosines = np.cos(np.pi * fractions[..., None] * np.arange(1, n + 1))  # [B, N, n]
    embedding = np.maximum(cosines @ weights["quantile_embedding"][0] + weights["quantile_embedding"][1], 0.0)
    x = np.maximum((features[:, None, :] * embedding) @ weights["quantile_hidden"][0] + weights["quantile_hidden"][1], 0)
    if "advantage" in weights:
        value = x @ weights["value"][0] + weights["value"][1]
        advantage = x @ weights["advantage"][0] + weights["advantage"][1]
        rows = value + advantage - advantage.mean(axis=-1, keepdims=True)
    else:
        rows = x @ weights["outputs"][0] + weights["outputs"][1]
    return rows.transpose(0, 2, 1)


@pytest.mark.parametrize("dueling", [False, True])
def test_the_head_is_the_papers_embedding_product_and_layers_and_its_q_the_mean_at_the_midpoints(dueling):
    network = _network(dueling=dueling)
    fractions = np.random.default_rng(1).uniform(size=(6, 5)).astype(np.float32)
    quantiles = fraction_model(network)([OBSERVATION, fractions]).numpy()
    assert quantiles.shape == (6, 3, 5)
    np.testing.assert_allclose(quantiles, np_head(network, OBSERVATION, fractions.astype(np.float64)), rtol=1e-4,
                               atol=1e-5)
    midpoints = np.broadcast_to((2 * np.arange(8) + 1) / 16, (6, 8))
    q = network(OBSERVATION).numpy()
    assert q.shape == (6, 3)
    np.testing.assert_allclose(q, np_head(network, OBSERVATION, midpoints).mean(axis=-1), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(network(OBSERVATION).numpy(), q)  # fixed fractions: the same Q every call


def _loss_inputs(seed, batch=16, actions=3, n=6, n_target=5):
    rng = np.random.default_rng(seed)
    online = rng.normal(size=(batch, actions, n)).astype(np.float32)
    target = rng.normal(scale=2.0, size=(batch, actions, n_target)).astype(np.float32)
    action, next_action = (rng.integers(0, actions, batch).astype(np.int32) for _ in range(2))
    reward = rng.normal(size=batch).astype(np.float32)
    steps = rng.integers(1, 4, batch)  # 1- to 3-step returns, and terminations
    discount = np.where(rng.random(batch) < 0.25, 0.0, 0.99 ** steps).astype(np.float32)
    fractions = rng.uniform(size=(batch, n)).astype(np.float32)
    return online, action, reward, discount, target, next_action, fractions


@pytest.mark.parametrize("jit", [False, True])
def test_the_loss_at_sampled_fractions_matches_numpy_eagerly_and_under_xla(jit):
    online, action, reward, discount, target, next_action, fractions = _loss_inputs(2)
    objective = QuantileObjective()
    call = tf.function(objective.__call__, jit_compile=True) if jit else objective
    loss, priority = call(online, action, reward, discount, target, next_action, fractions=fractions)
    rows = np.arange(len(action))
    bootstrapped = reward[:, None].astype(np.float64) + discount[:, None] * target[rows, next_action]
    assert (discount == 0).any() and (discount < 0.99).any()  # terminations and n-step discounts among them
    np.testing.assert_allclose(loss.numpy(), np_quantile_loss(online[rows, action], bootstrapped, fractions),
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(priority.numpy(), loss.numpy())


def _update_inputs(seed=3):
    rng = np.random.default_rng(seed)
    observation, next_observation = OBSERVATION, rng.normal(size=(6, 4)).astype(np.float32)
    action = np.array([0, 1, 2, 0, 1, 2], np.int32)
    reward, bootstrap = rng.normal(size=6).astype(np.float32), np.array([1, 1, 0, 1, 0.81, 1], np.float32)
    weight = rng.uniform(0.2, 1.0, 6).astype(np.float32)
    return observation, action, reward, bootstrap, next_observation, weight


def _draws(learner):
    """A copy of the learner's fraction stream, to draw in NumPy what the next update will draw."""
    return tf.random.Generator.from_state(learner.generator.state.numpy(), learner.generator.algorithm)


@pytest.mark.parametrize("double_dqn", [False, True])
def test_an_update_is_the_quantile_huber_loss_at_the_fractions_the_learner_drew(double_dqn):
    """N' target fractions evaluate s'; without double DQN the next action is the argmax of the target's mean at K
    more fractions drawn apart from them (Dopamine's implicit_quantile_agent.py); with it, online's own Q."""
    online, target = _network(1), _network(2)
    config = LearnerConfig(loss="implicit_quantile", num_tau_samples=6, num_tau_prime_samples=5,
                           num_quantile_samples=4, gamma=0.9, double_dqn=double_dqn, max_grad_norm=0.0)
    learner = Learner(online, target, config, (4,), np.float32, seed=7)
    observation, action, reward, bootstrap, next_observation, weight = _update_inputs()
    draws = _draws(learner)
    target_fractions = draws.uniform([6, 5 + (0 if double_dqn else 4)]).numpy().astype(np.float64)
    online_fractions = draws.uniform([6, 6]).numpy()
    target_next = np_head(learner.target, next_observation, target_fractions[:, :5])
    chooser = np_head(learner.online, next_observation, np.broadcast_to((2 * np.arange(8) + 1) / 16, (6, 8))) \
        if double_dqn else np_head(learner.target, next_observation, target_fractions[:, 5:])
    next_action = chooser.mean(axis=-1).argmax(axis=-1)
    rows = np.arange(6)
    bootstrapped = reward[:, None] + 0.9 * bootstrap[:, None] * target_next[rows, next_action]
    theta = np_head(learner.online, observation, online_fractions.astype(np.float64))[rows, action]
    expected = np_quantile_loss(theta, bootstrapped, online_fractions)
    metrics = learner.update(observation, action, reward, bootstrap, next_observation, weight)
    np.testing.assert_allclose(metrics["priority"].numpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(metrics["td_loss"].numpy(), (weight * expected).mean(), rtol=1e-4)


def _equal_means_network(state, seed=1):
    """A two-action IQN network whose actions have the same expected return at `state` and quantile functions that
    mirror each other about it (action 1's output weights are action 0's negated, its bias set to equal the means):
    which action a sample of fractions favours is pure noise there."""
    head = HeadSpec(loss="implicit_quantile", outputs=8, embedding_cosines=16)
    network = make_network("mlp", (4,), "float32", 2, (16, 16), seed=seed, head=head)
    kernel = network.get_layer("outputs").weights[0].numpy()[:, :1]
    network.get_layer("outputs").set_weights([np.concatenate([kernel, -kernel], 1), np.zeros(2, np.float32)])
    mean = np_head(network, state, DENSE_GRID)[0, 0].mean()  # action 0's expected return, its bias 0
    network.get_layer("outputs").set_weights([np.concatenate([kernel, -kernel], 1),
                                              np.array([0.0, 2 * mean], np.float32)])
    return network


DENSE_GRID = np.broadcast_to((np.arange(20_000) + 0.5) / 20_000, (1, 20_000))


def test_the_target_without_double_dqn_is_not_biased_by_the_draws_that_choose_its_action():
    """The NumPy model of the issue: when a' is chosen by the same N' draws that then evaluate it, each target is the
    larger of two equal-mean sample means, biased upwards; chosen by K draws apart, its mean is the true value."""
    state = np.random.default_rng(4).normal(size=(1, 4)).astype(np.float32)
    config = LearnerConfig(loss="implicit_quantile", num_tau_prime_samples=8, num_quantile_samples=8,
                           double_dqn=False)
    learner = Learner(_equal_means_network(state, 2), _equal_means_network(state), config, (4,), np.float32, seed=11)
    true_q = np_head(learner.target, state, DENSE_GRID).mean(axis=-1)[0]
    np.testing.assert_allclose(true_q[0], true_q[1], rtol=1e-4, atol=1e-5)
    states = np.repeat(state, 4096, axis=0)
    reads = tf.function(learner._target_reads)(tf.constant(states), tf.constant(states))
    evaluated = reads["target_next"].numpy()  # [4096, 2, 8]: the N' quantiles each sample's target is built from
    chosen = evaluated[np.arange(4096), reads["next_action"].numpy()].mean(axis=-1)
    error = chosen - true_q[0]
    standard_error = error.std() / np.sqrt(len(error))
    assert abs(error.mean()) < 4 * standard_error  # within noise of zero
    shared = evaluated.mean(axis=-1).max(axis=-1) - true_q[0]  # a' chosen by the same N' draws
    assert shared.mean() > 10 * standard_error, "the network must make the shared-draw bias visible"


def np_munchausen_quantiles(z_next, z_now, action, reward, discount, tau, alpha, l0, legal_next=None, legal_now=None,
                            q_next=None):
    """M-IQN's target quantiles [B, N'] as its reference code forms them: pi from the mean of each state's target
    quantiles (at s', of `q_next` where given: m_iqn.py's separate pass), over its legal actions where masks are
    given, the clipped scaled log-policy of the action taken, and per quantile j the soft backup sum over a' of
    pi(a' | s') (z_j(s', a') - tau log pi(a' | s'))."""
    rows = np.arange(len(action))
    legal_next = np.ones(z_next.shape[:2], bool) if legal_next is None else legal_next
    bonus = np.clip(np_tau_log_pi(z_now.mean(axis=-1), tau, legal_now)[rows, action], l0, 0.0)
    q_next = z_next.mean(axis=-1) if q_next is None else q_next
    log_pi = np.where(legal_next, np_tau_log_pi(q_next, tau, legal_next), 0.0)
    pi = np.where(legal_next, np.exp(log_pi / tau), 0.0)
    soft = (pi[..., None] * (z_next - log_pi[..., None])).sum(axis=1)
    return (reward + alpha * bonus)[:, None] + discount[:, None] * soft


@pytest.mark.parametrize("jit, masked", [(False, False), (True, False), (False, True)])
def test_the_m_iqn_target_matches_numpy_eagerly_and_under_xla(jit, masked):
    rng = np.random.default_rng(5)
    z_next, z_now = (rng.normal(scale=2.0, size=(32, 4, 7)).astype(np.float32) for _ in range(2))
    _, action, reward, discount, *_ = _loss_inputs(6, batch=32, actions=4)
    legal_now, legal_next = (rng.random((32, 4)) < 0.6 for _ in range(2))
    legal_now[np.arange(32), action] = True  # the action taken was legal
    legal_next[~legal_next.any(axis=1), 0] = True
    masks = {"legal_next": legal_next, "legal_now": legal_now} if masked else {}
    target = functools.partial(munchausen_target, tau=0.03, alpha=0.9, clip=-1.0)
    target = tf.function(target, jit_compile=True) if jit else target
    ours = target(z_next, z_now, action, reward, discount, **masks).numpy()
    expected = np_munchausen_quantiles(z_next, z_now, action, reward, discount, 0.03, 0.9, -1.0, **masks)
    assert ours.shape == (32, 7)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_an_m_iqn_update_reads_its_policies_from_fractions_drawn_apart_from_those_that_evaluate():
    """As munchausen_rl's m_iqn.py: pi(. | s') from the target's mean at K fractions drawn apart from the N' whose
    quantiles it weights, pi(. | s) from the target at K fractions; the loss at the N online fractions."""
    config = LearnerConfig(loss="implicit_quantile", munchausen=True, num_tau_samples=6, num_tau_prime_samples=5,
                           num_quantile_samples=4, gamma=0.9, max_grad_norm=0.0, munchausen_tau=0.5)
    learner = Learner(_network(1), _network(2), config, (4,), np.float32, seed=7)
    observation, action, reward, bootstrap, next_observation, weight = _update_inputs()
    draws = _draws(learner)
    next_fractions = draws.uniform([6, 9]).numpy().astype(np.float64)
    now_fractions = draws.uniform([6, 4]).numpy().astype(np.float64)
    online_fractions = draws.uniform([6, 6]).numpy()
    z_next = np_head(learner.target, next_observation, next_fractions[:, :5])
    q_next = np_head(learner.target, next_observation, next_fractions[:, 5:]).mean(axis=-1)
    z_now = np_head(learner.target, observation, now_fractions)
    y = np_munchausen_quantiles(z_next, z_now, action, reward, 0.9 * bootstrap, 0.5, 0.9, -1.0, q_next=q_next)
    theta = np_head(learner.online, observation, online_fractions.astype(np.float64))[np.arange(6), action]
    expected = np_quantile_loss(theta, y, online_fractions)
    metrics = learner.update(observation, action, reward, bootstrap, next_observation, weight)
    np.testing.assert_allclose(metrics["priority"].numpy(), expected, rtol=1e-4, atol=1e-5)
    unshared = np_munchausen_quantiles(z_next, z_now, action, reward, 0.9 * bootstrap, 0.5, 0.9, -1.0)
    assert not np.allclose(np_quantile_loss(theta, unshared, online_fractions), expected, rtol=1e-3), \
        "pi read from the N' quantiles must give another loss for the test to tell the two apart"


def _cartpole_agent(seed, **keys):
    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"], {
        "learner.loss": "implicit_quantile", "network.hidden_sizes": [16, 16], "learner.num_tau_samples": 4,
        "learner.num_tau_prime_samples": 4, "learner.num_quantile_samples": 4, "run.seed": seed, **keys})
    return config, make_agent(config, (4,), np.float32, 2)


def test_a_checkpoint_restores_the_weights_and_the_fraction_stream(tmp_path):
    rng = np.random.default_rng(0)
    batch = (OBSERVATION, rng.integers(0, 2, 6).astype(np.int32), np.ones(6, np.float32), np.ones(6, np.float32),
             OBSERVATION[::-1].copy(), np.ones(6, np.float32))
    _, agent = _cartpole_agent(0, **{"learner.munchausen": True, "learner.n_step": 1})
    agent.learner.update(*batch)
    Checkpointer(tmp_path, agent).save(100, {})
    expected = agent.learner.update(*batch)
    _, restored = _cartpole_agent(1, **{"learner.munchausen": True, "learner.n_step": 1})
    assert Checkpointer(tmp_path, restored).restore_latest()[0] == 100
    again = restored.learner.update(*batch)
    np.testing.assert_array_equal(again["priority"].numpy(), expected["priority"].numpy())


def test_an_iqn_policy_exports_and_loads_back_the_same_q_values(tmp_path):
    import keras

    config, agent = _cartpole_agent(0, **{"network.dueling": True})
    env, spec = make_env(config.env, seed=0)
    env.close()
    export_policy(agent.online, config, spec, tmp_path / "policy", tmp_path, "latest", 0)
    served = tf.saved_model.load(str(tmp_path / "policy")).signatures["serving_default"](observation=OBSERVATION)
    np.testing.assert_allclose(served["q_values"].numpy(), agent.online(OBSERVATION).numpy(), rtol=1e-5, atol=1e-6)
    loaded = keras.models.load_model(tmp_path / "policy" / "network.keras")
    np.testing.assert_allclose(loaded(OBSERVATION).numpy(), agent.online(OBSERVATION).numpy(), rtol=1e-5, atol=1e-6)
