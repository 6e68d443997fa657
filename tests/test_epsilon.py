import pytest

from tfdqn.agent.epsilon import linear_epsilon


@pytest.mark.parametrize("step, expected", [(0, 1.0), (500, 0.55), (1000, 0.1), (5000, 0.1)])
def test_linear_epsilon_values(step, expected):
    assert float(linear_epsilon(step, 1.0, 0.1, 1000)) == pytest.approx(expected, abs=1e-6)


def test_linear_epsilon_without_decay_is_the_end_value():
    assert float(linear_epsilon(0, 1.0, 0.05, 0)) == pytest.approx(0.05)
