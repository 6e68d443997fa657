"""What a run ends with: its product is the best-evaluated network (the last one a candidate too), the
one it evaluates on fresh games, reports and exports; the last network's figure is reported beside it."""

import json
import pathlib

import numpy as np
import pytest

from tfdqn import config as config_lib
from tfdqn.run.build import build_run
from tfdqn.run.checkpoint import BestCheckpoint
from tfdqn.run.evaluation_seeds import FINAL
from tfdqn.run.summary import finish
from tfdqn.telemetry.tensorboard import read_scalars

DATA = pathlib.Path(__file__).parent / "data"


def _config(**overrides):
    return config_lib.build_config([DATA / "cartpole_5000.yaml"], {
        "run.total_steps": 400, "run.learning_starts": 100, "run.eval_every": 200, "run.eval_episodes": 2,
        "run.final_eval_episodes": 3, "replay.capacity": 1000, **overrides})


def _policy_weights(policy_dir: pathlib.Path) -> list:
    import keras

    return keras.models.load_model(policy_dir / "network.keras").get_weights()


def test_the_best_network_is_the_product_evaluated_reported_and_exported(tmp_path):
    """An earlier network kept as best (its weights W0) and a different last network (W1): the run's
    product is W0, played on the final evaluation's games, exported to policy/; the last network is
    played on the same games and reported as such."""
    with build_run(_config(), tmp_path / "run") as run:
        best_weights = run.agent.online.get_weights()
        BestCheckpoint(tmp_path / "run" / "checkpoints", run.agent.online).offer(200, [1e9, 1e9])
        last_weights = [w + np.random.default_rng(0).normal(0, 0.5, w.shape).astype(w.dtype) for w in best_weights]
        run.agent.online.set_weights(last_weights)
        expected_last = run.evaluator.evaluate(3, 400, purpose=FINAL)
        run.agent.online.set_weights(best_weights)
        expected_best = run.evaluator.evaluate(3, 400, purpose=FINAL)
        run.agent.online.set_weights(last_weights)
        figures = finish(run, 400)
    assert figures["final_network"] == {"source": "best", "env_steps": 200, "selection_return_mean": 1e9}
    assert figures["final_eval_returns"] == expected_best
    assert figures["last_network_eval_return_mean"] == np.mean(expected_last)
    for exported, kept in zip(_policy_weights(pathlib.Path(figures["policy_dir"])), best_weights):
        np.testing.assert_array_equal(exported, kept)
    about = json.loads((pathlib.Path(figures["policy_dir"]) / "policy.json").read_text())
    assert about["env_steps"] == 200


def test_without_periodic_evaluation_the_last_network_is_the_product(tmp_path):
    from tfdqn.run.loop import train

    summary = train(_config(**{"run.eval_every": 0}), tmp_path / "run", quiet=True)
    assert summary["final_network"] == {"source": "last", "env_steps": 400}
    assert summary["final_eval_return_mean"] == summary["last_network_eval_return_mean"]
    assert len(summary["final_eval_returns"]) == 3


def test_a_run_evaluates_its_last_network_as_a_candidate_and_reports_which_network_it_ships(tmp_path):
    """Evaluations at 200 and at the last step (300, not a multiple of the period): the product is
    whichever scored best there, and the summary's final figures are of that network."""
    from tfdqn.run.loop import train

    summary = train(_config(**{"run.total_steps": 300}), tmp_path / "run", quiet=True)
    evaluations = read_scalars(tmp_path / "run", "charts/eval_return")
    assert [step for step, _ in evaluations] == [200, 300]
    best_step = max(evaluations, key=lambda e: (e[1], -e[0]))[0]
    assert summary["final_network"]["env_steps"] == best_step
    assert summary["final_network"]["source"] == ("last" if best_step == 300 else "best")
    finals = dict(read_scalars(tmp_path / "run", "charts/final_eval_return"))
    assert finals[300] == pytest.approx(summary["final_eval_return_mean"])  # float32 in TensorBoard


def test_the_final_evaluation_plays_seeds_no_periodic_evaluation_played_and_the_summary_lists_them(tmp_path):
    from tfdqn.run.loop import train

    summary = train(_config(), tmp_path / "run", quiet=True)
    entries = summary["evaluation_seeds"]
    assert [(entry["purpose"], entry["env_steps"], len(entry["seeds"])) for entry in entries] == [
        ("periodic", 200, 2), ("periodic", 400, 2), ("final", 400, 3)]
    periodic = {seed for entry in entries[:2] for seed in entry["seeds"]}
    assert len(periodic) == 4 and periodic.isdisjoint(entries[2]["seeds"])
    assert json.loads((tmp_path / "run" / "evaluation_seeds.json").read_text()) == entries


def test_a_confirmed_hit_ends_the_run_and_is_logged_beside_the_evaluation(tmp_path):
    """Every CartPole game scores at least 8: the first evaluation hits a target of 1 and its confirmation on
    fresh games does too, so the run ends there."""
    from tfdqn.run.csv_log import EVALUATIONS_HEADER, read_rows
    from tfdqn.run.loop import train

    summary = train(_config(**{"run.target_return": 1.0, "run.confirm_episodes": 4}), tmp_path / "run", quiet=True)
    assert summary["reached_target"] is True and summary["env_steps"] == 200
    [confirmation] = read_rows(tmp_path / "run" / "confirmations.csv", EVALUATIONS_HEADER)
    [evaluation] = read_rows(tmp_path / "run" / "evaluations.csv", EVALUATIONS_HEADER)
    assert confirmation["env_steps"] == evaluation["env_steps"] == 200
    assert confirmation["run_seconds"] >= evaluation["run_seconds"] and confirmation["return_mean"] >= 1
    assert [entry["purpose"] for entry in summary["evaluation_seeds"]] == ["periodic", "confirmation", "final"]
    best = json.loads((tmp_path / "run" / "checkpoints" / "best.json").read_text())
    assert len(best["returns"]) == 4  # picked by its confirmation's games
