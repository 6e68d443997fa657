"""End to end: `python -m tfdqn.train` and `python -m tfdqn.evaluate` as real subprocesses."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

from tests.conftest import SMALL_CARTPOLE, TINY, tensorboard_tags, train_in_process


@pytest.mark.slow
def test_run_folder_holds_config_events_checkpoints_and_summary(cartpole_run):
    run_dir, result = cartpole_run
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 1500 and summary["updates"] == 1000
    for key in ("wall_seconds", "env_steps_per_sec", "final_eval_return_mean", "final_eval_return_std"):
        assert summary[key] >= 0
    assert summary["final_eval_episodes"] == 2
    assert result.stdout.strip().splitlines()[-1] == f"summary: {run_dir / 'summary.json'}"
    assert result.stderr == ""  # --quiet: no bar, nor the line below it while the final evaluation plays
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["run"]["seed"] == 3 and config["env"]["id"] == "CartPole"
    markers = sorted(p.name for p in (run_dir / "checkpoints").glob("*.complete"))
    assert markers == ["ckpt-1000.complete", "ckpt-1500.complete"]
    rows = (run_dir / "episodes.csv").read_text().splitlines()
    assert rows[0] == "env_steps,return,length" and len(rows) > 10


@pytest.mark.slow
def test_tensorboard_tags(cartpole_run):
    tags = tensorboard_tags(cartpole_run[0])
    expected = {"charts/episode_return", "charts/episode_length", "charts/epsilon", "charts/learning_rate", "losses/td_loss",
                "losses/q_values", "perf/env_steps_per_sec", "perf/updates_per_sec", "hyperparameters"}
    assert expected <= tags, expected - tags


@pytest.mark.slow
def test_same_seed_gives_identical_episode_returns(cartpole_run, tmp_path):
    run_dir, _ = cartpole_run
    # in this process, as the first run was (the test reads both back): no TensorFlow start-up of its own
    result = train_in_process(*TINY, "--seed", "3", "--logdir", str(tmp_path), "--run-name", "b")
    assert result.returncode == 0, result.stderr
    first = (run_dir / "episodes.csv").read_text()
    assert (tmp_path / "b" / "episodes.csv").read_text() == first
    summaries = [json.loads((d / "summary.json").read_text()) for d in (run_dir, tmp_path / "b")]
    assert summaries[0]["final_eval_returns"] == summaries[1]["final_eval_returns"]


@pytest.mark.slow
def test_evaluate_prints_mean_and_std(cartpole_run, run_cmd):
    result = run_cmd("tfdqn.evaluate", str(cartpole_run[0]), "--episodes", "3", "--epsilon", "0.0")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["episodes"] == 3 and report["checkpoint_env_steps"] == 1500
    assert report["return_mean"] > 0 and report["return_std"] >= 0
    assert "protocol" in result.stdout


@pytest.mark.slow
def test_any_box_discrete_env_trains_with_the_mlp(tmp_path):
    result = train_in_process("--env", "Acrobot-v1", "--total-steps", "300", "--learning-starts", "100",
                              "--set", "run.final_eval_episodes=1", "--set", "run.log_every=100", "--quiet",
                              "--set", "run.eval_episodes=1",  # the periodic evaluation at the last step: one game
                              "--logdir", str(tmp_path), "--run-name", "acrobot")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "acrobot" / "summary.json").read_text())["env_id"] == "Acrobot-v1"


@pytest.mark.parametrize("args, needle", [
    (["--config", "tests/bad.yaml"], "is not valid YAML"),
    (["--training-interval", "0"], "run.training_interval = 0"),
    (["--total-steps", "-1"], "run.total_steps = -1"),
    (["--env", "Brekout"], "Brekout"),
    (["--set", "learner.learnig_rate=1"], "did you mean learner.learning_rate"),
    (["--set", "exploration.epsilon_end=2"], "exploration.epsilon_end = 2"),
    (["--set", "replay.batch_size=100", "--set", "replay.capacity=10"], "replay.batch_size = 100"),
    (["--set", "run.seed=abc"], "run.seed = 'abc'"),
    (["--config", "no/such.yaml"], "no/such.yaml does not exist"),
    (["--total-steps", "ten"], "run.total_steps = 'ten' is not an integer; allowed: an integer"),
    (["--run-name", "a/b"], "--run-name 'a/b'"),
    (["--env", "Brekout"], "did you mean Breakout"),
    (["--env", "Pendulum-v1"], "allowed: a Discrete action space"),
    (["--set", "replay.capacity=true"], "replay.capacity = True"),
    (["--set", "replay.batch_size=0"], "replay.batch_size = 0"),
    (["--env", "Breakout", "--set", "replay.capacity=10000000", "--set", "replay.compression=none"],
     "of host memory is available; allowed: replay.capacity <="),
    (["--logdir", "/dev/null/runs"], "--logdir '/dev/null/runs' is not writable"),
    (["--resume", "no/such/run"], "--resume 'no/such/run' is not a run folder"),
    (["--resume", "tests", "--seed", "1"], "--seed cannot be used with --resume"),
    (["--profile-steps", "9:3"], "--profile-steps '9:3'"),
    (["--set", "nokey"], "--set 'nokey' is not of the form key=value"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path, run_cmd):
    (tmp_path / "bad.yaml").write_text("run: [1, 2\n")
    args = [str(tmp_path / "bad.yaml") if a == "tests/bad.yaml" else a for a in args]
    logdir = tmp_path / "runs"
    if "--resume" not in args:
        args = ["--logdir", str(logdir), *args] if "--logdir" not in args else args
        args = [*SMALL_CARTPOLE, *args] if "--env" not in args else args
    result = run_cmd("tfdqn.train", *args, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not logdir.exists()  # nothing half-made


def test_help_lists_every_config_key_with_its_doc(run_cmd):
    result = run_cmd("tfdqn.train", "--help", timeout=60)
    assert result.returncode == 0
    assert "run.training_interval" in result.stdout and "env steps per gradient update" in result.stdout


def test_tfdqn_train_still_trains_after_its_command_module_is_imported(tmp_path):
    import tfdqn
    from tfdqn.train import main  # binds the module to the name tfdqn.train

    assert callable(main) and isinstance(tfdqn.train, type(json))
    config = tfdqn.DQNConfig.for_env("CartPole", {"run.total_steps": 60, "run.learning_starts": 40,
                                                  "run.final_eval_episodes": 1, "run.eval_every": 0})
    summary = tfdqn.train(config, tmp_path / "r", quiet=True)
    assert summary["env_steps"] >= 60 and summary["run_dir"] == str(tmp_path / "r")


def test_a_run_that_makes_no_update_says_so_and_exports_nothing(tmp_path):
    """Total steps at or below learning_starts: the run only acts (benchmarks time acting this way), says so
    when it starts and ends, and makes no final evaluation and no policy/ it would call its product."""
    result = train_in_process(*SMALL_CARTPOLE, "--total-steps", "100", "--learning-starts", "100", "--quiet",
                              "--logdir", str(tmp_path), "--run-name", "idle")
    assert result.returncode == 0, result.stderr
    reason = "run.total_steps 100 leaves no update due after run.learning_starts 100, so the run only acts"
    assert f"no update will run: {reason}; it makes no final evaluation and exports no policy" in result.stdout
    assert f"no product: no update ran ({reason}); nothing was evaluated or exported" in result.stdout
    summary = json.loads((tmp_path / "idle" / "summary.json").read_text())
    assert summary["updates"] == 0 and summary["no_product"] == f"no update ran ({reason})"
    assert "final_eval_return_mean" not in summary and not (tmp_path / "idle" / "policy").exists()


CORRIDOR = '''
import gymnasium
import numpy as np


class Corridor(gymnasium.Env):
    """Walk right along 5 cells for a reward of 1 (the tests' own env, registered on import)."""

    observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cell = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.cell = max(0, self.cell + (1 if action == 1 else -1))
        done = self.cell == 4
        return np.array([self.cell / 4], np.float32), float(done), done, False, {}


gymnasium.register("Corridor-v0", entry_point=Corridor, max_episode_steps=20)
'''


def _train_on_the_corridor(folder) -> None:
    """What a script in `folder` does, `import corridor_env, tfdqn; tfdqn.train(...)`, in this process (no
    TensorFlow start-up of its own); the module, its path and its registration are taken back after."""
    import gymnasium

    import tfdqn

    sys.path.insert(0, str(folder))
    try:
        import corridor_env  # noqa: F401 (registers Corridor-v0)
        tfdqn.train(tfdqn.DQNConfig.for_env("Corridor-v0", {"run.total_steps": 400, "run.learning_starts": 200,
                                                             "run.eval_every": 0, "run.final_eval_episodes": 1}),
                    run_dir=folder / "run", quiet=True)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("corridor_env", None)
        gymnasium.registry.pop("Corridor-v0", None)


def test_a_run_on_an_env_a_script_registered_evaluates_with_import(tmp_path):
    """Trained through the Python API on an env its script registered; `tfdqn evaluate` (the installed command,
    whose own path lacks the working folder) finds the env with --import, and without it says how."""
    (tmp_path / "corridor_env.py").write_text(CORRIDOR)
    _train_on_the_corridor(tmp_path)
    command = [shutil.which("tfdqn"), "evaluate", "run", "--episodes", "2"]
    refused = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "unknown env 'Corridor-v0'" in refused.stderr
    assert "your own env as module:EnvId" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    played = subprocess.run([*command, "--import", "corridor_env"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert played.returncode == 0, played.stderr
    assert json.loads(played.stdout.strip().splitlines()[-1])["episodes"] == 2


@pytest.mark.slow
def test_an_image_env_gets_a_cnn_that_fits_learns_from_the_image_and_a_cnn_too_big_is_refused(tmp_path):
    """tests/image_envs.py's 32x32x3 uint8 env: the generic config's MLP gives way to auto, which picks
    small_cnn (the Nature CNN needs 36 pixels a side); frames are stored as uint8; the agent learns to read
    the image; the export takes the env's own [H, W, C] images."""
    from tfdqn import config as config_lib

    sources = {}
    config = config_lib.resolve_config([], {"env.id": "tests.image_envs:ColorSide-v0"}, sources=sources)
    assert config.network.kind == "auto" and sources["network.kind"] == config_lib.IMAGE_RULE
    # The generic config's XLA update is for its MLP; a CNN's update runs without it, unless one asks
    assert not config.compute.update_jit_compile and sources["compute.update_jit_compile"] == config_lib.IMAGE_XLA_RULE
    for keys in ({"network.kind": "mlp"}, {"compute.update_jit_compile": True}):
        chosen = config_lib.resolve_config([], {"env.id": "tests.image_envs:ColorSide-v0", **keys})
        assert chosen.compute.update_jit_compile, keys
    # Each image's side pays at once, so gamma 0 and 1-step targets learn it fastest (10 of 10 after 500 updates)
    result = train_in_process("--env", "tests.image_envs:ColorSide-v0", "--total-steps", "1000",
                              "--learning-starts", "500", "--set", "learner.gamma=0", "--set", "learner.n_step=1",
                              "--set", "run.eval_every=0", "--quiet", "--logdir", str(tmp_path), "--run-name", "r")
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["final_eval_return_mean"] >= 9, summary["final_eval_returns"]  # random: 5, reading the image: 10
    assert "uint8 image frames 32x32x3 (HWC, stored channels first)" in result.stdout
    assert "3114 per transition" in result.stdout  # 3,072 bytes of frame and the slot's records; float32: 12,330
    network = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())["network"]
    assert network["kind"] == "auto"
    import tfdqn
    policy = tfdqn.load_policy(tmp_path / "r" / "policy")
    assert policy.observation_shape == (32, 32, 3) and policy.act(np.zeros((5, 32, 32, 3), np.uint8)).shape == (5,)
    refused = train_in_process("--env", "tests.image_envs:ColorSide-v0", "--set", "network.kind=nature_cnn",
                               "--logdir", str(tmp_path), "--run-name", "n")
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "python -m tfdqn.train: error: network.kind = nature_cnn needs frames of at least 36x36 (its 8x8/4, 4x4/2 "
        "and 3x3/1 valid convolutions); this env's are 32x32; allowed: network.kind = small_cnn or auto")


@pytest.mark.slow
def test_car_racing_with_discrete_actions_trains_from_its_images(tmp_path):
    """The box2d extra's CarRacing-v3, its discrete actions through env.kwargs: 96x96x3 frames stored as uint8
    give the Nature CNN; 8 updates run and the product is evaluated (episodes capped at 100 steps, also through
    env.kwargs, to keep the test short)."""
    result = train_in_process("--env", "CarRacing-v3", "--set", "env.kwargs.continuous=false",
                              "--set", "env.kwargs.max_episode_steps=100", "--total-steps", "160",
                              "--learning-starts", "128", "--set", "run.env_steps_per_round=32",
                              "--training-interval", "4", "--set", "run.eval_every=0",
                              "--set", "run.final_eval_episodes=1", "--quiet", "--logdir", str(tmp_path),
                              "--run-name", "r")
    assert result.returncode == 0, result.stderr
    assert ("protocol: CarRacing-v3(continuous=False, max_episode_steps=100), epsilon 0, uint8 image frames 96x96x3 "
            "(HWC, stored channels first), episodes capped at 100 steps (TimeLimit)") in result.stdout
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["updates"] == 8 and len(summary["final_eval_returns"]) == 1
    assert yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())["network"]["kind"] == "auto"
