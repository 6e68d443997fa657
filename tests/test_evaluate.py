"""`python -m tfdqn.evaluate` as a real command line: one-line errors (exit 2) and the JSON report."""

import importlib.util
import json
import shutil

import numpy as np
import pytest
import yaml

from tests.conftest import main_in_process
from tfdqn.run.markers import complete_steps

REPORT_KEYS = {"run_dir", "checkpoint_env_steps", "episodes", "epsilon", "return_mean", "return_std", "returns"}


@pytest.fixture
def run_folder(tmp_path):
    """A folder that passes the RUN_DIR check; the argument checks come before the config is read."""
    (tmp_path / "config.yaml").write_text("{}\n")
    return tmp_path


def _one_line_error(result, *fragments: str) -> None:
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.startswith("python -m tfdqn.evaluate: error: ") and result.stderr.count("\n") == 1
    for fragment in fragments:
        assert fragment in result.stderr


def test_a_folder_without_config_yaml_is_refused(tmp_path, run_cmd):
    result = run_cmd("tfdqn.evaluate", str(tmp_path))
    _one_line_error(result, f"RUN_DIR '{tmp_path}' holds no config.yaml", "allowed: a run folder")


@pytest.mark.parametrize("args, fragments", [
    (["--episodes", "0"], ["--episodes 0 is out of range", "allowed: an integer >= 1"]),
    (["--epsilon", "2"], ["--epsilon 2.0 is out of range", "allowed: a probability in [0, 1]"]),
    (["--epsilon", "-0.1"], ["--epsilon -0.1 is out of range"]),
    (["--video", "x.avi"], ["--video 'x.avi' is not an .mp4 path", "allowed: FILE.mp4"]),
    (["--episodes", "many"], ["argument --episodes: 'many' is not an integer; allowed: an integer"]),
])
def test_bad_arguments_are_refused_in_one_line(run_folder, run_cmd, args, fragments):
    _one_line_error(run_cmd("tfdqn.evaluate", str(run_folder), *args), *fragments)
    assert not (run_folder / "x.avi").exists()


def _report(result):
    """The JSON report on the last line of `tfdqn evaluate`'s output, once it ended well."""
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _evaluate(run_cmd, run_dir, *args):
    result = run_cmd("tfdqn.evaluate", str(run_dir), *args)
    return result, _report(result)


@pytest.mark.slow
def test_the_report_describes_the_evaluation_and_repeats_with_its_seed(cartpole_run, run_cmd):
    run_dir, _ = cartpole_run
    result, report = _evaluate(run_cmd, run_dir, "--episodes", "3", "--seed", "7")
    assert result.stderr == ""  # TensorFlow's start-up lines stay off stderr
    eval_epsilon = yaml.safe_load((run_dir / "config.yaml").read_text())["exploration"]["eval_epsilon"]
    assert set(report) == REPORT_KEYS
    assert report["run_dir"] == str(run_dir) and report["epsilon"] == eval_epsilon
    assert report["checkpoint_env_steps"] == complete_steps(run_dir / "checkpoints")[0] == 1500
    returns = report["returns"]
    assert report["episodes"] == len(returns) == 3
    assert all(1 <= r <= 500 and r == int(r) for r in returns)  # CartPole: +1 a step, 500 steps at most
    assert report["return_mean"] == pytest.approx(np.mean(returns))
    assert report["return_std"] == pytest.approx(np.std(returns))
    assert f"protocol: CartPole-v1, epsilon {eval_epsilon:g}" in result.stdout
    from tfdqn.evaluate import main  # the same command again, in this process: no second TensorFlow start-up

    assert _report(main_in_process(main, str(run_dir), "--episodes", "3", "--seed", "7")) == report


@pytest.mark.slow
def test_a_broken_newest_checkpoint_falls_back_and_the_folder_is_left_as_it_is(cartpole_run, tmp_path, run_cmd):
    run_dir = shutil.copytree(cartpole_run[0], tmp_path / "run")
    for data in (run_dir / "checkpoints").glob("ckpt-1500.data-*"):
        data.write_bytes(b"not a checkpoint")
    before = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    result, report = _evaluate(run_cmd, run_dir, "--episodes", "1", "--epsilon", "0")
    assert report["checkpoint_env_steps"] == 1000 and report["epsilon"] == 0.0
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("warning: checkpoint at env step 1500") and "falling back" in result.stderr
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == before  # no marker renamed


@pytest.mark.slow
def test_a_run_without_a_complete_checkpoint_is_a_one_line_error(cartpole_run, tmp_path, run_cmd):
    run_dir = shutil.copytree(cartpole_run[0], tmp_path / "run")
    for marker in (run_dir / "checkpoints").glob("*.complete"):
        marker.unlink()
    result = run_cmd("tfdqn.evaluate", str(run_dir), "--episodes", "1")
    _one_line_error(result, "no complete checkpoint in", "allowed: a run folder written by tfdqn.train")


