"""tfdqn aggregate: IQM, median and mean with stratified-bootstrap intervals against cases computed by
hand, and the tool end to end on real CartPole runs."""

import contextlib
import io
import json
import subprocess

import numpy as np
import pytest
import scipy.stats

from tests.conftest import REPO, SMALL_CONFIG, run_module
from tfdqn import config as config_lib

from tfdqn.bench import aggregate


def test_point_estimates_by_hand():
    # five runs of one task, sorted 1 2 3 4 100: the IQM drops the lowest and the highest (a quarter of five
    # rounds down to one each side) and means 2, 3, 4
    estimates = aggregate.interval_estimates(np.array([[4.0], [100.0], [1.0], [3.0], [2.0]]), reps=200)
    assert (estimates["iqm"], estimates["median"], estimates["mean"]) == pytest.approx((3.0, 3.0, 22.0))


def test_bootstrap_intervals_by_hand():
    # runs 0, 0, 0, 1: a resample of 4 holds k ones with k ~ Binomial(4, 1/4): P(k <= 2) = 0.949,
    # P(k <= 3) = 0.996. Its mean k / 4 has the 2.5th percentile 0 and the 97.5th 3/4. Its IQM (the middle
    # two of four) is 0 for k <= 1, 1/2 for k = 2 and 1 for k >= 3: percentiles 0 and 1. At 4,000 resamples the
    # share with k <= 2 is 0.949 +- 0.0035 (one standard deviation), seven of them below the 0.975 that would move them.
    estimates = aggregate.interval_estimates(np.array([[0.0], [0.0], [0.0], [1.0]]), reps=4_000)
    assert estimates["mean"] == 0.25 and estimates["mean_ci95"] == [0.0, 0.75]
    assert estimates["iqm"] == 0.0 and estimates["iqm_ci95"] == [0.0, 1.0]


def test_iqm_over_tasks_is_trim_mean_of_all_scores_and_seeded():
    scores = np.random.default_rng(0).normal(size=(5, 4))
    estimates = aggregate.interval_estimates(scores, reps=500)
    assert estimates["iqm"] == pytest.approx(scipy.stats.trim_mean(scores.ravel(), 0.25))
    assert estimates["mean"] == pytest.approx(scores.mean())
    for key in aggregate.AGGREGATES:
        low, high = estimates[f"{key}_ci95"]
        assert low < estimates[key] < high
    assert aggregate.interval_estimates(scores, reps=500) == estimates


def test_improvement_probability_counts_pairs_per_task_and_averages_tasks():
    # task 0: X 2, 1 against Y 3, 1, 0: of six pairs X wins 3 (2>1, 2>0, 1>0) and ties 1 (1=1): (3 + 0.5) / 6.
    # task 1: X always ahead: 1. The average over the tasks: (3.5 / 6 + 1) / 2.
    x, y = np.array([[2.0, 5.0], [1.0, 6.0]]), np.array([[3.0, 1.0], [1.0, 2.0], [0.0, 0.0]])
    result = aggregate.improvement_probability(x, y, reps=500)
    assert result["probability"] == pytest.approx((3.5 / 6 + 1) / 2)
    low, high = result["probability_ci95"]
    assert 0 <= low <= result["probability"] <= high <= 1 and low < high


def test_curve_iqm_is_the_iqm_at_each_step():
    curves = np.random.default_rng(1).normal(size=(5, 3))
    curve = aggregate.curve_estimates(curves, reps=300)
    assert curve["iqm"] == pytest.approx([scipy.stats.trim_mean(curves[:, j], 0.25) for j in range(3)])
    assert all(low <= iqm <= high for low, iqm, high in zip(curve["iqm_ci95_low"], curve["iqm"], curve["iqm_ci95_high"]))


@pytest.mark.slow
def test_the_tool_aggregates_real_runs(tmp_path):
    import tfdqn

    runs = []
    for seed in range(3):  # in this process: one TensorFlow start-up for the three
        config = config_lib.resolve_config([SMALL_CONFIG[1]], {
            "env.id": "CartPole", "run.total_steps": 600, "run.learning_starts": 200, "run.eval_every": 200,
            "run.eval_episodes": 2, "run.final_eval_episodes": 2, "run.seed": seed})
        tfdqn.train(config, tmp_path / f"s{seed}", quiet=True)
        runs.append(str(tmp_path / f"s{seed}"))
    out = tmp_path / "agg.json"
    result = run_module("tfdqn", "aggregate", *runs, "--out", str(out), "--plot", str(tmp_path / "agg"), "--reps", "500")
    assert result.returncode == 0, result.stderr
    results = json.loads(out.read_text())
    finals = [json.loads((tmp_path / f"s{seed}" / "summary.json").read_text())["final_eval_return_mean"]
              for seed in range(3)]
    assert results["final_eval_return"]["iqm"] == pytest.approx(scipy.stats.trim_mean(finals, 0.25))
    assert results["curve"]["env_steps"] == [200, 400, 600]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert [run["code"]["commit"] for run in results["runs"]] == [commit] * 3  # the commit each run trained at
    summaries = [json.loads((tmp_path / f"s{seed}" / "summary.json").read_text()) for seed in range(3)]
    assert [(run["last_network_eval_return"], run["product_env_steps"], run["run_seconds"]) for run in results["runs"]] \
        == [(s["last_network_eval_return_mean"], s["final_network"]["env_steps"], s["run_seconds"]) for s in summaries]
    assert results["code"]["commit"] == commit  # and the code that aggregated them
    assert "| IQM |" in result.stdout and (tmp_path / "agg.png").stat().st_size > 0
    missing = run_module("tfdqn", "aggregate", runs[0], str(tmp_path / "missing"), timeout=120)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "holds no finished run" in missing.stderr


def test_a_record_given_as_a_run_folder_is_refused_in_one_line():
    """A user who hands aggregate a results JSON (docs/atari100k-drq_eps.json) gets a line, not a traceback."""
    from tfdqn.bench.aggregate import main

    record = str(REPO / "docs" / "atari100k-drq_eps.json")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main([record, "--reps", "10"]) == 2
    assert err.getvalue() == (
        f"tfdqn aggregate: error: RUN_DIR {record!r} is a file, not a run folder; allowed: run folders written by tfdqn "
        "train (a record such as docs/*.json is read by the subcommand that wrote it)\n")
