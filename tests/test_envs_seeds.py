"""Per-env seeds: env 0 keeps the run's seed; runs with neighbouring seeds share no env's games."""

import dataclasses

import numpy as np

from tfdqn.config import EnvConfig
from tfdqn.envs.make import make_env
from tfdqn.envs.seeds import env_seed
from tfdqn.envs.vector import AtariVector, GymVectorEnv, make_vector_env

CARTPOLE = EnvConfig(id="CartPole")
BREAKOUT = EnvConfig(id="Breakout", frame_stack=4)


def test_env_zero_keeps_the_seed_and_the_others_are_not_neighbours():
    assert [env_seed(s, 0) for s in range(5)] == list(range(5))
    derived = {env_seed(s, i) for s in range(20) for i in range(1, 8)}
    assert len(derived) == 20 * 7 and derived.isdisjoint(range(-100, 100))
    assert all(0 <= seed < 2**31 for seed in derived)  # what ale-py's vector env takes


def test_one_env_runs_are_unchanged():
    """The single env is make_env's env with the run's seed itself, so recorded runs stay identical."""
    vector, _ = make_vector_env(CARTPOLE, 1, seed=4)
    env, _ = make_env(CARTPOLE, seed=4)
    np.testing.assert_array_equal(vector.reset()[0], env.reset()[0])
    np.testing.assert_array_equal(vector.reset(seed=9)[0], env.reset(seed=9)[0])


def test_gym_vector_envs_of_neighbouring_seeds_share_no_games():
    """With seed + i, run s's env 1 started exactly where run s+1's env 0 did, on the first reset and on
    an explicit reset(seed) alike."""
    for reset_seed in (False, True):
        first = {}
        for seed in (5, 6):
            vector = GymVectorEnv(CARTPOLE, 2, seed=seed)
            first[seed] = vector.reset(seed=seed if reset_seed else None)
            vector.close()
        assert not np.array_equal(first[5][1], first[6][0])
        assert len({tuple(f) for f in np.concatenate([first[5], first[6]])}) == 4


def test_atari_vectors_of_neighbouring_seeds_share_no_games():
    """Sticky actions and no-op starts come from each env's seed: run s's env 1 and run s+1's env 0 play
    different games for the same actions (ale-py seeds an int seed's envs seed, seed+1, ...)."""
    config = dataclasses.replace(BREAKOUT, noop_max=30, repeat_action_probability=0.25)
    actions = np.random.default_rng(0).integers(0, 4, 100)
    frames = {}
    for seed in (5, 6):
        vector = AtariVector(config, 2, seed=seed)
        run = [vector.reset(seed=seed)]
        run += [vector.step(np.full(2, action)).next_frames for action in actions]
        vector.close()
        frames[seed] = np.stack(run)
    assert not np.array_equal(frames[5][:, 1], frames[6][:, 0])
    assert not np.array_equal(frames[5][:, 0], frames[5][:, 1])


def test_derived_seeds_fit_what_the_envs_reset_takes():
    """A resumed Atari run with N envs resets them with `derive_seed(..., bits=31)`: a 32-bit draw of
    2**31 or more is refused by ale-py's vector env (its seed is a C int)."""
    from tfdqn.envs.seeds import derive_seed
    from tfdqn.run.build import RESUME_SEED

    steps = [s for s in range(0, 200_000, 1000) if derive_seed(0, RESUME_SEED, s) >= 2**31]
    assert steps  # the draws a 32-bit seed would have broken
    resume_seed = derive_seed(0, RESUME_SEED, steps[0], bits=31)
    assert resume_seed == derive_seed(0, RESUME_SEED, steps[0]) >> 1 and resume_seed < 2**31
    vector = AtariVector(BREAKOUT, 2, seed=0)
    assert vector.reset(seed=resume_seed).shape == (2, 84, 84)
    vector.close()
