"""Time to a score: the run clock, `evaluations.csv` and `run.target_return`, across a resume."""

import csv
import math
import pathlib
import time

import pytest
import tensorflow as tf

from tfdqn import config as config_lib
from tfdqn.errors import UserError
from tfdqn.run.clock import RunClock, process_start
from tfdqn.run.loop import train

DATA = pathlib.Path(__file__).parent / "data"


def _config(**overrides):
    return config_lib.build_config([DATA / "cartpole_5000.yaml"], {
        "run.total_steps": 400, "run.learning_starts": 100, "run.eval_every": 200, "run.eval_episodes": 2,
        "run.final_eval_episodes": 2, "run.checkpoint_every": 200, "replay.capacity": 1000, **overrides})


def _evaluations(run_dir: pathlib.Path) -> list[dict]:
    with (run_dir / "evaluations.csv").open() as file:
        return [{key: float(value) for key, value in row.items()} for row in csv.DictReader(file)]


def test_the_clock_goes_on_from_the_saved_reading_and_counts_from_the_process_start():
    saved = tf.Variable(100.0, dtype=tf.float64)
    clock = RunClock(saved, started=time.time() - 5)
    assert 105 <= clock.seconds() < 106
    clock.save()
    assert 105 <= float(saved.numpy()) < 106
    assert 0 < time.time() - process_start() < 3600  # this test process started before the test, not long before


def test_a_resumed_run_continues_its_evaluations_and_its_clock(tmp_path):
    run_dir = tmp_path / "run"
    first = train(_config(), run_dir, quiet=True)
    rows = _evaluations(run_dir)
    assert [row["env_steps"] for row in rows] == [200, 400]
    assert 0 < rows[0]["run_seconds"] < rows[1]["run_seconds"] <= first["run_seconds"]
    second = train(_config(**{"run.total_steps": 800}), run_dir, quiet=True, resume=True)
    resumed = _evaluations(run_dir)
    assert resumed[:2] == rows and [row["env_steps"] for row in resumed] == [200, 400, 600, 800]
    assert rows[1]["run_seconds"] < resumed[2]["run_seconds"] < resumed[3]["run_seconds"] <= second["run_seconds"]
    assert "target_return" not in second  # no target: trained to total_steps


def test_a_run_ends_at_the_first_evaluation_that_reaches_its_target_and_keeps_that_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    summary = train(_config(**{"run.target_return": -math.inf, "run.total_steps": 2000}), run_dir, quiet=True)
    assert summary["env_steps"] == 200 and summary["reached_target"] is True
    assert summary["target_return"] == -math.inf and summary["final_eval_episodes"] == 2
    assert [row["env_steps"] for row in _evaluations(run_dir)] == [200]
    assert (run_dir / "checkpoints" / "ckpt-200.complete").exists()


def test_a_target_without_periodic_evaluations_is_refused_in_one_line():
    with pytest.raises(UserError, match=r"^config key run.target_return = 18.0 needs periodic evaluations, but "
                                        r"run.eval_every = 0; allowed: run.eval_every >= 1, or run.target_return = inf$"):
        _config(**{"run.target_return": 18, "run.eval_every": 0})
    with pytest.raises(UserError, match="run.target_return = nan is out of range; allowed: a number, or inf"):
        _config(**{"run.target_return": "nan"})
