"""The distributional losses against plain NumPy references, eagerly and under XLA."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tfdqn.agent import losses


def np_huber(x, delta):
    x = np.asarray(x, np.float64)
    return np.where(np.abs(x) <= delta, 0.5 * x ** 2, delta * (np.abs(x) - 0.5 * delta))


def np_projection(p, reward, discount, z):
    """Algorithm 1 of Bellemare et al. (2017), one atom at a time."""
    p, z = np.asarray(p, np.float64), np.asarray(z, np.float64)
    v_min, v_max, n = z[0], z[-1], len(z)
    dz = (v_max - v_min) / (n - 1)
    m = np.zeros_like(p)
    for b in range(p.shape[0]):
        for j in range(n):
            tz = min(max(reward[b] + discount[b] * z[j], v_min), v_max)
            pos = (tz - v_min) / dz
            lo, hi = math.floor(pos), math.ceil(pos)
            if lo == hi:
                m[b, lo] += p[b, j]
            else:
                m[b, lo] += p[b, j] * (hi - pos)
                m[b, hi] += p[b, j] * (pos - lo)
    return m


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_quantile_loss(theta, target, kappa):
    batch, n = theta.shape
    n_target = target.shape[1]
    out = np.zeros(batch)
    for b in range(batch):
        for i in range(n):
            tau = (2 * i + 1) / (2 * n)
            for j in range(n_target):
                u = target[b, j] - theta[b, i]
                out[b] += abs(tau - (u < 0)) * np_huber(u, kappa) / kappa / n_target
    return out


def random_probs(rng, batch, n):
    return np_softmax(rng.normal(size=(batch, n)) * 2).astype(np.float32)


SUPPORT = losses.categorical_support(11, -5.0, 5.0)  # atoms -5, -4, ..., 5; dz = 1


def test_huber_at_and_around_delta():
    delta = 1.5
    x = np.array([0.0, 0.3, -1.0, 1.4999, 1.5, -1.5, 1.5001, 3.0, -10.0], np.float32)
    np.testing.assert_allclose(losses.huber(x, delta), np_huber(x, delta), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(losses.huber(tf.constant([1.5, 4.0]), 1.5), [1.125, 4.875], rtol=1e-6)
    assert losses.huber(tf.constant([1.0], tf.bfloat16), 1.0).dtype == tf.float32


def test_categorical_support():
    z = losses.categorical_support(51, -10.0, 10.0)
    assert z.dtype == tf.float32 and z.shape == (51,)
    np.testing.assert_allclose(z, np.linspace(-10, 10, 51), atol=1e-5)


def test_projection_clips_beyond_support_both_sides():
    p = random_probs(np.random.default_rng(0), 2, 11)
    m = losses.categorical_projection(p, [100.0, -100.0], [0.99, 0.99], SUPPORT).numpy()
    np.testing.assert_allclose(m[0], np.eye(11)[10], atol=1e-6)  # all mass at v_max
    np.testing.assert_allclose(m[1], np.eye(11)[0], atol=1e-6)  # all mass at v_min


def test_projection_partially_beyond_support():
    p = random_probs(np.random.default_rng(1), 2, 11)
    reward, discount = np.array([3.3, -2.7]), np.array([0.9, 0.9])
    m = losses.categorical_projection(p, reward, discount, SUPPORT)
    np.testing.assert_allclose(m, np_projection(p, reward, discount, SUPPORT.numpy()), atol=1e-6)


def test_projection_exactly_on_atoms():
    p = random_probs(np.random.default_rng(2), 1, 11)
    # reward 1, discount 1: Tz_j = z_j + 1 lands on atom j + 1 (the top atom clips onto v_max).
    m = losses.categorical_projection(p, [1.0], [1.0], SUPPORT).numpy()[0]
    expected = np.concatenate([[0.0], p[0, :-2], [p[0, -2] + p[0, -1]]])
    np.testing.assert_allclose(m, expected, atol=1e-6)


def test_projection_terminal_puts_all_mass_at_clipped_reward():
    p = random_probs(np.random.default_rng(3), 4, 11)
    m = losses.categorical_projection(p, [2.0, 2.25, 7.0, -0.5], [0.0] * 4, SUPPORT).numpy()
    expected = np.zeros((4, 11))
    expected[0, 7] = 1.0
    expected[1, 7], expected[1, 8] = 0.75, 0.25
    expected[2, 10] = 1.0
    expected[3, 4], expected[3, 5] = 0.5, 0.5
    np.testing.assert_allclose(m, expected, atol=1e-6)


def test_projection_n_step_discount_against_algorithm_1():
    rng = np.random.default_rng(4)
    p = random_probs(rng, 8, 11)
    reward = rng.normal(scale=3, size=8)
    discount = 0.99 ** 3 * (rng.random(8) > 0.3)
    m = losses.categorical_projection(p, reward, discount, SUPPORT)
    np.testing.assert_allclose(m, np_projection(p, reward, discount, SUPPORT.numpy()), atol=1e-5)
    np.testing.assert_allclose(tf.reduce_sum(m, -1), np.ones(8), atol=1e-5)


@pytest.mark.parametrize("num_atoms,v_min,v_max", [(51, -10.0, 10.0), (21, 0.0, 200.0)])
def test_projection_random_against_algorithm_1(num_atoms, v_min, v_max):
    rng = np.random.default_rng(num_atoms)
    z = losses.categorical_support(num_atoms, v_min, v_max)
    p = random_probs(rng, 32, num_atoms)
    reward = rng.uniform(v_min - 5, v_max + 5, size=32)
    discount = rng.choice([0.0, 0.99, 0.99 ** 3, 1.0], size=32)
    m = losses.categorical_projection(p, reward, discount, z)
    assert m.dtype == tf.float32 and m.shape == (32, num_atoms)
    np.testing.assert_allclose(m, np_projection(p, reward, discount, z.numpy()), atol=1e-5)
    np.testing.assert_allclose(tf.reduce_sum(m, -1), np.ones(32), atol=1e-5)


def test_categorical_loss_and_its_gradient():
    rng = np.random.default_rng(5)
    logits = tf.constant(rng.normal(size=(6, 11)), tf.float32)
    target = tf.constant(random_probs(rng, 6, 11))
    expected = -(target.numpy() * np.log(np_softmax(logits.numpy().astype(np.float64)))).sum(-1)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([logits, target])
        loss = losses.categorical_loss(logits, target)
        total = tf.reduce_sum(loss)
    assert loss.shape == (6,)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    grad = tape.gradient(total, logits)
    np.testing.assert_allclose(grad, np_softmax(logits.numpy()) - target.numpy(), atol=1e-6)
    assert tape.gradient(total, target) is None


def test_categorical_q_batch_actions_atoms():
    rng = np.random.default_rng(6)
    logits = rng.normal(size=(4, 3, 11)).astype(np.float32)
    q = losses.categorical_q(logits, SUPPORT)
    assert q.shape == (4, 3)
    np.testing.assert_allclose(q, (np_softmax(logits) * np.linspace(-5, 5, 11)).sum(-1), atol=1e-5)


def test_quantile_midpoints_and_q():
    np.testing.assert_allclose(losses.quantile_midpoints(4), [0.125, 0.375, 0.625, 0.875])
    x = np.random.default_rng(7).normal(size=(4, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(losses.quantile_q(x), x.mean(-1), atol=1e-6)


@pytest.mark.parametrize("kappa", [1.0, 0.5, 2.0])
def test_quantile_huber_loss_against_double_loop(kappa):
    rng = np.random.default_rng(8)
    theta = rng.normal(scale=2, size=(5, 7)).astype(np.float32)
    target = rng.normal(scale=2, size=(5, 4)).astype(np.float32)
    loss = losses.quantile_huber_loss(theta, target, kappa)
    assert loss.dtype == tf.float32 and loss.shape == (5,)
    np.testing.assert_allclose(loss, np_quantile_loss(theta, target, kappa), rtol=1e-5)


def test_quantile_huber_loss_gradient_stops_at_targets():
    rng = np.random.default_rng(9)
    theta = tf.constant(rng.normal(size=(3, 5)), tf.float32)
    target = tf.constant(rng.normal(size=(3, 6)), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([theta, target])
        loss = tf.reduce_sum(losses.quantile_huber_loss(theta, target))
    assert tape.gradient(loss, target) is None
    assert np.all(np.isfinite(tape.gradient(loss, theta)))


def test_xla_matches_eager():
    rng = np.random.default_rng(10)
    logits = rng.normal(size=(4, 11)).astype(np.float32)
    p = random_probs(rng, 4, 11)
    reward = np.array([0.3, 100.0, -2.0, 1.0], np.float32)
    discount = np.array([0.97, 0.99, 0.0, 1.0], np.float32)
    theta = rng.normal(size=(4, 6)).astype(np.float32)
    target = rng.normal(size=(4, 3)).astype(np.float32)
    cases = {
        "huber": (lambda x: losses.huber(x, 1.0), (theta[:, 0],)),
        "support": (lambda: losses.categorical_support(11, -5.0, 5.0), ()),
        "projection": (losses.categorical_projection, (p, reward, discount, SUPPORT)),
        "categorical_loss": (losses.categorical_loss, (logits, p)),
        "categorical_q": (losses.categorical_q, (logits.reshape(2, 2, 11), SUPPORT)),
        "midpoints": (lambda: losses.quantile_midpoints(6), ()),
        "quantile_loss": (lambda a, b: losses.quantile_huber_loss(a, b, 2.0), (theta, target)),
        "quantile_bf16": (losses.quantile_huber_loss, (tf.cast(theta, tf.bfloat16), target)),
        "quantile_q": (losses.quantile_q, (theta,)),
    }
    for name, (fn, args) in cases.items():
        args = [tf.constant(a) for a in args]
        compiled = tf.function(fn, jit_compile=True, autograph=False)(*args)
        np.testing.assert_allclose(compiled, fn(*args), rtol=1e-5, atol=1e-6, err_msg=name)
