"""Real gymnasium and real ALE (Breakout); each ALE test emulates a few thousand frames at most."""

import dataclasses
import importlib.util

import gymnasium
import numpy as np
import pytest

from tfdqn import config as C
from tfdqn.config import EnvConfig
from tfdqn.envs.make import EnvSpec, describe_protocol, make_env, resolve_env_id
from tfdqn.envs.vector import make_vector_env
from tfdqn.errors import UserError

NOOP, FIRE = 0, 1  # Breakout's minimal action set: NOOP, FIRE, RIGHT, LEFT

BREAKOUT = EnvConfig(id="Breakout", frame_stack=4)


@pytest.mark.parametrize("name, env_id", [
    ("CartPole", "CartPole-v1"),
    ("cartpole", "CartPole-v1"),
    ("CartPole-v1", "CartPole-v1"),
    ("CartPole-v0", "CartPole-v0"),
    ("cartpole-v1", "CartPole-v1"),
    ("Acrobot", "Acrobot-v1"),
    ("Acrobot-v1", "Acrobot-v1"),
    ("MountainCar", "MountainCar-v0"),
    ("MountainCar-v0", "MountainCar-v0"),
    ("Breakout", "ALE/Breakout-v5"),
    ("breakout", "ALE/Breakout-v5"),
    ("BREAKOUT", "ALE/Breakout-v5"),
    ("Pong", "ALE/Pong-v5"),
    ("SpaceInvaders", "ALE/SpaceInvaders-v5"),
    ("space_invaders", "ALE/SpaceInvaders-v5"),
    ("space-invaders", "ALE/SpaceInvaders-v5"),
    ("ALE/Breakout-v5", "ALE/Breakout-v5"),
    ("ALE/breakout", "ALE/Breakout-v5"),
    ("Breakout-v5", "ALE/Breakout-v5"),
    ("BreakoutNoFrameskip-v4", "BreakoutNoFrameskip-v4"),
    ("  Pong ", "ALE/Pong-v5"),
])
def test_resolve_env_id(name, env_id):
    assert resolve_env_id(name) == env_id


@pytest.mark.parametrize("name, suggestion", [
    ("Brekout", "did you mean Breakout?"),
    ("CartPol", "did you mean CartPole?"),
    ("CartPole-v9", "did you mean CartPole-v1?"),
    ("no-such-thing", None),
    ("", None),
])
def test_unknown_env_is_one_line_user_error(name, suggestion):
    with pytest.raises(UserError) as caught:
        resolve_env_id(name)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"unknown env {name!r}")
    assert "allowed: a gymnasium id (CartPole-v1" in message and "ALE game name (Breakout" in message
    assert "your own env as module:EnvId" in message
    if suggestion:
        assert suggestion in message
    else:
        assert "did you mean" not in message


def test_continuous_actions_are_refused_in_one_line():
    with pytest.raises(UserError) as caught:
        make_env(EnvConfig(id="Pendulum-v1"), seed=0)
    message = str(caught.value)
    assert "\n" not in message
    assert "Pendulum-v1" in message and "Box" in message and "allowed: a Discrete action space" in message


class _TextObservation(gymnasium.Env):
    observation_space = gymnasium.spaces.Text(5)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return "tfdqn", {}


gymnasium.register("TextObservation-v0", entry_point=_TextObservation)


def test_an_observation_space_that_cannot_be_trained_on_is_refused_in_one_line():
    with pytest.raises(UserError) as caught:
        make_env(EnvConfig(id="TextObservation-v0"), seed=0)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("env TextObservation-v0: observation space Text(1, 5, charset=")
    assert message.endswith("cannot be trained on; allowed: Box, Discrete, MultiDiscrete, MultiBinary, and Tuple or "
                            "Dict of those")


