"""python -m tfdqn.tune: search-space text, the objective, and real studies of real runs on SQLite and on a
PostgreSQL server, with a worker killed and restarted."""

import math
import os
import pathlib
import signal
import subprocess
import sys
import time

import optuna
import pytest

from tests.conftest import REPO, SMALL_CARTPOLE, main_in_process
from tests.postgres_server import available, postgres_server
from tfdqn import config as config_lib
from tfdqn.errors import UserError
from tfdqn.tuning.search_space import Param, parse_param, parse_params
from tfdqn.tuning.trial_run import Objective, read_evaluations

TRIAL = [*SMALL_CARTPOLE, "--total-steps=600", "--set=run.learning_starts=200", "--set=run.eval_every=200",
         "--set=run.eval_episodes=2", "--set=run.final_eval_episodes=2", "--set=run.checkpoint_every=200"]
SPACE = ["--param", "learner.learning_rate=loguniform:1e-4:1e-2", "--param", "learner.target_update_period=int:32:512",
         "--param", "run.training_interval=choice:1,2"]


def test_each_distribution_parses_and_samples_inside_its_range():
    study = optuna.create_study()
    trial = study.ask()
    assert parse_param("learner.learning_rate=loguniform:1e-4:1e-2") == Param("learner.learning_rate", "loguniform",
                                                                              1e-4, 1e-2)
    params = parse_params(["learner.learning_rate=loguniform:1e-4:1e-2", "learner.gamma=uniform:0.9:0.999",
                           "learner.n_step=int:1:5", "learner.optimizer=choice:adam,rmsprop"])
    values = {param.key: param.suggest(trial) for param in params}
    assert 1e-4 <= values["learner.learning_rate"] <= 1e-2 and 0.9 <= values["learner.gamma"] <= 0.999
    assert values["learner.n_step"] in range(1, 6) and values["learner.optimizer"] in ("adam", "rmsprop")


@pytest.mark.parametrize("text, message", [
    ("learner.lr=loguniform:1e-4:1e-2", "'learner.lr' is not a config key"),
    ("learner.learning_rate", "is not KEY=DIST"),
    ("learner.learning_rate=normal:0:1", "is not KEY=DIST"),
    ("learner.learning_rate=loguniform:0:1", "allowed: loguniform:LOW:HIGH with 0 < LOW < HIGH"),
    ("learner.gamma=uniform:0.99:0.9", "allowed: uniform:LOW:HIGH with LOW < HIGH"),
    ("learner.n_step=int:1:x", "allowed: int:LOW:HIGH with integers LOW < HIGH"),
    ("learner.n_step=uniform:1:5", "learner.n_step takes int values; allowed: int, choice"),
    ("network.dueling=int:0:1", "network.dueling takes bool values; allowed: choice"),
    ("learner.optimizer=choice:adam", "needs two or more different choices"),
])
def test_bad_param_text_is_refused_naming_it(text, message):
    with pytest.raises(UserError, match="--param") as error:
        parse_param(text)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_objective_scores_the_last_evaluations_or_the_steps_to_a_target(tmp_path):
    rows = [(400, 20.0), (800, 60.0), (1200, 150.0), (1600, 90.0)]
    assert Objective(last_evaluations=3).value(rows) == pytest.approx((60 + 150 + 90) / 3)
    assert Objective(last_evaluations=3).direction == "maximize"
    assert Objective(target=100.0).value(rows) == 1200 and Objective(target=200.0).value(rows) == math.inf
    assert Objective(target=100.0).direction == "minimize" and Objective(target=100.0).intermediate(60.0) == -60.0
    (tmp_path / "evaluations.csv").write_text("env_steps,run_seconds,return_mean,return_std\n400,1.5,20,3\n800,2.5,6")
    assert read_evaluations(tmp_path) == [(400, 20.0)]  # the row being written is not read


def _tune_in_process(*args: str) -> subprocess.CompletedProcess:
    """`python -m tfdqn.tune args...` in this process (a refusal needs no interpreter of its own)."""
    from tfdqn.tune import main

    return main_in_process(main, *args)


