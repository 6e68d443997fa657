import numpy as np
import pytest

from tfdqn.run.cadence import crossed, updates_due


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


@pytest.mark.parametrize("before, after, every, expected", [
    (0, 1, 1, True), (3, 4, 4, True), (4, 5, 4, False), (6, 14, 4, True), (5, 7, 4, False),
    (0, 100, 0, False),  # period 0: never
    (990, 1030, 1000, True),  # 8 envs may step past a multiple without landing on it
])
def test_crossed_fires_once_per_multiple_passed(before, after, every, expected):
    assert crossed(before, after, every) is expected


def test_crossed_fires_exactly_once_per_period_over_a_run():
    steps = range(0, 10_001, 8)
    assert sum(crossed(a, b, 1000) for a, b in zip(steps, steps[1:])) == 10



def test_updates_fall_due_in_rounds_of_update_every():
    """env_steps_per_round 256, interval 2 (SB3's zoo CartPole): the updates owed at each multiple of 256 (128
    after the first), none between, and the same total as updating every step at a round's end."""
    due = [updates_due(t, 1000, 2, 256) for t in range(0, 3073)]
    assert due[1023] == 0 and due[1024] == 12 and due[1279] == 12 and due[1280] == 140
    assert due[3072] == updates_due(3072, 1000, 2)
    rounds = [b - a for a, b in zip(due, due[1:]) if b != a]
    assert rounds == [12] + [128] * 8  # the first round holds the steps since learning_starts
