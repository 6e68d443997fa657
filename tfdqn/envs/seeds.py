"""Per-env seeds: one rule for every vector implementation."""

from __future__ import annotations

import numpy as np


def env_seed(seed: int, index: int) -> int:
    """The seed of env `index` in a run seeded `seed`.

    Env 0 gets `seed` itself, so a one-env run plays exactly what it always played. Env i > 0 gets a
    31-bit seed drawn from `numpy.random.SeedSequence([seed, i])`: unlike `seed + i`, the envs of runs
    with neighbouring seeds share no games (with `seed + i`, run s's env 1 replays run s+1's env 0).
    31 bits because ale-py's vector env takes a non-negative C int (-1 there means "keep the seed").
    """
    if index == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1, np.uint32)[0] >> 1)


def env_seeds(seed: int, num_envs: int) -> list[int]:
    """`env_seed(seed, i)` for i in 0..num_envs-1."""
    return [env_seed(seed, index) for index in range(num_envs)]
