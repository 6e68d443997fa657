import keras
import numpy as np
import pytest
import tensorflow as tf

from tfdqn.config import LearnerConfig
from tfdqn.agent.learner import Learner
from tfdqn.agent.objectives import HuberObjective


def _numpy_target(r, d, q_target, gamma, q_online=None):
    if q_online is None:
        next_value = q_target.max(axis=1)
    else:
        next_value = q_target[np.arange(len(r)), q_online.argmax(axis=1)]
    return r + gamma * d * next_value


@pytest.mark.parametrize("double", [False, True])
def test_the_huber_objective_matches_numpy(double):
    rng = np.random.default_rng(0)
    r = rng.normal(size=16).astype(np.float32)
    d = rng.integers(0, 2, 16).astype(np.float32)
    q_target = rng.normal(size=(16, 5)).astype(np.float32)
    q_online = rng.normal(size=(16, 5)).astype(np.float32) if double else None
    q_tm1, action = rng.normal(size=(16, 5)).astype(np.float32), rng.integers(0, 5, 16).astype(np.int32)
    next_action = (q_online if double else q_target).argmax(axis=1).astype(np.int32)
    loss, priority = HuberObjective(1.0)(q_tm1, action, r, 0.97 * d, q_target, next_action)
    td_error = _numpy_target(r, d, q_target, 0.97, q_online) - q_tm1[np.arange(16), action]
    np.testing.assert_allclose(priority.numpy(), np.abs(td_error), rtol=1e-5, atol=1e-6)
    huber = np.where(np.abs(td_error) <= 1.0, 0.5 * td_error ** 2, np.abs(td_error) - 0.5)
    np.testing.assert_allclose(loss.numpy(), huber, rtol=1e-5, atol=1e-6)


def test_double_dqn_selects_the_next_action_with_online_and_values_it_with_target():
    learner = Learner(_tiny_model(0), _tiny_model(1), LearnerConfig(), (3,), np.float32)
    observation = np.random.default_rng(1).normal(size=(64, 3)).astype(np.float32)
    target_next = learner.target(observation)
    chosen = learner._next_action(tf.constant(observation), target_next).numpy()
    np.testing.assert_array_equal(chosen, learner.online(observation).numpy().argmax(axis=1))
    plain = Learner(_tiny_model(0), _tiny_model(1), LearnerConfig(double_dqn=False), (3,), np.float32)
    np.testing.assert_array_equal(plain._next_action(tf.constant(observation), target_next).numpy(),
                                  target_next.numpy().argmax(axis=1))


def _tiny_model(seed):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((3,), dtype="float32")
    return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Dense(8, activation="relu")(inputs)))


def _batch(seed, size=8):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(size, 3)).astype(np.float32), rng.integers(0, 2, size).astype(np.int32),
            rng.normal(size=size).astype(np.float32), np.ones(size, np.float32),
            rng.normal(size=(size, 3)).astype(np.float32), np.ones(size, np.float32))


def test_target_sync_exactly_on_period_boundaries_and_one_trace():
    learner = Learner(_tiny_model(0), _tiny_model(1), LearnerConfig(target_update_period=3, learning_rate=0.01),
                      (3,), np.float32)
    same = lambda: all(np.array_equal(o, t) for o, t in  # noqa: E731
                       zip(learner.online.get_weights(), learner.target.get_weights()))
    assert same()  # the target starts as a copy
    synced_after = []
    for n in range(1, 11):
        learner.update(*_batch(n, size=4 + n % 3))  # varying batch sizes must not retrace
        if same():
            synced_after.append(n)
    assert synced_after == [3, 6, 9]
    assert int(learner.updates.numpy()) == 10
    assert learner.update_function.experimental_get_tracing_count() == 1


def test_a_phase_moves_the_copies_as_if_updates_had_run_since_step_0():
    """Dopamine's DER copies the target every 2,000 agent steps from step 0, learning from step 1,600: after
    updates 400, 2,400, ...; here, period 5 with 3 updates counted before the first."""
    learner = Learner(_tiny_model(0), _tiny_model(1), LearnerConfig(target_update_period=5, target_update_phase=3,
                                                                    learning_rate=0.01), (3,), np.float32)
    synced_after = []
    for n in range(1, 13):
        learner.update(*_batch(n))
        if all(np.array_equal(o, t) for o, t in zip(learner.online.get_weights(), learner.target.get_weights())):
            synced_after.append(n)
    assert synced_after == [2, 7, 12]


