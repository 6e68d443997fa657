"""Observations that are not one Box, end to end through the command lines: a Dict of an image, a Discrete and an
action mask (tests/image_envs.py) is learned from both parts together, never takes the masked action, exports a
SavedModel that takes each Dict entry as the env gives it, and is evaluated with its illegal actions counted;
Taxi's info mask is found by itself."""

import json

import numpy as np

import tfdqn
from tests.conftest import train_in_process

ENV = "tests.image_envs:ColorSideFlipped-v0"


def test_a_dict_of_image_bit_and_mask_is_learned_exported_and_evaluated(tmp_path, capsys):
    # Each step's reward is the action's own, so gamma 0 and 1-step targets learn it fastest (here every greedy
    # game scored 10 from env step 768, the second round of updates, on)
    result = train_in_process("--env", ENV, "--total-steps", "1280", "--learning-starts", "500",
                              "--set", "learner.gamma=0", "--set", "learner.n_step=1", "--set", "run.eval_every=0",
                              "--quiet", "--logdir", str(tmp_path), "--run-name", "r")
    assert result.returncode == 0, result.stderr
    assert ("observation dict (flip: one-hot of 2, image: uint8 image 16x16x3 (HWC)), legal-action mask from "
            "observation:action_mask, 772 bytes per state in the replay") in result.stdout
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["final_eval_return_mean"] >= 9, summary["final_eval_returns"]  # either part alone: 5 of 10

    policy = tfdqn.load_policy(tmp_path / "r" / "policy", seed=0)  # the SavedModel, one input per Dict entry
    rng = np.random.default_rng(0)
    images = np.zeros((400, 16, 16, 3), np.uint8)
    sides, flips = rng.integers(0, 2, 400), rng.integers(0, 2, 400)
    for image, side in zip(images, sides):
        image[4:8, 2 + 8 * side:6 + 8 * side] = 200
    batch = {"action_mask": np.tile([1, 1, 0], (400, 1)), "flip": flips, "image": images}
    assert np.mean(policy.act(batch) == sides ^ flips) >= 0.9
    assert set(np.unique(policy.act(batch, epsilon=1.0))) == {0, 1}  # random actions are legal ones too
    one = {"action_mask": np.array([1, 1, 0]), "flip": 1, "image": images[0]}
    assert policy.act(one) == sides[0] ^ 1 and policy.q_values(one).shape == (3,)

    # the command lines in this process: its env is registered here already, and no TensorFlow starts again
    from tfdqn.evaluate import main as evaluate
    from tfdqn.export import main as export

    capsys.readouterr()
    assert evaluate([str(tmp_path / "r"), "--episodes", "3", "--import", "tests.image_envs"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["illegal_actions"] == 0 and report["return_mean"] >= 9

    assert export([str(tmp_path / "r"), "--format", "litert", "--out", str(tmp_path / "lite")]) == 0
    parity = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["litert"]["float32"]
    assert parity["action_agreement"] == 1.0 and parity["max_abs_q_difference"] < 1e-4
    lite = tfdqn.load_policy(tmp_path / "lite" / "policy.tflite")  # one input per Dict entry, as the SavedModel
    np.testing.assert_allclose(lite.q_values(batch), policy.q_values(batch), atol=1e-4)
    assert export([str(tmp_path / "r"), "--format", "litert", "--quantize", "int8"], prog="tfdqn export") == 2
    assert capsys.readouterr().err.strip().endswith(
        "--quantize int8 takes a policy of Box observations; ColorSideFlipped-v0's are dict parts; allowed: "
        "--quantize none (float32 LiteRT)")


def test_taxi_masks_are_read_from_the_info_and_a_bad_source_is_refused(tmp_path):
    from tfdqn.config import EnvConfig
    from tfdqn.envs.make import make_env

    env, spec = make_env(EnvConfig(id="Taxi-v4"), seed=3)
    frame, info = env.reset()
    assert spec.layout.mask_source == "info:action_mask" and spec.frame_shape == (10,)
    np.testing.assert_array_equal(spec.layout.legal(frame[None])[0], info["action_mask"] != 0)
    env.close()
    refused = train_in_process("--env", "Taxi-v4", "--set", "env.action_mask=observation:mask",
                               "--logdir", str(tmp_path))
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "python -m tfdqn.train: error: env Taxi-v4: env.action_mask = observation:mask, but the observation has no "
        "Dict entry 'mask'; allowed: auto, none, info:KEY or observation:KEY")
    stacked = train_in_process("--env", "Taxi-v4", "--set", "env.frame_stack=4", "--logdir", str(tmp_path))
    assert stacked.returncode == 2 and stacked.stderr.strip() == (
        "python -m tfdqn.train: error: env.frame_stack = 4 stacks frames of one Box observation; Taxi-v4's "
        "observations are not one Box; allowed: 1 (or a wrapper that stacks inside the env)")


def test_each_deployed_policy_of_an_info_masked_env_reads_or_requires_its_mask_and_treats_an_empty_one_as_the_graph(
        tmp_path, capsys):
    """Taxi gives its legal actions in the step's info: the SavedModel, a run's checkpoint and the LiteRT model, each
    loaded as a policy, refuse a call that gives neither the mask nor the info (none acts as if every action were
    legal), read the mask from the info they are handed, and with a mask of no legal action draw among all actions,
    as the graph's legal_actions does."""
    import gymnasium

    from tfdqn.export import main as export

    result = train_in_process("--env", "Taxi-v4", "--total-steps", "600", "--learning-starts", "300",
                              "--set", "run.eval_every=0", "--set", "run.final_eval_episodes=1",  # of 200 steps each
                              "--quiet", "--logdir", str(tmp_path), "--run-name", "r")
    assert result.returncode == 0, result.stderr
    assert export([str(tmp_path / "r"), "--format", "litert", "--out", str(tmp_path / "lite")]) == 0
    capsys.readouterr()
    raw = gymnasium.make("Taxi-v4")
    state, info = raw.reset(seed=5)
    raw.close()
    policies = {"saved model": tfdqn.load_policy(tmp_path / "r" / "policy", seed=0),
                "checkpoint": tfdqn.load_policy(tmp_path / "r", seed=0),
                "litert": tfdqn.load_policy(tmp_path / "lite" / "policy.tflite", seed=0)}
    none_legal = np.zeros(6, np.int8)
    for name, policy in policies.items():
        for call in (lambda: policy.act(state), lambda: policy.q_values(state)):
            try:
                call()
            except ValueError as error:
                assert str(error) == ("this policy's env gives its legal actions in info['action_mask'], and the call "
                                      "gave no info; allowed: action_mask=... or info=... (the step's info)"), name
            else:
                raise AssertionError(f"{name}: a call with no mask acted")
        assert policy.act(state, info=info) == policy.act(state, action_mask=info["action_mask"]), name
        assert policy.act(state, info=info) in np.flatnonzero(info["action_mask"]), name
        q = policy.q_values(state, action_mask=none_legal)
        assert policy.act(state, action_mask=none_legal) == q.argmax(), name  # greedy: every action, as the graph
        explored = {int(policy.act(state, epsilon=1.0, action_mask=none_legal)) for _ in range(200)}
        assert explored == set(range(6)), (name, explored)
