"""`training_interval` below 1: several updates per env step, exact in every update driver and with actors."""

import json

import pytest

from tests.conftest import SMALL_CARTPOLE, train_in_process
from tfdqn.run.cadence import updates_due


@pytest.mark.parametrize("interval, expected", [(0.25, 400), (0.5, 200), (4, 25), (1.0, 100), (0.2, 500), (2.5, 40)])
def test_updates_owed_are_counted_in_integers(interval, expected):
    assert updates_due(100, 0, interval) == expected
    assert updates_due(1_000_003, 3, interval) == int(1_000_000 / interval)


@pytest.mark.slow
@pytest.mark.parametrize("settings", [[], ["--set", "run.async_learner=true"], ["--set", "replay.device=accelerator"],
                                      ["--actors", "process", "--set", "actors.count=2"]],
                         ids=["inline", "async", "device-replay", "process-actors"])
def test_a_quarter_interval_makes_exactly_four_updates_per_env_step(settings, tmp_path):
    args = [*SMALL_CARTPOLE, "--training-interval", "0.25", "--total-steps", "600", "--learning-starts", "500",
            "--checkpoint-every", "0", "--set", "run.final_eval_episodes=1", "--quiet", *settings,
            "--logdir", str(tmp_path), "--run-name", "a"]
    # the run is only read back: in this process, its actor processes spawned from it as from a learner's
    result = train_in_process(*args)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["training_interval"] == 0.25
    assert summary["updates"] == 4 * (summary["env_steps"] - 500) and summary["env_steps"] >= 600
