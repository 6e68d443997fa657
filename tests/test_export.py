"""Policy export: the SavedModel acts as the run's own greedy actor in a process that never imports
tfdqn, the .keras network loads with Keras, and `python -m tfdqn.export` is a real command line."""

import json
import os
import re
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

import tfdqn
from tests.conftest import REPO, main_in_process
from tests.test_policy import doc_blocks
from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent
from tfdqn.agent.networks import Dense
from tfdqn.envs.make import make_env
from tfdqn.export import main as export_main
from tfdqn.run.checkpoint import restore_online


# Runs after docs/guide/deployment.md's plain-TensorFlow example, in a process without tfdqn: TensorFlow loads each
# SavedModel, then Keras each .keras network, which needs tfdqn's layer registered.
PLAIN = """
import sys
import numpy as np
import tensorflow as tf

folders = sys.argv[1:]
for folder in folders:
    serve = tf.saved_model.load(folder).signatures["serving_default"]
    out = serve(observation=tf.constant(np.load(folder + ".npy")))
    np.savez(folder + ".saved_model.npz", action=out["action"].numpy(), q_values=out["q_values"].numpy())
assert "tfdqn" not in sys.modules
import keras
import tfdqn.agent.networks
for folder in folders:
    network = keras.models.load_model(folder + "/network.keras")
    np.save(folder + ".keras.npy", network(np.load(folder + ".npy")).numpy())
"""


def _breakout_stacks(config) -> np.ndarray:
    """Eight real 4-frame stacks from consecutive Breakout frames."""
    env, _ = make_env(config.env, seed=0)
    frames = [env.reset(seed=0)[0]]
    for action in np.random.default_rng(0).integers(env.action_space.n, size=11):
        frames.append(env.step(action)[0])
    env.close()
    return np.stack([frames[i:i + 4] for i in range(8)])


def _greedy_actor(run_dir, checkpoint="latest"):
    """The run's own actor, restored from its checkpoint, and its greedy actions and Q-values."""
    config = config_lib.build_config([run_dir / "config.yaml"], {})
    env, spec = make_env(config.env, seed=0)
    env.close()
    agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)
    restore_online(run_dir / "checkpoints", agent.online, checkpoint)
    return config, lambda batch: (agent.actor.act_with_epsilon(batch, 0.0).numpy(), agent.online(batch).numpy())


