"""Atari end to end with the real ALE: replay stacks against the env's, training, evaluation and video."""

import json

import cv2
import numpy as np
import pytest

from tfdqn.config import EnvConfig
from tfdqn.envs.make import make_env
from tfdqn.replay.ring import ReplayRing
from tfdqn.replay.frame_stack import FrameStack


def test_replay_rebuilds_exactly_the_stacks_breakout_produced():
    # A 100-agent-step cap forces truncations; life losses are terminations; 301 slots wrap twice.
    env, spec = make_env(EnvConfig(id="Breakout", frame_stack=4, max_episode_frames=400), seed=5)
    replay = ReplayRing(301, spec.frame_shape, spec.frame_dtype, spec.stack_size, seed=0)
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
def test_breakout_trains_and_evaluates_with_video(tmp_path, run_cmd):
    result = run_cmd("tfdqn.train", "--env", "Breakout", "--total-steps", "2000", "--learning-starts", "1000",
                     "--set", "replay.capacity=5000", "--set", "run.final_eval_episodes=1",
                     "--set", "run.eval_every=1000", "--set", "run.eval_episodes=1", "--quiet",
                     "--logdir", str(tmp_path), "--run-name", "breakout")
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "breakout"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_id"] == "ALE/Breakout-v5" and summary["updates"] == 250
    assert summary["replay_capacity"] == 5000 and summary["replay_bytes"] / 5000 <= 7200
    assert "replay: 5,000 transitions" in result.stdout

    video = tmp_path / "out.mp4"
    result = run_cmd("tfdqn.evaluate", str(run_dir), "--episodes", "1", "--epsilon", "0.05", "--video", str(video))
    assert result.returncode == 0, result.stderr
    assert "epsilon 0.05" in result.stdout and "sticky actions p=0.25" in result.stdout
    report = json.loads(result.stdout.strip().splitlines()[-1])
    capture = cv2.VideoCapture(str(video))
    frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    ok, first = capture.read()
    # The 210x160 screen scaled 3x, with the 32-pixel caption strip under it (tfdqn.video).
    assert ok and first.shape == (3 * 210 + 32, 3 * 160, 3) and frames == report["video_frames"] > 10


@pytest.mark.slow
def test_logged_returns_are_raw_while_the_loss_sees_clipped_rewards(tmp_path, run_cmd):
    # Space Invaders scores 5 to 30 per alien: raw game scores are multiples of 5 and far above the
    # number of rewarded steps, which is what clipped rewards would sum to.
    result = run_cmd("tfdqn.train", "--env", "SpaceInvaders", "--total-steps", "1600", "--learning-starts", "600",
                     "--set", "replay.capacity=3000", "--set", "run.final_eval_episodes=1", "--quiet",
                     "--logdir", str(tmp_path), "--run-name", "si")
    assert result.returncode == 0, result.stderr
    rows = (tmp_path / "si" / "episodes.csv").read_text().splitlines()[1:]
    returns = [float(row.split(",")[1]) for row in rows]
    assert returns and all(r % 5 == 0 for r in returns) and max(returns) >= 50, returns
    # The learner the run's saved config builds takes those raw scores and computes its TD loss on their
    # signs: with terminal transitions the target is the reward itself, so the loss is known exactly.
    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent

    config = config_lib.build_config([tmp_path / "si" / "config.yaml"], {})
    agent = make_agent(config, (4, 84, 84), np.uint8, 6)
    rng = np.random.default_rng(0)
    observation = rng.integers(0, 256, (32, 4, 84, 84), dtype=np.uint8)
    action = rng.integers(0, 6, 32).astype(np.int32)
    reward = rng.choice([0.0, 5.0, 10.0, 30.0], 32).astype(np.float32)
    q_taken = agent.online(observation).numpy()[np.arange(32), action]

    def huber_mean(target):
        error = np.abs(target - q_taken)
        return np.mean(np.where(error <= 1.0, 0.5 * error**2, error - 0.5))

    metrics = agent.learner.update(observation, action, reward, np.zeros(32, np.float32), observation)
    assert float(metrics["td_loss"]) == pytest.approx(huber_mean(np.sign(reward)), rel=1e-4)
    assert float(metrics["td_loss"]) != pytest.approx(huber_mean(reward), rel=1e-2)
