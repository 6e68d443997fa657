"""LiteRT export: the serving graph converted to builtin ops only, float32 matching the network and int8
reported as it is; a CartPole product as a .tflite plays CartPole in a process that never imports
TensorFlow; the command line's one-line refusals."""

import ast
import json
import subprocess
import sys

import pytest

import tfdqn
from tests.conftest import REPO
from tfdqn.export import litert_lines, main as export_main

PLAY = """
import sys
import gymnasium
import tfdqn

policy = tfdqn.load_policy(sys.argv[1])
env = gymnasium.make("CartPole-v1")
returns = []
for game in range(5):
    observation, _ = env.reset(seed=game)
    done, total = False, 0.0
    while not done:
        observation, reward, terminated, truncated, _ = env.step(int(policy.act(observation)))
        total, done = total + reward, terminated or truncated
    returns.append(total)
print(returns, "tensorflow" in sys.modules, policy.env_id, policy.observation_shape)
"""


LITERT_FILES = (("float32", "policy.tflite"), ("int8", "policy-int8.tflite"))  # each kind, and its file


@pytest.mark.slow
def test_a_breakout_policy_converts_to_builtin_ops_float32_as_the_network_and_int8_smaller(breakout_run, tmp_path,
                                                                                           capfd):
    out = tmp_path / "policy"
    capfd.readouterr()
    assert export_main([str(breakout_run), "--format", "litert", "--quantize", "int8", "--observations", "200",
                        "--out", str(out)]) == 0
    report = json.loads((out / "policy.json").read_text())["litert"]
    # each file's agreement said in a line, a warning below 95%, and none of the converter's own lines
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    for line, (kind, name) in zip(lines, LITERT_FILES):
        agreement = report[kind]["action_agreement"]
        assert line.removeprefix("warning: ").startswith(f"{name}: its greedy action is the network's on "
                                                          f"{agreement:.1%} of 200 observations from play"), line
        assert line.startswith("warning: ") == ("below 95%" in line) == (agreement < 0.95), line
    assert report["float32"]["observations"] == 200 and report["float32"]["action_agreement"] == 1.0
    assert report["float32"]["max_abs_q_difference"] < 1e-4
    for kind, name in LITERT_FILES:
        model = (out / name).read_bytes()
        assert report[kind]["bytes"] == len(model) and b"Flex" not in model  # builtin ops only
    assert report["int8"]["bytes"] < report["float32"]["bytes"] / 3
    # as measured: docs/experiments/deployment.md gives Breakout's
    assert 0.0 <= report["int8"]["action_agreement"] <= 1.0


def test_only_a_file_below_95_percent_agreement_is_warned_of_and_each_in_one_line():
    files = {kind: {"file": f"{kind}.tflite", "action_agreement": agreement, "observations": 300}
             for kind, agreement in (("float32", 0.95), ("int8", 0.9467))}
    assert litert_lines(files) == [
        "float32.tflite: its greedy action is the network's on 95.0% of 300 observations from play",
        "warning: int8.tflite: its greedy action is the network's on 94.7% of 300 observations from play, below "
        "95%: its games can score far less than the network's; play it before deploying it, or deploy policy.tflite"]