@pytest.mark.parametrize("name, frame_shape, num_actions", [
    ("CartPole", (4,), 2),
    ("Acrobot", (6,), 3),
])
def test_vector_env_spec_and_frames(name, frame_shape, num_actions):
    env, spec = make_env(EnvConfig(id=name, frame_stack=4), seed=0)
    assert spec == EnvSpec(env_id=resolve_env_id(name), is_atari=False, frame_shape=frame_shape,
                           frame_dtype=np.dtype(np.float32), stack_size=1, observation_shape=frame_shape,
                           num_actions=num_actions, action_meanings=None)
    frame, info = env.reset()
    assert frame.shape == frame_shape and frame.dtype == np.float32
    assert info["game_over"] is False
    result = env.step(0)
    assert len(result) == 5
    assert result[0].shape == frame_shape and result[0].dtype == np.float32
    env.close()


def test_vector_env_episode_statistics_and_seed():
    env, _ = make_env(EnvConfig(id="CartPole"), seed=7)
    twin, _ = make_env(EnvConfig(id="CartPole"), seed=7)
    frame, _ = env.reset()
    np.testing.assert_array_equal(frame, twin.reset()[0])
    assert env.action_space.sample() == twin.action_space.sample()
    total, steps = 0.0, 0
    while True:
        frame, reward, terminated, truncated, info = env.step(0)
        total, steps = total + reward, steps + 1
        assert info["game_over"] == (terminated or truncated)
        assert ("episode" in info) == info["game_over"]
        if info["game_over"]:
            break
    assert terminated and info["episode"]["r"] == total and info["episode"]["l"] == steps
    # Only the first reset is seeded: the next game starts from a new state.
    first, _ = twin.reset(seed=7)
    assert not np.array_equal(env.reset()[0], first)


@pytest.mark.parametrize("frame_stack, observation_shape", [(4, (4, 84, 84)), (1, (84, 84))])
def test_breakout_spec_and_frames(frame_stack, observation_shape):
    env, spec = make_env(EnvConfig(id="Breakout", frame_stack=frame_stack), seed=0)
    assert spec == EnvSpec(env_id="ALE/Breakout-v5", is_atari=True, frame_shape=(84, 84),
                           frame_dtype=np.dtype(np.uint8), stack_size=frame_stack,
                           observation_shape=observation_shape, num_actions=4,
                           action_meanings=("NOOP", "FIRE", "RIGHT", "LEFT"))
    frame, info = env.reset()
    assert frame.shape == (84, 84) and frame.dtype == np.uint8
    assert info["lives"] == 5 and info["game_over"] is False and info["life_lost"] is False
    frame, reward, terminated, truncated, info = env.step(2)
    assert frame.shape == (84, 84) and frame.dtype == np.uint8 and frame.max() > 0
    assert isinstance(reward, float) and not terminated and not truncated
    env.close()


def test_training_life_loss_is_terminal_but_the_game_goes_on():
    env, _ = make_env(BREAKOUT, seed=1)
    rng = np.random.default_rng(0)
    frame, info = env.reset()
    lives, game_frames = info["lives"], info["episode_frame_number"]
    total, steps, life_losses = 0.0, 0, 0
    while True:
        frame, reward, terminated, truncated, info = env.step(int(rng.integers(4)))
        total, steps = total + reward, steps + 1
        assert not truncated
        assert info["episode_frame_number"] > game_frames  # the same game throughout
        game_frames = info["episode_frame_number"]
        assert terminated == info["life_lost"]  # every lost life is terminal for learning
        assert ("episode" in info) == info["game_over"]
        if info["game_over"]:
            break
        if terminated:
            life_losses += 1
            assert info["lives"] == lives - 1
            lives = info["lives"]
            frame, info = env.reset()  # no real reset: same lives, frames go on
            assert info["lives"] == lives and info["episode_frame_number"] > game_frames
            assert frame.shape == (84, 84)
    assert life_losses == 4 and info["lives"] == 0 and terminated
    assert total > 0  # a game with some score, so the next check means something
    assert info["episode"]["r"] == total  # raw return of the whole game, over all lives
    # Length in agent steps, counting the wrappers' presses: FIRE after each of the 5 resets
    # (1 real, 4 after lost lives) and the NOOP of each of the 4 continuing resets.
    assert info["episode"]["l"] == steps + 5 + 4
    frame, info = env.reset()  # a real reset after game over
    assert info["lives"] == 5 and info["episode_frame_number"] < game_frames
    env.close()