@pytest.mark.slow
def test_plain_tensorflow_acts_as_the_runs_greedy_actor_and_keras_reads_the_network(cartpole_run, breakout_run,
                                                                                     tmp_path):
    readme_example = doc_blocks("docs/guide/deployment.md", "Use a trained agent", "python")[0]
    folders = []
    for name, run_dir in (("cartpole", cartpole_run[0]), ("breakout", breakout_run)):
        config, actor = _greedy_actor(run_dir)
        batch = (_breakout_stacks(config) if name == "breakout"
                 else np.random.default_rng(0).normal(0, 0.5, size=(16, 4)).astype(np.float32))
        folder = shutil.copytree(run_dir / "policy", tmp_path / name)  # a folder on its own, away from its run
        np.save(f"{folder}.npy", batch)
        folders.append((folder, actor(batch)))
    code = readme_example.replace("runs/RUN/policy", str(folders[0][0])) + PLAIN
    result = subprocess.run([sys.executable, "-c", code, *(str(f) for f, _ in folders)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr
    assert re.match(r"\[([01])( \1){7}\] \[\[", result.stdout), result.stdout  # the example's 8 actions
    for folder, (actions, q_values) in folders:
        exported = np.load(f"{folder}.saved_model.npz")
        assert exported["action"].dtype == np.int32 and exported["q_values"].dtype == np.float32
        np.testing.assert_array_equal(exported["action"], actions)
        np.testing.assert_allclose(exported["q_values"], q_values, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.load(f"{folder}.keras.npy"), exported["q_values"], rtol=1e-6, atol=1e-6)
    assert folders[1][1][1].shape == (8, 4)  # Breakout: 8 stacks, 4 actions


def test_the_networks_layer_is_registered_and_its_config_round_trips():
    layer = Dense(7, activation="relu", name="q")
    assert keras.saving.get_registered_name(Dense) == "tfdqn>Dense"
    assert keras.saving.get_registered_object("tfdqn>Dense") is Dense
    copy = Dense.from_config(layer.get_config())
    assert type(copy) is Dense and copy.get_config() == layer.get_config()


@pytest.mark.slow
def test_a_finished_run_reports_its_export(cartpole_run, breakout_run):
    for run_dir, size in ((cartpole_run[0], 2e6), (breakout_run, 3e7)):
        summary = json.loads((run_dir / "summary.json").read_text())
        about = json.loads((run_dir / "policy" / "policy.json").read_text())
        assert summary["policy_dir"] == str(run_dir / "policy") and 0 < summary["export_bytes"] < size
        assert about["checkpoint"] == "latest" and about["env_steps"] == summary["env_steps"]
        assert not list(run_dir.glob("policy.*"))  # no build or old folder left beside it
    assert about["observation_shape"] == [4, 84, 84] and about["observation_dtype"] == "uint8"
    assert about["action_meanings"] == ["NOOP", "FIRE", "RIGHT", "LEFT"]


@pytest.mark.slow
def test_export_of_a_step_replaces_its_folder_and_never_a_foreign_one(cartpole_run, tmp_path, capsys):
    run_dir = cartpole_run[0]
    out = tmp_path / "p1000"
    for _ in range(2):  # the second export replaces the first
        assert export_main([str(run_dir), "--checkpoint", "1000", "--out", str(out)]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["checkpoint"] == 1000 and report["env_steps"] == 1000 and report["policy_dir"] == str(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p1000"]
    _, actor = _greedy_actor(run_dir, 1000)
    batch = np.random.default_rng(1).normal(0, 0.5, size=(8, 4)).astype(np.float32)
    np.testing.assert_array_equal(tfdqn.load_policy(out).act(batch), actor(batch)[0])

    foreign = tmp_path / "mine"
    foreign.mkdir()
    assert export_main([str(run_dir), "--out", str(foreign)]) == 2
    assert "is not a policy folder" in capsys.readouterr().err and not any(foreign.iterdir())


def _one_line_error(result, *fragments):
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.startswith("python -m tfdqn.export: error: ") and result.stderr.count("\n") == 1
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.mark.slow
def test_the_command_line_explains_itself_and_names_what_is_allowed(cartpole_run, run_cmd, tmp_path):
    result = run_cmd("tfdqn.export", "--help")
    assert result.returncode == 0 and "--checkpoint latest|best|STEP" in result.stdout and "--out DIR" in result.stdout
    # as README says, a run's policy folder holds its product, which no other checkpoint's export replaces
    words = " ".join(result.stdout.split())
    assert "exports its product (the best-evaluated network with periodic evaluation, else the last) to RUN_DIR/policy" in words
    assert "never RUN_DIR/policy for a --checkpoint" in words
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "exports the best-evaluated network to `runs/RUN/policy/`" in readme
    run_dir = str(cartpole_run[0])
    # a real process's one-line error (the last), and the same code path's other refusals read in this process
    _one_line_error(main_in_process(export_main, run_dir, "--checkpoint", "1200"),
                    "--checkpoint 1200 is not a complete checkpoint", "allowed: latest, 1000, 1500")
    _one_line_error(main_in_process(export_main, run_dir, "--checkpoint", "newest"),
                    "--checkpoint 'newest' is not latest, best or an env step", "allowed: latest, 1000, 1500")
    _one_line_error(main_in_process(export_main, run_dir, "--checkpoint", "best"),
                    "kept no best checkpoint (one is kept only with run.eval_every > 0)", "allowed: latest, 1000, 1500")
    _one_line_error(run_cmd("tfdqn.export", str(tmp_path)), f"RUN_DIR '{tmp_path}' holds no config.yaml")
