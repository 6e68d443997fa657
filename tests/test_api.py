"""The Python API's run folders and options: `tfdqn.train` as README and the getting-started page show it, run
twice, quiet, resumed, and ended by a callback on an evaluation."""

import json
import subprocess
import sys

import pytest

import tfdqn
from tests.conftest import REPO
from tfdqn.errors import UserError

# No XLA compile of the update (as tests/data/cartpole_small.yaml): it costs ~3 CPU-s per run and none of these
# runs is about it; test_quiet_prints_nothing_at_all keeps the packaged default's, whose C++ lines it checks.
SHORT = {"run.total_steps": 600, "run.learning_starts": 200, "run.eval_every": 200, "run.eval_episodes": 1,
         "run.final_eval_episodes": 1, "run.checkpoint_every": 300, "run.log_every": 300,
         "compute.update_jit_compile": False}


def _config(**settings):
    return tfdqn.DQNConfig.for_env("CartPole", {**SHORT, **settings})


def test_the_same_call_twice_trains_two_runs_and_a_used_run_dir_is_refused_naming_the_arguments(tmp_path):
    shorter = {"run.total_steps": 300, "run.eval_every": 0}  # two runs' folders: their length is not checked
    first = tfdqn.train(_config(**shorter), logdir=str(tmp_path), quiet=True)
    second = tfdqn.train(_config(**shorter), logdir=str(tmp_path), quiet=True)
    assert first["run_dir"] != second["run_dir"] and second["run_dir"].startswith(first["run_dir"][:-7])
    with pytest.raises(UserError) as caught:
        tfdqn.train(_config(**shorter), run_dir=first["run_dir"], quiet=True)
    assert str(caught.value) == (f"run_dir {first['run_dir']!r} already exists and is not empty; allowed: another "
                                 f"run_dir, run_dir=None for a fresh one, or resume=True to continue its run")


def test_resume_continues_a_run_with_more_steps_and_refuses_another_recipe(tmp_path):
    run_dir = tmp_path / "r"
    tfdqn.train(_config(), run_dir=run_dir, quiet=True)
    with pytest.raises(UserError, match=r"config differs from the run's own in learner.gamma; allowed: the run's"):
        tfdqn.train(_config(**{"run.total_steps": 900, "learner.gamma": 0.9}), run_dir=run_dir, resume=True)
    ended = tfdqn.train(None, run_dir=run_dir, resume=True, quiet=True)  # nothing left to do
    assert ended["env_steps"] >= 600 and "resumed_from_env_steps" not in ended
    more = tfdqn.train(_config(**{"run.total_steps": 900}), run_dir=run_dir, resume=True, quiet=True)
    assert more["resumed_from_env_steps"] == ended["env_steps"] and more["env_steps"] >= 900  # a vector step may pass it
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == more["env_steps"]


def test_a_callback_on_each_evaluation_may_end_the_run_which_still_exports_its_product(tmp_path):
    seen = []

    def on_evaluation(record):
        seen.append(record)
        return record["env_steps"] >= 400

    summary = tfdqn.train(_config(), run_dir=tmp_path / "r", quiet=True, on_evaluation=on_evaluation)
    assert [record["env_steps"] for record in seen] == [200, 400]
    assert set(seen[0]) == {"env_steps", "run_seconds", "return_mean", "return_std", "returns"}
    assert summary["ended_by_callback"] is True and summary["env_steps"] == 400
    assert (tmp_path / "r" / "policy").is_dir() and "final_eval_return_mean" in summary


def test_quiet_prints_nothing_at_all(tmp_path):
    """Neither the run's own lines nor TensorFlow's C++ start-up log, in a fresh process."""
    script = ("import tfdqn; tfdqn.train(tfdqn.DQNConfig.for_env('CartPole', {'run.total_steps': 300, "
              "'run.learning_starts': 200, 'run.eval_every': 0, 'run.final_eval_episodes': 1}), "
              f"logdir={str(tmp_path)!r}, quiet=True)")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
