"""Atari end to end with the real ALE: replay stacks against the env's, training, evaluation and video."""

import json

import cv2
import numpy as np
import pytest

from tests.conftest import main_in_process, train_in_process
from tfdqn.config import EnvConfig
from tfdqn.envs.make import make_env
from tfdqn.replay.ring import ReplayRing
from tfdqn.replay.frame_stack import FrameStack


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_replay_rebuilds_exactly_the_stacks_breakout_produced(compression):
    # A 100-agent-step cap forces truncations; life losses are terminations; 301 slots wrap twice.
    env, spec = make_env(EnvConfig(id="Breakout", frame_stack=4, max_episode_frames=400), seed=5)
    replay = ReplayRing(301, spec.frame_shape, spec.frame_dtype, spec.stack_size, seed=0, compression=compression)
    stack = FrameStack(1, spec.stack_size, spec.frame_shape, spec.frame_dtype)
    rng = np.random.default_rng(0)
    frame, _ = env.reset()
    stack.reset(0, frame)
    written = {}  # slot -> what the env produced for the transition stored there
    ends = {"terminated": 0, "truncated": 0}
    for _ in range(800):
        observation = stack.observation[0]
        action = int(rng.integers(spec.num_actions))
        next_frame, reward, terminated, truncated, _ = env.step(action)
        next_observation = np.concatenate([observation[1:], next_frame[None]])
        slot = int(replay._cursor[0])
        replay.add(frame[None], [action], [reward], [terminated], [truncated], next_frame[None])
        written[slot] = (observation, action, reward, 0.0 if terminated else 1.0, next_observation)
        if terminated or truncated:
            ends["terminated" if terminated else "truncated"] += 1
            written.pop((int(replay._cursor[0]) - 1) % replay.capacity, None)  # the final-frame slot
            next_frame, _ = env.reset()
            stack.reset(0, next_frame)
        else:
            stack.push(next_frame[None])
        frame = next_frame
    assert ends["terminated"] >= 3 and ends["truncated"] >= 2, ends
    valid = np.flatnonzero(replay.is_sampleable(np.arange(replay.capacity)))
    assert len(valid) == len(replay) > 250
    batch = replay.gather(valid)
    for i, slot in enumerate(valid):
        observation, action, reward, bootstrap, next_observation = written[int(slot)]
        np.testing.assert_array_equal(batch.observation[i], observation)
        np.testing.assert_array_equal(batch.next_observation[i], next_observation)
        assert (batch.action[i], batch.reward[i], batch.bootstrap[i]) == (action, reward, bootstrap)


@pytest.mark.slow
def test_breakout_trains_and_evaluates_with_video(tmp_path):
    result = train_in_process("--env", "Breakout", "--total-steps", "1000", "--learning-starts", "500",
                              "--set", "replay.capacity=5000", "--set", "run.final_eval_episodes=1",
                              "--set", "run.eval_every=500", "--set", "run.eval_episodes=1", "--quiet",
                              "--logdir", str(tmp_path), "--run-name", "breakout")
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "breakout"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_id"] == "ALE/Breakout-v5" and summary["updates"] == 125
    assert summary["replay_capacity"] == 5000 and summary["replay_bytes"] / 5000 <= 7200
    assert "replay: 5,000 transitions" in result.stdout

    # `python -m tfdqn.evaluate`'s main, in this process (no TensorFlow start-up of its own): the test reads it back
    from tfdqn.evaluate import main as evaluate_main

    video = tmp_path / "out.mp4"
    result = main_in_process(evaluate_main, str(run_dir), "--episodes", "1", "--epsilon", "0.05", "--video", str(video))
    assert result.returncode == 0, result.stderr
    assert "epsilon 0.05" in result.stdout and "sticky actions p=0.25" in result.stdout
    report = json.loads(result.stdout.strip().splitlines()[-1])
    capture = cv2.VideoCapture(str(video))
    frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    ok, first = capture.read()
    # The 210x160 screen scaled 3x, with the 32-pixel caption strip under it (tfdqn.policy.video).
    assert ok and first.shape == (3 * 210 + 32, 3 * 160, 3) and frames == report["video_frames"] > 10


