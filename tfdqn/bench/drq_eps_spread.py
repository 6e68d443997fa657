"""What DrQ(epsilon)'s own runs give with as few runs per game as a tfdqn table has: the spread of their IQM,
and how often a 95% bootstrap interval from that many runs holds the IQM of all 100.

A tfdqn IQM over n runs per game is set beside DrQ(epsilon)'s n-run IQM over the same games (n of its 100 runs
per game drawn without replacement, many times), not beside its 100-run IQM: that is like with like. And the
stratified-bootstrap interval of an n-run IQM is itself noisy; `interval_coverage` says how often it holds the
100-run IQM, simulated on DrQ(epsilon)'s runs with the resampling rliable does (runs resampled within each game,
percentile interval), vectorised here because the simulation needs thousands of intervals.
"""

from __future__ import annotations

import numpy as np

from tfdqn.bench.atari100k_scores import drq_eps_runs, human_normalized


def _normalized(games: list[str]) -> list[np.ndarray]:
    return [human_normalized(game, drq_eps_runs()[game]) for game in games]


def _draw(games: list[str], runs: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """[draws, runs, games]: `runs` of DrQ(epsilon)'s runs of each game, drawn without replacement, per draw."""
    return np.stack([rng.permuted(np.tile(scores, (draws, 1)), axis=1)[:, :runs] for scores in _normalized(games)],
                    axis=2)


def _iqm(scores: np.ndarray) -> np.ndarray:
    """rliable's IQM (the 25%-trimmed mean of every score) over the last two axes."""
    import scipy.stats  # the bench extra's, as rliable's

    return scipy.stats.trim_mean(scores.reshape(*scores.shape[:-2], -1), 0.25, axis=-1)


def own_iqm_spread(games: list[str], runs: int, iqm: float | None = None, draws: int = 20_000,
                   seed: int = 0) -> dict:
    """DrQ(epsilon)'s IQM over these games with `runs` runs each: its mean, its 95% band (2.5th to 97.5th
    percentile of the draws) and, for a tfdqn `iqm`, where that falls among the draws (percent below, ties half)."""
    values = _iqm(_draw(games, runs, draws, np.random.default_rng(seed)))
    spread = {"runs_per_game": runs, "mean": float(values.mean()),
              "band95": [float(v) for v in np.percentile(values, [2.5, 97.5])]}
    if iqm is not None:
        spread["percentile_of_tfdqn"] = float(100.0 * (np.mean(values < iqm) + 0.5 * np.mean(values == iqm)))
    return spread


def interval_coverage(games: list[str], runs: int, simulations: int = 1_000, reps: int = 2_000,
                      seed: int = 0) -> float:
    """The share of simulated `runs`-per-game samples of DrQ(epsilon)'s runs whose 95% stratified-bootstrap
    interval of the IQM holds the IQM of all its runs (0.95 if the interval were exact)."""
    rng = np.random.default_rng(seed)
    truth = float(_iqm(np.stack(_normalized(games), axis=1)))
    covered = 0
    for start in range(0, simulations, 100):
        low, high = iqm_intervals(_draw(games, runs, min(100, simulations - start), rng), reps, rng)
        covered += int(np.sum((low <= truth) & (truth <= high)))
    return covered / simulations


def iqm_intervals(samples: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """[2, samples]: the 95% percentile interval of the IQM of each [runs, games] sample in `samples`, its runs
    resampled `reps` times within each game, as rliable's stratified bootstrap does."""
    count, runs, games = samples.shape
    picks = rng.integers(0, runs, size=(count, reps, runs, games))
    resampled = np.take_along_axis(samples[:, None], picks, axis=2)
    return np.percentile(_iqm(resampled), [2.5, 97.5], axis=1)
