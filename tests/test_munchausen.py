"""Munchausen's target against a NumPy reference written from the paper's equation (Vieillard et al. 2020, eq. 2,
log-policy clipped to [l0, 0]): random Q-values, terminations, n-step discounts and legal-action masks, eagerly
and under XLA; and an M-DQN update's loss is the Huber loss to it."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from tests.test_legal_actions import LAYOUT, _batch, _network
from tfdqn.agent.learner import Learner
from tfdqn.agent.munchausen import munchausen_target
from tfdqn.agent.observation_encoder import legal_actions
from tfdqn.config import LearnerConfig


def np_tau_log_pi(q, tau, legal=None):
    """tau * log of softmax(q / tau), in float64; -inf for illegal actions."""
    q = np.asarray(q, np.float64)
    if legal is not None:
        q = np.where(legal, q, -np.inf)
    z = q / tau
    top = z.max(axis=1, keepdims=True)
    return tau * (z - top - np.log(np.exp(z - top).sum(axis=1, keepdims=True)))


def np_munchausen(q_next, q_now, action, reward, discount, tau, alpha, l0, legal_next=None, legal_now=None):
    rows = np.arange(len(action))
    bonus = np.clip(np_tau_log_pi(q_now, tau, legal_now)[rows, action], l0, 0.0)
    log_pi = np_tau_log_pi(q_next, tau, legal_next)
    pi = np.exp(log_pi / tau)
    soft = np.where(pi > 0, pi * (np.asarray(q_next, np.float64) - np.where(pi > 0, log_pi, 0.0)), 0.0)
    return reward + alpha * bonus + discount * soft.sum(axis=1)


def _inputs(seed, batch=64, actions=5):
    rng = np.random.default_rng(seed)
    q_next, q_now = (rng.normal(scale=2.0, size=(batch, actions)).astype(np.float32) for _ in range(2))
    action = rng.integers(0, actions, batch).astype(np.int32)
    reward = rng.normal(size=batch).astype(np.float32)
    steps = rng.integers(1, 4, batch)  # 1- to 3-step returns, and terminations
    discount = np.where(rng.random(batch) < 0.25, 0.0, 0.99 ** steps).astype(np.float32)
    legal_now, legal_next = (rng.random((batch, actions)) < 0.6 for _ in range(2))
    legal_now[np.arange(batch), action] = True  # the action taken was legal
    legal_next[~legal_next.any(axis=1), 0] = True
    return q_next, q_now, action, reward, discount, legal_next, legal_now


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_the_target_matches_numpy_eagerly_and_under_xla(jit, masked):
    q_next, q_now, action, reward, discount, legal_next, legal_now = _inputs(1)
    masks = (legal_next, legal_now) if masked else (None, None)
    tau, alpha, l0 = 0.03, 0.9, -1.0
    target = tf.function(functools.partial(munchausen_target, tau=tau, alpha=alpha, clip=l0), jit_compile=jit) \
        if jit else functools.partial(munchausen_target, tau=tau, alpha=alpha, clip=l0)
    ours = target(q_next, q_now, action, reward, discount,
                  legal_next=None if not masked else tf.constant(legal_next),
                  legal_now=None if not masked else tf.constant(legal_now)).numpy()
    expected = np_munchausen(q_next, q_now, action, reward, discount, tau, alpha, l0, *masks)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
    bonus = np.clip(np_tau_log_pi(q_now, tau, masks[1])[np.arange(64), action], -np.inf, 0.0)
    assert (bonus < l0).any() and (bonus > l0).any(), "some terms must be clipped at l0, some not"


def test_tau_and_alpha_move_the_target_as_the_equation_says():
    q_next, q_now, action, reward, discount, _, _ = _inputs(2)
    plain = munchausen_target(q_next, q_now, action, reward, discount, 0.03, 0.0, -1.0).numpy()
    # alpha 0 and a small tau: the soft value is the max, as in DQN's target
    np.testing.assert_allclose(munchausen_target(q_next, q_now, action, reward, discount, 1e-4, 0.0, -1.0).numpy(),
                               reward + discount * q_next.max(axis=1), rtol=1e-4, atol=1e-4)
    with_bonus = munchausen_target(q_next, q_now, action, reward, discount, 0.03, 0.9, -1.0).numpy()
    assert (with_bonus <= plain + 1e-6).all() and (with_bonus < plain - 1e-3).any()  # log pi <= 0: a penalty


def test_an_m_dqn_update_is_the_huber_loss_to_the_masked_munchausen_target():
    config = LearnerConfig(munchausen=True, gamma=0.9, max_grad_norm=0.0)
    learner = Learner(_network(1), _network(2), config, (LAYOUT.width,), np.uint8,
                      legal=functools.partial(legal_actions, LAYOUT))
    observation, action, reward, bootstrap, next_frames, weight = _batch(3)
    rows = np.arange(len(action))
    legal_now = LAYOUT.legal(observation)
    action = np.where(legal_now[rows, action], action, legal_now.argmax(axis=1)).astype(np.int32)
    y = np_munchausen(learner.target(next_frames).numpy(), learner.target(observation).numpy(), action, reward,
                      0.9 * bootstrap, 0.03, 0.9, -1.0, LAYOUT.legal(next_frames), legal_now)
    error = y - learner.online(observation).numpy()[rows, action]
    huber = np.where(np.abs(error) <= 1.0, 0.5 * error**2, np.abs(error) - 0.5)
    metrics = learner.update(observation, action, reward, bootstrap, next_frames, weight)
    assert float(metrics["td_loss"]) == pytest.approx(huber.mean(), rel=1e-4)
    np.testing.assert_allclose(metrics["priority"].numpy(), np.abs(error), rtol=1e-4, atol=1e-5)