def test_evaluation_plays_one_action_per_step_and_never_stalls():
    """Evaluation handles a lost life as training does: the step ends the episode (not the game), and the
    reset continues the game with NOOP then FIRE, the wrappers' own steps. No agent step holds two
    actions (each advances at most frame_skip emulator frames), and a greedy agent that only ever
    chooses NOOP cannot stall the game."""
    env, _ = make_env(BREAKOUT, seed=1, evaluation=True)
    frame, info = env.reset()
    frames_before, life_losses, steps = info["episode_frame_number"], 0, 0
    while True:
        frame, reward, terminated, truncated, info = env.step(NOOP)
        steps += 1
        assert not truncated and steps < 1000
        assert 0 < info["episode_frame_number"] - frames_before <= BREAKOUT.frame_skip  # one action
        assert ("episode" in info) == info["game_over"]
        life_losses += info["life_lost"]
        assert terminated == info["life_lost"]
        if info["game_over"]:
            break
        if terminated:
            frame, info = env.reset()  # continues the game
            assert info["lives"] == 5 - life_losses and not info["game_over"]
        frames_before = info["episode_frame_number"]
    assert life_losses == 5 and info["lives"] == 0
    # FIRE after the real reset and each of the 4 continuing resets, and those resets' NOOPs.
    assert info["episode"]["l"] == steps + 5 + 4
    env.close()


def test_without_life_loss_terminal_fire_comes_only_after_a_reset():
    """`terminal_on_life_loss=False`: no wrapper presses FIRE inside a step (ALE v5's protocol: the agent
    presses FIRE after a lost life itself), so a NOOP-only player stalls after its first lost life."""
    config = dataclasses.replace(BREAKOUT, terminal_on_life_loss=False)
    for evaluation in (False, True):
        env, _ = make_env(config, seed=1, evaluation=evaluation)
        _, info = env.reset()
        frames_before, life_losses = info["episode_frame_number"], 0
        for _ in range(300):
            _, _, terminated, truncated, info = env.step(NOOP)
            assert not (terminated or truncated)
            assert info["episode_frame_number"] - frames_before == BREAKOUT.frame_skip
            frames_before = info["episode_frame_number"]
            life_losses += info["life_lost"]
        assert life_losses == 1
        env.close()


def test_fire_on_reset_launches_the_ball():
    """Without FIRE a NOOP-only player never loses a life; with it the ball is in play from the reset."""
    lives_lost = {}
    for fire in (False, True):
        config = dataclasses.replace(BREAKOUT, fire_on_reset=fire, noop_max=0, repeat_action_probability=0.0)
        env, _ = make_env(config, seed=0)
        _, info = env.reset()
        assert info["episode_frame_number"] == (4 if fire else 0)  # one FIRE agent step = 4 frames
        lives_lost[fire] = 0
        for _ in range(150):
            _, _, terminated, _, info = env.step(NOOP)
            lives_lost[fire] += info["life_lost"]
            if terminated:
                env.reset()
        env.close()
    assert lives_lost == {False: 0, True: lives_lost[True]} and lives_lost[True] >= 3


@pytest.mark.parametrize("evaluation", [False, True])
def test_frame_cap_truncates_and_the_next_reset_is_real(evaluation):
    config = dataclasses.replace(BREAKOUT, max_episode_frames=500)
    env, _ = make_env(config, seed=0, evaluation=evaluation)
    rng = np.random.default_rng(1)
    # The no-op start, which the cap counts after: the reset's frames less those of its FIRE step.
    start = env.reset()[1]["episode_frame_number"] - config.frame_skip
    for _ in range(200):
        frame, reward, terminated, truncated, info = env.step(int(rng.integers(2, 4)))  # RIGHT or LEFT
        if truncated:
            break
        if terminated:
            assert not info["game_over"]
            env.reset()
    assert truncated and not terminated
    assert info["game_over"] and "episode" in info and info["lives"] > 0
    assert info["episode_frame_number"] == start + 500
    frame, info = env.reset()
    assert info["lives"] == 5 and info["episode_frame_number"] < 100
    env.close()


