"""n-step returns in the host ring (`learner.n_step`), against the one-step reference of test_replay.py chained
n steps. Host ring only: the config refuses n_step > 1 with replay.device=accelerator."""

import numpy as np
import pytest

from tests.test_replay import EPISODE_LENGTHS, FRAME_SHAPE, SCENARIOS, Reference, _all_sampleable, _rotations
from tfdqn.replay.ring import ReplayRing


def _n_step_reference(reference, first_id, n, gamma):
    """The reference's n-step transition from `first_id`: one-step transitions chained while the episode
    goes on (a final frame has no transition of its own), rewards weighted by gamma^j."""
    observation, action, reward, bootstrap, following = reference.transitions[first_id]
    steps = 1
    while steps < n and bootstrap == 1.0 and following[-1] in reference.transitions:
        _, _, next_reward, bootstrap, following = reference.transitions[following[-1]]
        reward += gamma ** steps * next_reward
        steps += 1
    return observation, action, reward, 0.0 if bootstrap == 0.0 else gamma ** (steps - 1), following


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("ends", ["terminated", "truncated", "mixed"])
@pytest.mark.parametrize("stack_size", [1, 4])
def test_n_step_transitions_sum_rewards_until_the_episode_ends_and_bootstrap_m_steps_on(scenario, ends, stack_size):
    n, gamma, num_streams = 3, 0.5, 3
    slots, adds = SCENARIOS[scenario]
    ring = ReplayRing(slots * num_streams, FRAME_SHAPE, np.int32, stack_size, num_streams, 0, n_step=n, gamma=gamma)
    reference = Reference(stack_size, slots * num_streams, _rotations(EPISODE_LENGTHS, num_streams), ends)
    for _ in range(adds):
        reference.step(ring)
    indices = _all_sampleable(ring)
    batch = ring.gather(indices)
    k = stack_size
    observations = batch.observation.reshape(len(indices), k, -1)[..., 0]
    next_observations = batch.next_observation.reshape(len(indices), k, -1)[..., 0]
    # sampleable: at least n newer writes in the stream (the n-step look-ahead is written) and the history kept
    assert set(observations[:, -1].tolist()) == reference.sampleable(n) and len(indices) == len(ring)
    for b in range(len(indices)):
        observation, action, reward, bootstrap, following = _n_step_reference(reference, observations[b, -1], n, gamma)
        assert observations[b].tolist() == observation and next_observations[b].tolist() == following
        assert batch.action[b] == action
        assert batch.reward[b] == pytest.approx(reward) and batch.bootstrap[b] == pytest.approx(bootstrap)
    assert (batch.reward.dtype, batch.bootstrap.dtype) == (np.float32, np.float32)