def test_update_loss_matches_a_numpy_reference_weighted_by_importance():
    """The replay clips rewards (before n-step sums); the learner weights each sample's loss."""
    config = LearnerConfig(double_dqn=True, huber_delta=1.0, gamma=0.9, max_grad_norm=0.0)
    learner = Learner(_tiny_model(2), _tiny_model(3), config, (3,), np.float32)
    observation, action, reward, bootstrap, next_observation, _ = _batch(7)
    bootstrap[::2] = 0.0
    weight = np.linspace(0.2, 1.0, 8).astype(np.float32)
    q_online = learner.online(observation).numpy()
    y = _numpy_target(reward, bootstrap, learner.target(next_observation).numpy(), 0.9,
                      learner.online(next_observation).numpy())
    error = y - q_online[np.arange(8), action]
    huber = np.where(np.abs(error) <= 1.0, 0.5 * error**2, np.abs(error) - 0.5)
    metrics = learner.update(observation, action, reward, bootstrap, next_observation, weight)
    assert float(metrics["td_loss"]) == pytest.approx((weight * huber).mean(), rel=1e-5)
    np.testing.assert_allclose(metrics["priority"].numpy(), np.abs(error), rtol=1e-5, atol=1e-6)
    assert float(metrics["q_values"]) == pytest.approx(q_online.max(axis=1).mean(), rel=1e-5)


def test_updates_reduce_the_loss_on_a_fixed_batch():
    learner = Learner(_tiny_model(4), _tiny_model(5), LearnerConfig(learning_rate=0.01, target_update_period=1000),
                      (3,), np.float32)
    batch = _batch(11)
    first = float(learner.update(*batch)["td_loss"])
    for _ in range(200):
        last = float(learner.update(*batch)["td_loss"])
    assert last < first * 0.5
    assert all(np.isfinite(w).all() for w in learner.online.get_weights())
    assert isinstance(learner.update(*batch)["td_loss"], tf.Tensor)


def _learner(seed=0, **config):
    config = LearnerConfig(**{"learning_rate": 0.01, "target_update_period": 3, **config})
    return Learner(_tiny_model(seed), _tiny_model(seed + 1), config, (3,), np.float32)


def _weights(learner):
    return learner.online.get_weights() + learner.target.get_weights() + [learner.updates.numpy()]


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fused_updates_equal_one_update_per_call_and_trace_once(jit_compile):
    """k batches in one update_many call give the weights, target syncs and counter of k update calls."""
    plain, fused = _learner(), _learner()
    fused = Learner(fused.online, fused.target, fused._config, (3,), np.float32, jit_compile=jit_compile)
    for k in (1, 4, 2, 7):  # the loop asks for whatever k is due; none of these may retrace
        batches = [_batch(100 * k + i) for i in range(k)]
        for batch in batches:
            last = plain.update(*batch)
        fused_metrics = fused.update_many(*(np.stack(column) for column in zip(*batches)))
        assert float(fused_metrics["td_loss"]) == pytest.approx(float(last["td_loss"]), rel=1e-5)
    for a, b in zip(_weights(plain), _weights(fused)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert int(fused.updates.numpy()) == 14
    assert fused.update_many_function.experimental_get_tracing_count() == 1


def test_replay_fed_updates_draw_their_batches_inside_the_graph():
    learner = _learner()
    draws = tf.Variable(0)
    batch = [tf.constant(column) for column in _batch(3)]

    def sample():
        draws.assign_add(1)
        return batch

    update_from_replay = learner.make_replay_update(lambda: (*sample(), tf.zeros(8, tf.int64)), 8)
    for k in (3, 1, 5):
        update_from_replay(tf.constant(k, tf.int32))
    assert int(draws.numpy()) == 9 and int(learner.updates.numpy()) == 9
    assert update_from_replay.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_a_learning_rate_decay_falls_linearly_per_update_inside_fused_calls_then_stays(optimizer):
    """0.01 to 0.001 over 4 updates: each update of a fused XLA call steps with its own rate, as single
    updates do, and the rate is read from the optimizer's checkpointed step count."""
    decay = {"learning_rate_end": 0.001, "learning_rate_decay_updates": 4, "optimizer": optimizer}
    plain, fused = _learner(**decay), _learner(**decay)
    fused = Learner(fused.online, fused.target, fused._config, (3,), np.float32, jit_compile=True)
    rates = [float(plain.optimizer.learning_rate)]
    for k in (2, 2, 2):
        batches = [_batch(10 * k + i + len(rates)) for i in range(k)]
        for batch in batches:
            plain.update(*batch)
        fused.update_many(*(np.stack(column) for column in zip(*batches)))
        rates.append(float(fused.optimizer.learning_rate))
    assert rates == pytest.approx([0.01, 0.0055, 0.001, 0.001])
    for a, b in zip(_weights(plain), _weights(fused)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert int(fused.optimizer.iterations.numpy()) == 6
    assert fused.update_many_function.experimental_get_tracing_count() == 1


def test_a_restored_optimizer_continues_its_learning_rate_decay(tmp_path):
    decay = {"learning_rate_end": 0.0, "learning_rate_decay_updates": 10}
    trained = _learner(**decay)
    for n in range(4):
        trained.update(*_batch(n))
    path = tf.train.Checkpoint(optimizer=trained.optimizer).write(str(tmp_path / "ckpt"))
    resumed = _learner(seed=5, **decay)
    tf.train.Checkpoint(optimizer=resumed.optimizer).read(path).assert_consumed()
    assert float(resumed.optimizer.learning_rate) == pytest.approx(0.006)
