"""Atari 100k's reference scores for the 26 games, with their sources, and the human-normalised score.

- random and human: Dopamine's `labs/atari_100k/normalization_utils.py` (the values rliable uses).
- DER: van Hasselt et al. 2019 (data-efficient Rainbow), the paper's per-game means over 5 seeds.
- DrQ(epsilon): the mean of rliable's 100 runs per game (Agarwal et al. 2021; the run files as IRIS
  publishes them, `results/data/DrQ(eps).json`).
"""

from __future__ import annotations

# game: (random, human, DER, DrQ(epsilon))
SCORES = {
    "Alien": (227.8, 7127.7, 739.9, 865.2),
    "Amidar": (5.8, 1719.5, 188.6, 137.8),
    "Assault": (222.4, 742.0, 431.2, 579.6),
    "Asterix": (210.0, 8503.3, 470.8, 763.6),
    "BankHeist": (14.2, 753.1, 51.0, 232.9),
    "BattleZone": (2360.0, 37187.5, 10124.6, 10165.3),
    "Boxing": (0.1, 12.1, 0.2, 9.0),
    "Breakout": (1.7, 30.5, 1.9, 19.8),
    "ChopperCommand": (811.0, 7387.8, 861.8, 844.6),
    "CrazyClimber": (10780.5, 35829.4, 16185.3, 21539.0),
    "DemonAttack": (152.1, 1971.0, 508.0, 1321.5),
    "Freeway": (0.0, 29.6, 27.9, 20.3),
    "Frostbite": (65.2, 4334.7, 866.8, 1014.2),
    "Gopher": (257.6, 2412.5, 349.5, 621.6),
    "Hero": (1027.0, 30826.4, 6857.0, 4167.9),
    "Jamesbond": (29.0, 302.8, 301.6, 349.1),
    "Kangaroo": (52.0, 3035.0, 779.3, 1088.4),
    "Krull": (1598.0, 2665.5, 2851.5, 4402.1),
    "KungFuMaster": (258.5, 22736.3, 14346.1, 11467.4),
    "MsPacman": (307.3, 6951.6, 1204.1, 1218.1),
    "Pong": (-20.7, 14.6, -19.3, -9.1),
    "PrivateEye": (24.9, 69571.3, 97.8, 3.5),
    "Qbert": (163.9, 13455.0, 1152.9, 1810.7),
    "RoadRunner": (11.5, 7845.0, 9600.0, 11211.4),
    "Seaquest": (68.4, 42054.7, 354.1, 352.3),
    "UpNDown": (533.4, 11693.2, 2877.4, 4324.5),
}
GAMES = tuple(SCORES)
RANDOM, HUMAN, DER, DRQ_EPS = 0, 1, 2, 3  # columns of SCORES
# IQM of the human-normalised scores over the 26 games (Agarwal et al. 2021; BBF, Schwarzer et al. 2023, Table A.1)
PUBLISHED_IQM = {"DER": 0.183, "DrQ(epsilon)": 0.280}


def human_normalized(game: str, score: float) -> float:
    """(score - random) / (human - random): 0 plays as a random policy, 1 as the human tester."""
    random, human = SCORES[game][RANDOM], SCORES[game][HUMAN]
    return (score - random) / (human - random)