@pytest.mark.slow
def test_a_cartpole_product_as_litert_plays_cartpole_without_tensorflow(tmp_path):
    config = tfdqn.DQNConfig.for_env("CartPole", {"run.total_steps": 3000, "run.learning_starts": 500,
                                                  "run.eval_every": 0, "run.final_eval_episodes": 5})
    summary = tfdqn.train(config, run_dir=tmp_path / "run", quiet=True)
    assert summary["final_eval_return_mean"] >= 475  # the product, as its own final evaluation played it
    assert export_main([str(tmp_path / "run"), "--format", "litert", "--observations", "300"]) == 0
    played = subprocess.run([sys.executable, "-c", PLAY, str(tmp_path / "run" / "policy" / "policy.tflite")],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert played.returncode == 0, played.stderr
    returns, tensorflow, env_id, shape = played.stdout.strip().splitlines()[-1].rsplit(" ", 3)
    assert min(ast.literal_eval(returns)) >= 475 and tensorflow == "False" and env_id == "CartPole-v1" and shape == "(4,)"


@pytest.mark.parametrize("flags, needle", [
    (["--quantize", "int8"], "--quantize int8 needs --format litert; allowed: --format litert --quantize int8, or "
                             "no --quantize"),
    (["--format", "litert", "--observations", "0"], "--observations 0 is out of range; allowed: an integer >= 1"),
])
def test_litert_flags_out_of_place_are_one_line_errors(tmp_path, flags, needle, capsys):
    (tmp_path / "config.yaml").write_text("env: {id: CartPole}\n")
    (tmp_path / "checkpoints").mkdir()
    assert export_main([str(tmp_path), *flags]) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.slow
def test_tensorflows_own_converter_reads_the_exported_saved_model(breakout_run):
    """The SavedModel holds its variables as TensorFlow's, so `from_saved_model` converts them (handed a Keras 3
    model's, it froze none and gave NaN Q-values)."""
    import numpy as np
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    policy = breakout_run / "policy"
    model = tf.lite.TFLiteConverter.from_saved_model(str(policy)).convert()
    observations = np.random.default_rng(0).integers(0, 256, (4, 4, 84, 84), dtype=np.uint8)
    converted = Interpreter(model_content=model).get_signature_runner("serving_default")(observation=observations)
    saved = tf.saved_model.load(str(policy)).signatures["serving_default"](observation=tf.constant(observations))
    np.testing.assert_allclose(converted["q_values"], saved["q_values"].numpy(), atol=1e-4)
    np.testing.assert_array_equal(converted["action"], saved["action"].numpy())


@pytest.mark.slow
def test_the_litert_play_draws_legal_actions_and_an_env_that_raises_fails_in_one_line(tmp_path, capsys):
    """ColorSideStrict raises on the action its mask forbids: the export's play for LiteRT draws its random actions
    among the legal ones, as training does. CrashAfter's step raises after 700 steps: the export ends in one line."""
    from tests.conftest import train_in_process

    for name, steps in (("ColorSideStrict", "400"), ("CrashAfter", "400")):  # one round of updates each
        module = "image_envs" if name == "ColorSideStrict" else "faulty_envs"
        result = train_in_process("--env", f"tests.{module}:{name}-v0", "--total-steps", steps, "--learning-starts",
                                  "200", "--set", "run.eval_every=0", "--quiet", "--logdir", str(tmp_path),
                                  "--run-name", name)
        assert result.returncode == 0, result.stderr
    assert export_main([str(tmp_path / "ColorSideStrict"), "--format", "litert", "--observations", "500"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["litert"]["float32"]["observations"] == 500
    assert export_main([str(tmp_path / "CrashAfter"), "--format", "litert", "--observations", "1000"],
                       prog="tfdqn export") == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "tfdqn export: error: env CrashAfter-v0 raised RuntimeError (simulator lost its connection) while the export "
        "played it for the LiteRT model's observations; the policy folder is left as it was"]


HEADS = {  # config keys -> a head LiteRT must run as the network does
    "plain": {}, "dueling": {"network.dueling": True},
    "noisy, held": {"network.noisy": True, "network.noise_refresh": "update"},
    "noisy, per call": {"network.noisy": True, "network.noise_refresh": "call"},
    "c51": {"learner.loss": "categorical", "network.noisy": True},
    "qr-dqn": {"learner.loss": "quantile", "network.dueling": True},
    "iqn": {"learner.loss": "implicit_quantile", "learner.num_quantile_samples": 8},
}


@pytest.mark.slow
@pytest.mark.parametrize("head", [*HEADS, "masks"])
def test_every_head_runs_on_litert_as_the_network_does(head):
    """Each head's float32 LiteRT model, converted from the serving graph of a network with its own weights (noisy
    layers and distributional heads included), picks the network's greedy action on every observation met in
    play and gives its Q-values to within float32 rounding; Taxi's info mask rides in as an input."""
    from tfdqn.policy.litert_export import convert, parity, play_observations
    from tfdqn.policy.saved_model import build_network, env_spec, serving_function

    env, keys = ("Taxi-v4", {}) if head == "masks" else ("CartPole", HEADS[head])
    config = tfdqn.DQNConfig.for_env(env, {"run.seed": 3, **keys})
    spec = env_spec(config)
    network = build_network(config, spec)
    serve = serving_function(network, spec, config.env.mask_actions)
    report = parity(convert(serve, network), network, spec, play_observations(config, spec, network, 300, seed=1))
    assert report["observations"] == 300 and report["action_agreement"] == 1.0, report
    assert report["max_abs_q_difference"] < 1e-4 * max(1.0, *map(abs, report["q_range"])), report
