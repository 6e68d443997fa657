"""Vector envs: the single env, gymnasium's SyncVectorEnv and ale-py's AtariVectorEnv behind one step()."""

import dataclasses
import json
import pickle

import numpy as np
import pytest

from tests.conftest import TINY, TINY_RUN, train_in_process
from tfdqn import config as config_lib
from tfdqn.envs.vector import AtariVector, GymVectorEnv, SingleEnv, ale_game_name, make_vector_env


def _env_config(name):
    return config_lib.build_config([config_lib.CONFIG_DIR / name], {}).env


@pytest.mark.parametrize("env_id, game", [("ALE/Breakout-v5", "breakout"), ("ALE/MsPacman-v5", "ms_pacman"),
                                          ("ALE/SpaceInvaders-v5", "space_invaders")])
def test_ale_game_names(env_id, game):
    assert ale_game_name(env_id) == game


@pytest.mark.parametrize("name, num_envs, kind", [("cartpole.yaml", 1, SingleEnv), ("cartpole.yaml", 3, GymVectorEnv),
                                                  ("atari.yaml", 1, SingleEnv), ("atari.yaml", 4, AtariVector)])
def test_step_shapes_and_episode_ends(name, num_envs, kind):
    vector, spec = make_vector_env(_env_config(name), num_envs, seed=0)
    assert isinstance(vector, kind) and vector.num_envs == num_envs
    frames = vector.reset(seed=0)
    assert frames.shape == (num_envs, *spec.frame_shape) and frames.dtype == spec.frame_dtype
    rng = np.random.default_rng(0)
    ends = games = 0
    for _ in range(400):
        step = vector.step(rng.integers(0, spec.num_actions, num_envs))
        ended = step.terminated | step.truncated
        assert step.next_frames.shape == step.final_frames.shape == frames.shape
        # Where nothing ended the final frame is the next frame; the replay stores it only where one did.
        np.testing.assert_array_equal(step.final_frames[~ended], step.next_frames[~ended])
        assert step.reward.dtype == np.float32
        ends += int(ended.sum())
        games += len(step.games)
        assert all(0 <= index < num_envs and length > 0 for index, _, length in step.games)
    assert ends > 0 and games > 0
    vector.close()


def test_atari_vector_reports_whole_games_with_raw_returns():
    """Lives end learning episodes, not games: whole games are fewer than terminations, and a game's
    return is the sum of its raw (unclipped) rewards."""
    vector = AtariVector(_env_config("atari.yaml"), 2, seed=1)
    vector.reset()
    rng = np.random.default_rng(1)
    running, terminations, games = np.zeros(2), 0, []
    for _ in range(1500):
        step = vector.step(rng.integers(0, 4, 2))
        running += step.reward
        terminations += int(step.terminated.sum())
        for index, episode_return, _ in step.games:
            assert episode_return == running[index]
            running[index] = 0.0
            games.append(episode_return)
    assert games and terminations >= 3 * len(games)


def test_seeds_give_each_env_its_own_game():
    vector, _ = make_vector_env(_env_config("cartpole.yaml"), 3, seed=5)
    frames = vector.reset()
    assert len({tuple(f) for f in frames}) == 3


@pytest.mark.slow
@pytest.mark.parametrize("env", ["CartPole", "Breakout"])
def test_train_with_vector_envs_counts_env_steps_across_envs(env, tmp_path):
    args = [*(TINY if env == "CartPole" else ["--env", env, *TINY_RUN]), "--num-envs", "4", "--training-interval", "2", "--total-steps", "600",
            "--learning-starts", "200", "--logdir", str(tmp_path), "--run-name", env]
    if env == "Breakout":
        args += ["--set", "replay.capacity=2000", "--set", "run.final_eval_episodes=1",
                 "--set", "env.max_episode_frames=1000", "--set", "env.screen_size=42"]  # 42x42: a quarter of the update
    result = train_in_process(*args)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / env / "summary.json").read_text())
    assert summary["num_envs"] == 4 and summary["env_steps"] == 600
    assert summary["updates"] == (600 - 200) // 2  # training_interval counts env steps over all envs


@pytest.mark.slow
def test_vector_runs_are_reproducible(tmp_path):
    rows = []
    for name in ("a", "b"):
        result = train_in_process(*TINY, "--num-envs", "3", "--total-steps", "900", "--logdir", str(tmp_path),
                                  "--run-name", name)
        assert result.returncode == 0, result.stderr
        rows.append((tmp_path / name / "episodes.csv").read_text())
    assert rows[0] == rows[1] and len(rows[0].splitlines()) > 10


def _steps_equal(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a[:5], b[:5])) and a.games == b.games


def test_gym_vector_env_pickles_mid_episode_and_continues_exactly():
    """A checkpoint can hold N CartPole envs mid-episode: the restored copy steps exactly as the original."""
    vector, _ = make_vector_env(_env_config("cartpole.yaml"), 3, seed=2)
    assert isinstance(vector, GymVectorEnv)
    vector.reset()
    rng = np.random.default_rng(0)
    for _ in range(25):
        vector.step(rng.integers(0, 2, 3))
    restored = pickle.loads(pickle.dumps(vector))
    games = 0
    for _ in range(200):
        actions = rng.integers(0, 2, 3)
        step = vector.step(actions)
        assert _steps_equal(step, restored.step(actions))
        games += len(step.games)
    assert games > 0  # episodes ended and restarted on both sides alike


@pytest.mark.parametrize("num_envs", [1, 2])
def test_a_game_capped_during_the_continuing_noop_reaches_games(num_envs):
    """Breakout, NOOP only, the frame cap 2 frames after the first lost life: the game ends inside the NOOP
    that continues it, and the vector env reports it (length: FIRE, the agent's steps, that NOOP)."""
    config = dataclasses.replace(_env_config("atari.yaml"), noop_max=0, repeat_action_probability=0.0)
    probe, _ = make_vector_env(config, 1, seed=0)
    probe.reset()
    steps = 1
    while not probe.step(np.zeros(1, np.int64)).terminated[0]:
        steps += 1
    probe.close()
    life_lost_at = config.frame_skip * (1 + steps)  # the FIRE and the agent's steps, whole frame skips
    capped = dataclasses.replace(config, max_episode_frames=life_lost_at + 2)
    vector, _ = make_vector_env(capped, num_envs, seed=0)
    vector.reset()
    for _ in range(steps - 1):
        assert not vector.step(np.zeros(num_envs, np.int64)).games
    step = vector.step(np.zeros(num_envs, np.int64))
    assert step.terminated.all() and not step.truncated.any()
    assert step.games == [(i, 0.0, 1 + steps + 1) for i in range(num_envs)]
    vector.close()


def test_atari_vector_noop_start_is_zero_to_noop_max_emulator_frames():
    """ale-py draws 0..n-1 no-op frames; given n = noop_max + 1 it starts each game 0..noop_max frames in."""
    config = dataclasses.replace(_env_config("atari.yaml"), noop_max=2, fire_on_reset=False,
                                 repeat_action_probability=0.0)
    vector = AtariVector(config, 1, seed=0)
    counts = set()
    for seed in range(20):  # a reset with a seed reloads the game (0.1 CPU-s); seeds 0-5 already start 0, 1 and 2 in
        vector.reset(seed=seed)
        counts.add(int(vector.episode_frame_numbers[0]))
    vector.close()
    assert counts == {0, 1, 2}