@pytest.mark.slow
def test_a_run_with_compressed_frames_is_the_same_run(tmp_path):
    """Same seed, replay.compression none and zstd: the same games, losses and final evaluation."""
    summaries, episodes = [], []
    for compression in ("none", "zstd"):
        result = train_in_process("--env", "Pong", "--total-steps", "400", "--learning-starts", "300",
                                  "--set", "replay.capacity=3000", "--set", "run.training_interval=2",
                                  "--set", f"replay.compression={compression}", "--set", "run.final_eval_episodes=1",
                                  "--set", "env.max_episode_frames=500", "--quiet", "--logdir", str(tmp_path),
                                  "--run-name", compression)
        assert result.returncode == 0, result.stderr
        summaries.append(json.loads((tmp_path / compression / "summary.json").read_text()))
        episodes.append((tmp_path / compression / "episodes.csv").read_text())
    assert episodes[0] == episodes[1] and len(episodes[0].splitlines()) >= 3
    assert summaries[0]["final_eval_returns"] == summaries[1]["final_eval_returns"]
    assert summaries[0]["updates"] == summaries[1]["updates"] == 50
    assert [s["replay_compression"] for s in summaries] == ["none", "zstd"] and summaries[1]["replay_fewest_held"] is None
    assert summaries[1]["replay_slots_held"] == summaries[1]["replay_slots_filled"] > 400
    assert summaries[0]["replay_memory_bytes"] == summaries[0]["replay_bytes"]  # raw: all of it up front
    # Pong's frames: about 180 bytes each with zstd (docs/experiments/replay.md), beside 50 per slot of records up front
    assert summaries[1]["replay_memory_bytes"] / summaries[1]["replay_slots_filled"] < 1000


@pytest.mark.slow
def test_logged_returns_are_raw_game_scores_while_the_replay_clips(tmp_path):
    # Space Invaders scores 5 to 30 per alien: raw game scores are multiples of 5 and far above the
    # number of rewarded steps, which is what clipped rewards would sum to. (The replay's clipping is
    # checked against the env's own rewards below; this run needs no update.) Games cut at 1600 emulator frames (400
    # agent steps): two of them.
    result = train_in_process("--env", "SpaceInvaders", "--total-steps", "800", "--learning-starts", "800",
                              "--set", "replay.capacity=3000", "--set", "run.final_eval_episodes=1",
                              "--set", "env.max_episode_frames=1600", "--quiet",
                              "--logdir", str(tmp_path), "--run-name", "si")
    assert result.returncode == 0, result.stderr
    rows = (tmp_path / "si" / "episodes.csv").read_text().splitlines()[1:]
    returns = [float(row.split(",")[1]) for row in rows]
    assert returns and all(r % 5 == 0 for r in returns) and max(returns) >= 50, returns


@pytest.mark.parametrize("game", ["Breakout", "SpaceInvaders"])  # Breakout's random play scores 1s; Space Invaders 5 to 30
def test_three_step_returns_sum_each_clipped_reward_as_a_step_index_reference_does(game):
    """Real ALE rewards, life-loss terminations and frame-cap truncations go into a 3-step ring that clips;
    every frame holds its step index (a final frame: minus the index), so each sampled transition names
    the steps its reward and discount must come from."""
    n, gamma = 3, 0.99
    env, spec = make_env(EnvConfig(id=game, frame_stack=4, max_episode_frames=600), seed=7)
    replay = ReplayRing(3000, (1,), np.int64, 4, seed=0, n_step=n, gamma=gamma, clip_rewards=True)
    rng = np.random.default_rng(0)
    env.reset()
    steps = []  # (raw reward, terminated, truncated) of step t
    for t in range(2000):
        _, reward, terminated, truncated, _ = env.step(int(rng.integers(spec.num_actions)))
        replay.add([[t]], [0], [reward], [terminated], [truncated], [[-(t + 1)]])
        steps.append((reward, terminated, truncated))
        if terminated or truncated:
            env.reset()
    assert {"terminated", "truncated"} <= {kind for _, te, tr in steps for kind, on in
                                             (("terminated", te), ("truncated", tr)) if on}
    indices = np.flatnonzero(replay.is_sampleable(np.arange(replay.capacity)))
    batch = replay.gather(indices)
    for t, reward, bootstrap, following in zip(batch.observation[:, -1, 0], batch.reward, batch.bootstrap,
                                                batch.next_observation[:, -1, 0]):
        expected, m = 0.0, 0
        while m < n:
            raw, terminated, truncated = steps[t + m]
            expected += gamma ** m * np.sign(raw)
            m += 1
            if terminated or truncated:
                break
        ended = steps[t + m - 1][1] or steps[t + m - 1][2]
        assert reward == pytest.approx(expected, rel=1e-6)
        assert bootstrap == pytest.approx(0.0 if steps[t + m - 1][1] else gamma ** (m - 1))
        assert following == (-(t + m) if ended else t + m)
    assert game == "Breakout" or max(r for r, _, _ in steps) > 1  # where clipping changes the sums
