import numpy as np
import pytest

from tfdqn.schedules import linear_epsilon, updates_due


@pytest.mark.parametrize("env_steps, learning_starts, interval, expected", [
    (0, 0, 1, 0),
    (1, 0, 1, 1),
    (10, 0, 4, 2),
    (999, 1000, 1, 0),
    (1000, 1000, 1, 0),
    (1001, 1000, 1, 1),
    (1003, 1000, 4, 0),
    (1004, 1000, 4, 1),
    (1007, 1000, 4, 1),
    (1008, 1000, 4, 2),
    (5000, 1000, 16, 250),
    (80, 0, 8, 10),  # eight envs stepping at once owe one update per interval crossed
])
def test_updates_due_table(env_steps, learning_starts, interval, expected):
    assert updates_due(env_steps, learning_starts, interval) == expected


def test_updates_due_one_update_per_interval_over_a_run():
    due = [updates_due(t, 100, 4) for t in range(0, 1101)]
    increments = np.diff(due)
    assert set(increments) <= {0, 1}
    assert due[-1] == 250
    assert [t for t in range(1, 1101) if increments[t - 1]][:3] == [104, 108, 112]


@pytest.mark.parametrize("step, expected", [(0, 1.0), (500, 0.55), (1000, 0.1), (5000, 0.1)])
def test_linear_epsilon_values(step, expected):
    assert float(linear_epsilon(step, 1.0, 0.1, 1000)) == pytest.approx(expected, abs=1e-6)


def test_linear_epsilon_without_decay_is_the_end_value():
    assert float(linear_epsilon(0, 1.0, 0.05, 0)) == pytest.approx(0.05)