def test_bad_command_lines_get_one_line_before_any_trial(tmp_path):
    for args, message in [
        (["--param", "learner.n_step=uniform:1:3"], "learner.n_step takes int values"),
        (["--param", "learner.n_step=choice:1,x"], "config key learner.n_step = 'x' is not an integer"),
        (["--param", "learner.gamma=uniform:0.9:0.99", "--set", "run.eval_every=0"], "run.eval_every = 0"),
        ([], "no --param given"),
        (["--param", "learner.gamma=uniform:0.9:0.99", "--heartbeat", "0"], "--heartbeat 0; allowed: seconds > 0"),
    ]:
        refused = _tune_in_process("--env", "CartPole", "--trials", "2", "--logdir", str(tmp_path), *args)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert message in refused.stderr
    assert not list(tmp_path.iterdir())  # no study, no trial folder


def _study(url: str, name: str):
    return optuna.load_study(study_name=name, storage=url)


def _finished(study) -> int:
    return sum(t.state.name in ("COMPLETE", "PRUNED") for t in study.get_trials())


def _tune(logdir: pathlib.Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.Popen([sys.executable, "-m", "tfdqn.tune", *TRIAL, *SPACE, "--logdir", str(logdir), *extra],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _check_trials_match_their_runs(study) -> None:
    """Every finished trial is a run whose evaluations.csv rows are what it reported."""
    for trial in study.get_trials():
        if trial.state.name in ("COMPLETE", "PRUNED"):
            rows = read_evaluations(pathlib.Path(trial.user_attrs["run_dir"]))
            assert {steps: mean for steps, mean in rows} == trial.intermediate_values
            if trial.state.name == "COMPLETE":
                assert trial.value == pytest.approx(Objective(last_evaluations=3).value(rows))


@pytest.mark.slow
def test_a_sqlite_study_survives_a_killed_worker_and_writes_its_results(tmp_path):
    logdir, url = tmp_path / "tune", f"sqlite:///{tmp_path / 'tune' / 'CartPole.db'}"
    beat = ["--trials", "4", "--heartbeat", "2"]  # the killed worker's trial is failed 8 s after its last beat
    first = _tune(logdir, *beat)
    while not (logdir / "CartPole" / "trial-0000.log").exists():  # the first worker's trial 0 has started
        assert first.poll() is None, first.communicate()
        time.sleep(0.2)
    second = _tune(logdir, *beat)
    time.sleep(4)
    first.send_signal(signal.SIGKILL)  # its run goes with it (parent-death signal); its trial stops beating
    first.wait()
    again = _tune(logdir, *beat)
    out, err = again.communicate(timeout=400)
    assert again.returncode == 0, err
    assert second.wait(timeout=400) == 0, second.communicate()
    study = _study(url, "CartPole")
    states = [t.state.name for t in study.get_trials()]
    assert _finished(study) >= 4 and states[0] == "FAIL", states  # the killed worker's trial, failed by heartbeat
    _check_trials_match_their_runs(study)
    assert "| trial | state | score |" in out
    folder = logdir / "CartPole"
    for name in ("best-trials.md", "best-config.yaml", "history.png", "importance.png"):
        assert (folder / name).stat().st_size > 0, name
    best = config_lib.build_config([folder / "best-config.yaml"], {})  # what --config takes
    assert best.learner.learning_rate == pytest.approx(study.best_trial.params["learner.learning_rate"])


@pytest.mark.slow
@pytest.mark.skipif(not available(), reason="Debian's postgresql is not installed (.ci/run installs it)")
def test_two_workers_share_a_study_on_a_postgresql_server(tmp_path):
    with postgres_server() as url:
        tune = _tune(tmp_path, "--trials", "2", "--workers", "2", "--storage", url, "--study", "shared")
        out, err = tune.communicate(timeout=400)
        assert tune.returncode == 0, err
        study = _study(url.replace("postgresql://", "postgresql+psycopg://"), "shared")
        assert _finished(study) >= 2 and "FAIL" not in [t.state.name for t in study.get_trials()]
        _check_trials_match_their_runs(study)
        assert "study 'shared' (postgresql+psycopg://" in out
        refused = _tune_in_process(*TRIAL, "--param", "learner.gamma=uniform:0.9:0.99", "--trials", "2",
                                   "--storage", url, "--study", "shared", "--logdir", str(tmp_path))
        assert refused.returncode == 2 and "--study 'shared' exists with param" in refused.stderr
