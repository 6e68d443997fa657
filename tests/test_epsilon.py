import numpy as np
import pytest
import tensorflow as tf

from tfdqn.agent.epsilon import linear_epsilon


@pytest.mark.parametrize("step, expected", [(0, 1.0), (500, 0.55), (1000, 0.1), (5000, 0.1)])
def test_linear_epsilon_values(step, expected):
    assert float(linear_epsilon(step, 1.0, 0.1, 1000)) == pytest.approx(expected, abs=1e-6)


def test_linear_epsilon_without_decay_is_the_end_value():
    assert float(linear_epsilon(0, 1.0, 0.05, 0)) == pytest.approx(0.05)


def dopamine_linearly_decaying_epsilon(decay_period, step, warmup_steps, epsilon):
    """NumPy twin of Dopamine's schedule (dopamine/jax/agents/dqn/dqn_agent.py:171 at 5873f54): 1.0 through
    the warm-up, then linear to `epsilon` over `decay_period` steps."""
    bonus = (1.0 - epsilon) * (decay_period + warmup_steps - step) / decay_period
    return epsilon + np.clip(bonus, 0.0, 1.0 - epsilon)


def test_the_delay_holds_epsilon_through_the_warm_up_as_dopamine_does():
    steps = np.arange(0, 8_000)
    ours = linear_epsilon(tf.constant(steps, tf.int64), 1.0, 0.01, 5_000, 1_600).numpy()
    np.testing.assert_allclose(ours, dopamine_linearly_decaying_epsilon(5_000, steps, 1_600, 0.01), atol=1e-6)
    assert ours[1_600] == 1.0 and ours[:1_601].min() == 1.0 and ours[6_600] == pytest.approx(0.01)
    # the DrQ(epsilon) warm-up explores more than a decay from step 0 that ends at the same step
    assert ours[1_600:6_600].mean() == pytest.approx(0.505, abs=1e-3)
    from_zero = linear_epsilon(tf.constant(steps, tf.int64), 1.0, 0.01, 6_600).numpy()
    assert from_zero[1_600:6_600].mean() == pytest.approx(0.385, abs=1e-3)


def test_a_delay_without_decay_switches_at_the_delay():
    assert [float(linear_epsilon(step, 1.0, 0.05, 0, 10)) for step in (9, 10)] == pytest.approx([1.0, 0.05])
