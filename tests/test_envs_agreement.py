"""Every Atari pipeline plays the same game: the one-env training env (`make_env` behind `SingleEnv`) and
`AtariVector` (ale-py's C++ emulators) with 1 and 2 envs, given the same actions.

With `noop_max=0` and no sticky actions both are deterministic and ALE's seed does not matter, so they
must agree exactly: frames (both resize the max-pooled grayscale screen with OpenCV's INTER_AREA, so no
tolerance is needed), rewards, terminated/truncated flags, final frames and whole games (return, length).
"""

import dataclasses

import numpy as np
import pytest

from tfdqn.config import EnvConfig
from tfdqn.envs.vector import AtariVector, SingleEnv, make_vector_env

NOOP = 0
DETERMINISTIC = EnvConfig(id="Breakout", frame_stack=4, noop_max=0, repeat_action_probability=0.0)


def noop_heavy_actions(steps: int, seed: int = 0) -> np.ndarray:
    """Mostly NOOP, so the ball is lost often: lives are lost and games end within a few hundred steps,
    and (for this seed) some bricks are hit."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random(steps) < 0.6, NOOP, rng.integers(0, 4, steps))


def play(vector, actions: np.ndarray) -> list:
    """Every env takes `actions[t]` at step t; the list of VectorSteps."""
    vector.reset(seed=3)
    steps = [vector.step(np.full(vector.num_envs, action)) for action in actions]
    vector.close()
    return steps


def column(steps: list, env: int) -> dict:
    """One env's share of a run, games with their env index dropped."""
    return {"next_frames": np.stack([s.next_frames[env] for s in steps]),
            "final_frames": np.stack([s.final_frames[env] for s in steps]),
            "reward": np.array([s.reward[env] for s in steps]),
            "terminated": np.array([s.terminated[env] for s in steps]),
            "truncated": np.array([s.truncated[env] for s in steps]),
            "games": [(t, r, n) for t, s in enumerate(steps) for i, r, n in s.games if i == env]}


def assert_same(expected: dict, actual: dict) -> None:
    for key in ("next_frames", "final_frames", "reward", "terminated", "truncated"):
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)
    assert actual["games"] == expected["games"]


@pytest.mark.parametrize("max_episode_frames", [108_000, 700])
def test_one_env_and_atari_vector_play_the_same_game(max_episode_frames):
    config = dataclasses.replace(DETERMINISTIC, max_episode_frames=max_episode_frames)
    actions = noop_heavy_actions(400)
    single, _ = make_vector_env(config, 1, seed=3)
    assert isinstance(single, SingleEnv)
    expected = column(play(single, actions), 0)
    lives_lost = int(expected["terminated"].sum()) - len(expected["games"])
    assert lives_lost >= 4 and len(expected["games"]) >= 2 and expected["reward"].sum() > 0  # the test means something
    if max_episode_frames == 700:
        assert expected["truncated"].any()
    for num_envs in (1, 2):
        steps = play(AtariVector(config, num_envs, seed=3), actions)
        for env in range(num_envs):
            assert_same(expected, column(steps, env))


def test_atari_vector_relaunches_the_ball_after_a_lost_life():
    """NOOP only: FIRE after each lost life keeps the games going, so every life is lost and games end."""
    vector = AtariVector(DETERMINISTIC, 2, seed=0)
    vector.reset()
    terminations, games = 0, []
    for _ in range(400):
        step = vector.step(np.zeros(2, np.int64))
        terminations += int(step.terminated.sum())
        games += step.games
    vector.close()
    assert len(games) >= 4 and terminations >= 5 * len(games)


def test_atari_vector_final_frame_of_a_lost_life_is_the_frame_after_that_step():
    """Where a life ended without a new game the final frame is the frame the life-losing step produced
    (as the one-env env returns it), and the next frame is the one after the continuing NOOP and FIRE."""
    actions = np.zeros(60, np.int64)
    single_steps = play(make_vector_env(DETERMINISTIC, 1, seed=0)[0], actions)
    vector_steps = play(AtariVector(DETERMINISTIC, 2, seed=0), actions)
    first_loss = next(t for t, s in enumerate(single_steps) if s.terminated[0])
    assert not single_steps[first_loss].games  # a lost life, not a game over
    expected, step = single_steps[first_loss], vector_steps[first_loss]
    assert step.terminated.all()
    for env in range(2):
        np.testing.assert_array_equal(step.final_frames[env], expected.final_frames[0])
        np.testing.assert_array_equal(step.next_frames[env], expected.next_frames[0])
    assert not np.array_equal(step.final_frames[0], step.next_frames[0])
