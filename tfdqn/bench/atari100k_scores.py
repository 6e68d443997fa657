"""Atari 100k's reference scores for the 26 games, with their sources, and the human-normalised score.

- random and human: Dopamine's `labs/atari_100k/normalization_utils.py` (the values rliable uses).
- DER: van Hasselt et al. 2019 (data-efficient Rainbow), the paper's per-game means over 5 seeds.
- DrQ(epsilon): rliable's 100 runs per game (Agarwal et al. 2021), each run's score as published in the
  run file IRIS ships, `results/data/DrQ(eps).json` (SHA-256 `DRQ_EPS_RUNS_SHA256`), kept byte for byte
  in `tfdqn/data/drq_eps_runs.json`. With the runs themselves, a few runs of tfdqn can be placed among
  DrQ(epsilon)'s (percentiles, the probability of improvement) and its aggregate taken over the same games;
  a per-game mean of 100 runs says little about 2.
"""

from __future__ import annotations

import functools
import json
import pathlib

import numpy as np

DRQ_EPS_RUNS = pathlib.Path(__file__).resolve().parent.parent / "data" / "drq_eps_runs.json"
DRQ_EPS_RUNS_SHA256 = "a86f9f4243b7eb3f994b6db4c9c87fb698742bfa08e7b06e414be41abf1f0574"

# game: (random, human, DER)
SCORES = {
    "Alien": (227.8, 7127.7, 739.9),
    "Amidar": (5.8, 1719.5, 188.6),
    "Assault": (222.4, 742.0, 431.2),
    "Asterix": (210.0, 8503.3, 470.8),
    "BankHeist": (14.2, 753.1, 51.0),
    "BattleZone": (2360.0, 37187.5, 10124.6),
    "Boxing": (0.1, 12.1, 0.2),
    "Breakout": (1.7, 30.5, 1.9),
    "ChopperCommand": (811.0, 7387.8, 861.8),
    "CrazyClimber": (10780.5, 35829.4, 16185.3),
    "DemonAttack": (152.1, 1971.0, 508.0),
    "Freeway": (0.0, 29.6, 27.9),
    "Frostbite": (65.2, 4334.7, 866.8),
    "Gopher": (257.6, 2412.5, 349.5),
    "Hero": (1027.0, 30826.4, 6857.0),
    "Jamesbond": (29.0, 302.8, 301.6),
    "Kangaroo": (52.0, 3035.0, 779.3),
    "Krull": (1598.0, 2665.5, 2851.5),
    "KungFuMaster": (258.5, 22736.3, 14346.1),
    "MsPacman": (307.3, 6951.6, 1204.1),
    "Pong": (-20.7, 14.6, -19.3),
    "PrivateEye": (24.9, 69571.3, 97.8),
    "Qbert": (163.9, 13455.0, 1152.9),
    "RoadRunner": (11.5, 7845.0, 9600.0),
    "Seaquest": (68.4, 42054.7, 354.1),
    "UpNDown": (533.4, 11693.2, 2877.4),
}
GAMES = tuple(SCORES)
RANDOM, HUMAN, DER = 0, 1, 2  # columns of SCORES
# IQM of the human-normalised scores over the 26 games (Agarwal et al. 2021; BBF, Schwarzer et al. 2023, Table A.1)
PUBLISHED_IQM = {"DER": 0.183, "DrQ(epsilon)": 0.280}


def human_normalized(game: str, score: float) -> float:
    """(score - random) / (human - random): 0 plays as a random policy, 1 as the human tester."""
    random, human = SCORES[game][RANDOM], SCORES[game][HUMAN]
    return (score - random) / (human - random)


@functools.cache
def drq_eps_runs() -> dict[str, np.ndarray]:
    """game -> the scores of DrQ(epsilon)'s 100 runs of it."""
    return {game: np.array(runs, dtype=float) for game, runs in json.loads(DRQ_EPS_RUNS.read_text()).items()}


def drq_eps_mean(game: str) -> float:
    """DrQ(epsilon)'s published per-game mean: the mean of its 100 runs."""
    return float(np.mean(drq_eps_runs()[game]))


def drq_eps_percentile(game: str, score: float) -> float:
    """The percentile rank of `score` among DrQ(epsilon)'s runs of `game`: the share that score below it, ties
    counted half, in percent (50 is DrQ(epsilon)'s median run)."""
    runs = drq_eps_runs()[game]
    return float(100.0 * (np.sum(runs < score) + 0.5 * np.sum(runs == score)) / runs.size)