@pytest.mark.slow
def test_a_video_of_an_env_that_cannot_render_here_is_a_one_line_error(cartpole_run, tmp_path, run_cmd):
    video = tmp_path / "cartpole.mp4"
    result = run_cmd("tfdqn.evaluate", str(cartpole_run[0]), "--episodes", "1", "--video", str(video))
    if importlib.util.find_spec("pygame") is None:  # CartPole renders with pygame
        _one_line_error(result, "env CartPole-v1 cannot render here", "allowed: no video")
        assert list(tmp_path.iterdir()) == []
    else:
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["video"] == str(video) and report["video_frames"] > 0 and video.is_file()


@pytest.mark.slow
def test_evaluate_acts_without_a_learner_and_plays_what_the_runs_agent_plays(cartpole_run, capsys, monkeypatch):
    """Only the online network and an actor are built (no optimizer, target or update graph), and the
    returns are those of the whole agent `make_agent` builds, restored from the same checkpoint."""
    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent
    from tfdqn.agent.learner import Learner
    from tfdqn.envs.make import make_env
    from tfdqn.evaluate import main
    from tfdqn.run.checkpoint import restore_online
    from tfdqn.run.evaluation import run_episodes

    run_dir, _ = cartpole_run
    config = config_lib.build_config([run_dir / "config.yaml"], {"run.seed": 7})
    env, spec = make_env(config.env, seed=7, evaluation=True)
    agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)
    restore_online(run_dir / "checkpoints", agent.online)
    expected = run_episodes(env, spec, agent.actor, 3, 0.0, seed=7)
    env.close()

    def no_learner(*args, **kwargs):
        raise AssertionError("tfdqn.evaluate built a Learner")

    monkeypatch.setattr(Learner, "__init__", no_learner)
    capsys.readouterr()
    assert main([str(run_dir), "--episodes", "3", "--seed", "7", "--epsilon", "0"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["returns"] == expected


def test_a_game_of_an_env_without_a_time_limit_is_capped_in_training_evaluation_and_evaluate(tmp_path):
    """Endless-v0 registers no time limit and never ends a game: with env.max_episode_steps the run's evaluations
    end, its protocol line says where games are cut, and `tfdqn evaluate` counts the capped games as truncated."""
    import json

    from tests.conftest import run_module, train_in_process

    # the run is only read back: trained in this process; `tfdqn evaluate` below starts as a user starts it
    run = train_in_process("--env", "tests.endless_envs:Endless-v0", "--total-steps", "600", "--learning-starts", "200",
                           "--set", "run.eval_every=300", "--set", "run.eval_episodes=2",
                           "--set", "run.final_eval_episodes=2", "--set", "env.max_episode_steps=50", "--quiet",
                           "--logdir", str(tmp_path), "--run-name", "r")
    assert run.returncode == 0, run.stderr
    assert ("no time limit of its own: episodes capped at 50 steps (env.max_episode_steps), a capped one counted as "
            "truncated") in run.stdout
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["final_eval_returns"] == [pytest.approx(5.0)] * 2  # 50 steps of 0.1, then cut
    evaluated = run_module("tfdqn.evaluate", str(tmp_path / "r" / "policy"), "--episodes", "3", "--import",
                           "tests.endless_envs", timeout=120)
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout.strip().splitlines()[-1])
    assert report["truncated_by_step_cap"] == 3 and report["returns"] == [pytest.approx(5.0)] * 3


@pytest.mark.slow
def test_a_policy_folder_is_evaluated_by_its_saved_model_and_a_damaged_one_is_named_in_one_line(cartpole_run, tmp_path,
                                                                                                capsys):
    """What is deployed is the SavedModel: `tfdqn evaluate POLICY` plays its weights, not network.keras's (here
    deleted), and with its variables truncated both `tfdqn evaluate` and `load_policy` name the folder in one line."""
    import tfdqn
    from tfdqn.errors import UserError
    from tfdqn.evaluate import main as evaluate_main

    policy = tmp_path / "policy"
    shutil.copytree(cartpole_run[0] / "policy", policy)
    assert evaluate_main([str(policy), "--episodes", "3"]) == 0
    expected = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["returns"]
    (policy / "network.keras").unlink()
    assert evaluate_main([str(policy), "--episodes", "3"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["returns"] == expected
    [data] = (policy / "variables").glob("variables.data-*")
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    assert evaluate_main([str(policy), "--episodes", "3"], prog="tfdqn evaluate") == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"tfdqn evaluate: error: policy folder {policy}: its SavedModel (saved_model.pb and "
                           "variables/) does not load (") and line.endswith("allowed: a folder tfdqn export wrote "
                                                                            "whole (export the run again)")
    with pytest.raises(UserError, match=r"^policy folder .*: its SavedModel .* does not load"):
        tfdqn.load_policy(policy)
