"""DrQ(epsilon)'s own n-run spread: the IQM band against a direct count, and the vectorised bootstrap interval
against rliable's on the same sample."""

import numpy as np
import pytest

from tfdqn.bench.aggregate import interval_estimates
from tfdqn.bench.atari100k_scores import drq_eps_runs, human_normalized
from tfdqn.bench.drq_eps_spread import interval_coverage, iqm_intervals, own_iqm_spread

GAMES = ["Alien", "Breakout", "Krull", "Pong"]


def test_the_spread_of_one_run_per_game_is_the_spread_of_single_runs():
    """With one run per game of one game, the IQM is that run's score: the band is the runs' own 2.5th to 97.5th
    percentile, and a score's place among the draws is its percentile among the runs."""
    scores = human_normalized("Pong", drq_eps_runs()["Pong"])
    median = float(np.median(scores))
    spread = own_iqm_spread(["Pong"], 1, iqm=median, draws=50_000)
    assert spread["band95"] == pytest.approx(list(np.percentile(scores, [2.5, 97.5])), abs=0.03)
    assert spread["mean"] == pytest.approx(scores.mean(), abs=0.01)
    assert spread["percentile_of_tfdqn"] == pytest.approx(50, abs=2)


def test_the_vectorised_interval_is_rliables_stratified_bootstrap():
    sample = np.stack([human_normalized(game, drq_eps_runs()[game][:3]) for game in GAMES], axis=1)  # [3, 4]
    ours = iqm_intervals(sample[None], 40_000, np.random.default_rng(1))[:, 0]
    assert list(ours) == pytest.approx(interval_estimates(sample, 40_000)["iqm_ci95"], abs=0.01)


def test_few_runs_give_intervals_that_miss_more_often_than_5_percent():
    three, ten = (interval_coverage(GAMES, runs, simulations=300, reps=1_000) for runs in (3, 10))
    assert 0.6 < three < ten < 0.95
