"""One Atari protocol for the one-env pipeline (`make_env`) and ale-py's vector env (`AtariVector`): a
no-op start of 0..noop_max emulator frames, and the frame cap counted after it (Dopamine's runner
counts its episode cap from the first agent step after its no-ops). Frame counts are ALE's own."""

import dataclasses

import numpy as np

from tfdqn.config import EnvConfig
from tfdqn.envs.atari_vector import AtariVector
from tfdqn.envs.make import describe_protocol, make_env

# No FIRE and no sticky actions: the only frames before the agent's first step are the no-op start.
PLAIN = EnvConfig(id="Breakout", frame_stack=4, noop_max=3, fire_on_reset=False, terminal_on_life_loss=False,
                  repeat_action_probability=0.0)
CAP = 202  # not a multiple of the frame skip: the cap falls inside an agent step


def _single_start_frames(seeds) -> set:
    counts = set()
    env, _ = make_env(PLAIN, seed=0)
    for seed in seeds:
        counts.add(int(env.reset(seed=seed)[1]["episode_frame_number"]))
    env.close()
    return counts


def _vector_start_frames(seeds) -> set:
    vector = AtariVector(PLAIN, 2, seed=0)
    counts = set()
    for seed in seeds:
        vector.reset(seed=seed)
        counts |= set(vector.episode_frame_numbers.tolist())
    vector.close()
    return counts


def test_both_draw_the_no_op_start_from_zero_to_noop_max_frames():
    assert _single_start_frames(range(12)) == _vector_start_frames(range(12)) == {0, 1, 2, 3}


def _actions(steps: int) -> np.ndarray:
    return np.where(np.arange(steps) % 2 == 0, 2, 3)  # RIGHT, LEFT: the game goes on without FIRE


def _single_capped_game(seed: int) -> tuple[int, int]:
    """(no-op start, ALE's frame count when the game was truncated) of the one-env pipeline."""
    env, _ = make_env(dataclasses.replace(PLAIN, noop_max=30, max_episode_frames=CAP), seed=seed)
    start = int(env.reset()[1]["episode_frame_number"])
    for action in _actions(100):
        _, _, terminated, truncated, info = env.step(int(action))
        if terminated or truncated:
            break
    env.close()
    assert truncated and not terminated
    return start, int(info["episode_frame_number"])


def _vector_capped_game(seed: int) -> tuple[int, int]:
    vector = AtariVector(dataclasses.replace(PLAIN, noop_max=30, max_episode_frames=CAP), 1, seed=seed)
    vector.reset()
    start = int(vector.episode_frame_numbers[0])
    for action in _actions(100):
        step = vector.step(np.array([action]))
        if step.terminated[0] or step.truncated[0]:
            break
    ended_at = int(vector.frame_numbers[0] - vector.episode_frame_numbers[0])  # ALE reset it in the same step
    vector.close()
    assert step.truncated[0] and not step.terminated[0]
    return start, ended_at


def test_both_truncate_the_game_cap_frames_after_the_no_op_start():
    for seed in (0, 1, 2):
        for start, ended_at in (_single_capped_game(seed), _vector_capped_game(seed)):
            assert ended_at - start == CAP
    assert {_single_capped_game(s)[0] for s in range(6)} - {0}  # no-op starts that are not 0 were played


def test_the_protocol_line_says_what_both_play():
    _, spec = make_env(PLAIN, seed=0)
    line = describe_protocol(dataclasses.replace(PLAIN, max_episode_frames=CAP), spec, 0.0)
    assert "no-op start of 0-3 emulator frames" in line
    assert f"games capped at {CAP} emulator frames after the no-op start" in line