def run_breakout(seed: int, steps: int = 300):
    """Frames, rewards and ends of a Breakout run with a fixed action sequence."""
    env, _ = make_env(BREAKOUT, seed=seed)
    actions = np.random.default_rng(123).integers(4, size=steps)
    frame, _ = env.reset()
    frames, rewards, ends = [frame], [], []
    for action in actions:
        frame, reward, terminated, truncated, _ = env.step(int(action))
        rewards.append(reward)
        ends.append((terminated, truncated))
        if terminated or truncated:
            frame, _ = env.reset()
        frames.append(frame)
    env.close()
    return np.stack(frames), np.array(rewards), ends


def test_same_seed_same_run_different_seed_different_run():
    frames, rewards, ends = run_breakout(seed=5)
    again_frames, again_rewards, again_ends = run_breakout(seed=5)
    np.testing.assert_array_equal(frames, again_frames)
    np.testing.assert_array_equal(rewards, again_rewards)
    assert ends == again_ends
    other_frames, _, _ = run_breakout(seed=6)
    assert not np.array_equal(frames, other_frames)


def test_describe_protocol():
    _, spec = make_env(BREAKOUT, seed=0)
    assert describe_protocol(BREAKOUT, spec, 0.05) == (
        "protocol: ALE/Breakout-v5, epsilon 0.05, no-op start of 0-30 emulator frames, sticky actions p=0.25, "
        "frame skip 4 (max-pooled), 84x84 grayscale, stack 4, FIRE after each new game, a lost life is "
        "terminal for learning, returns are whole games (the game goes on: NOOP then FIRE), games capped at 108000 "
        "emulator frames after the no-op start")
    plain = dataclasses.replace(BREAKOUT, noop_max=0, fire_on_reset=False, terminal_on_life_loss=False)
    assert describe_protocol(plain, spec, 0.0) == (
        "protocol: ALE/Breakout-v5, epsilon 0, no no-op start, sticky actions p=0.25, frame skip 4 (max-pooled), "
        "84x84 grayscale, stack 4, games capped at 108000 emulator frames")
    config = EnvConfig(id="CartPole")
    _, spec = make_env(config, seed=0)
    assert describe_protocol(config, spec, 0.0) == (
        "protocol: CartPole-v1, epsilon 0, episodes capped at 500 steps (TimeLimit)")


def test_render_gives_the_raw_rgb_screen_for_videos():
    env, _ = make_env(BREAKOUT, seed=0, evaluation=True, render=True)
    frame, _ = env.reset()
    screen = env.render()
    assert frame.shape == (84, 84) and screen.shape == (210, 160, 3) and screen.dtype == np.uint8
    env.close()


def test_render_without_its_package_is_a_one_line_user_error():
    if importlib.util.find_spec("pygame") is None:
        with pytest.raises(UserError) as caught:
            make_env(EnvConfig(id="CartPole"), seed=0, render=True)
        assert "\n" not in str(caught.value) and "cannot render" in str(caught.value)
    else:
        env, _ = make_env(EnvConfig(id="CartPole"), seed=0, render=True)
        env.reset()
        assert env.render().ndim == 3
        env.close()


def test_noop_start_counts_emulator_frames_zero_to_noop_max():
    """The no-op start is 0..noop_max NOOP EMULATOR FRAMES (not agent steps of frame_skip frames), as
    describe_protocol says: ALE's frame count right after a reset without FIRE takes every value 0..3."""
    config = dataclasses.replace(BREAKOUT, noop_max=3, fire_on_reset=False, repeat_action_probability=0.0)
    counts = set()
    for seed in range(30):
        env, _ = make_env(config, seed=seed)
        counts.add(env.reset()[1]["episode_frame_number"])
        env.close()
    assert counts == {0, 1, 2, 3}


def test_a_game_capped_during_the_continuing_noop_is_reported():
    """The frame cap falls inside the NOOP that continues the game after a lost life: the reset starts a
    new game, and its info carries the ended game's statistics (which the vector envs report)."""
    config = dataclasses.replace(BREAKOUT, noop_max=0, repeat_action_probability=0.0)
    env, _ = make_env(config, seed=0)
    env.reset()
    steps, terminated = 0, False
    while not terminated:
        _, _, terminated, _, info = env.step(NOOP)
        steps += 1
    env.close()
    capped = dataclasses.replace(config, max_episode_frames=info["episode_frame_number"] + 2)
    env, _ = make_env(capped, seed=0)
    env.reset()
    for _ in range(steps):
        _, _, terminated, truncated, info = env.step(NOOP)
    assert terminated and not truncated and not info["game_over"]
    _, info = env.reset()
    assert info["episode"]["l"] == 1 + steps + 1 and info["episode"]["r"] == 0  # FIRE, the steps, the NOOP
    assert info["lives"] == 5 and not info["game_over"]
    env.close()


def test_env_kwargs_reach_gymnasium_make_and_the_protocol_line():
    config = dataclasses.replace(EnvConfig(id="CartPole"), kwargs=C.EnvKwargs.of({"sutton_barto_reward": True}))
    env, spec = make_env(config, seed=0)
    try:
        assert env.unwrapped._sutton_barto_reward is True
        env.reset()
        _, reward, terminated, *_ = env.step(0)
        assert reward == (-1.0 if terminated else 0.0)  # Sutton and Barto's reward: 0 per step, -1 at the end
    finally:
        env.close()
    assert describe_protocol(config, spec, 0.0).startswith("protocol: CartPole-v1(sutton_barto_reward=True), ")


@pytest.mark.parametrize("env_id, kwargs, needle", [
    ("CartPole", {"bogus": 1}, "env CartPole-v1 does not take env.kwargs bogus=1: CartPoleEnv.__init__() got an "
                               "unexpected keyword argument 'bogus'; allowed: the keyword arguments its constructor takes"),
    ("Breakout", {"frameskip": 2}, "env.kwargs.frameskip is set by tfdqn for ALE/Breakout-v5; allowed: other keyword "
                                   "arguments (the env's protocol is set by env.* keys"),
])
def test_env_kwargs_the_env_refuses_or_tfdqn_sets_are_one_line_errors(env_id, kwargs, needle):
    config = dataclasses.replace(EnvConfig(id=env_id), kwargs=C.EnvKwargs.of(kwargs))
    with pytest.raises(UserError) as caught:
        make_env(config, seed=0)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_env_kwargs_pick_an_ale_mode_for_one_env_and_are_refused_for_the_vector_emulator():
    config = dataclasses.replace(EnvConfig(id="Breakout"), kwargs=C.EnvKwargs.of({"mode": 4}))
    env, _ = make_env(config, seed=0)
    try:
        assert env.unwrapped._game_mode == 4
    finally:
        env.close()
    with pytest.raises(UserError, match="env.kwargs with 2 ALE envs: ale-py's vector emulator takes no keyword"):
        make_vector_env(config, 2, seed=0)


def test_an_image_env_of_ones_own_stays_uint8_channels_first_and_says_so():
    config = EnvConfig(id="tests.image_envs:ColorSide-v0", frame_stack=2)
    env, spec = make_env(config, seed=0)
    try:
        frame, _ = env.reset()
        raw = env.unwrapped._draw()  # the env's own [H, W, C] image
    finally:
        env.close()
    assert spec.frame_dtype == np.uint8 and spec.frame_shape == (3, 32, 32) and frame.shape == (3, 32, 32)
    assert spec.observation_shape == (2, 3, 32, 32) and spec.env_observation_shape == (2, 32, 32, 3)
    assert raw.shape == (32, 32, 3) and spec.env_channels_last
    np.testing.assert_array_equal(spec.as_env_gives(frame[None])[0], np.moveaxis(frame, 0, -1))
    assert describe_protocol(config, spec, 0.0) == ("protocol: ColorSide-v0, epsilon 0, uint8 image frames 32x32x3 "
                                                    "(HWC, stored channels first), stack 2, no time limit of its "
                                                    "own: episodes capped at 27000 steps (env.max_episode_steps), a "
                                                    "capped one counted as truncated")
