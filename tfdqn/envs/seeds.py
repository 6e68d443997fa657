"""Per-env seeds: one rule for every vector implementation."""

from __future__ import annotations

import numpy as np


def derive_seed(*parts: int, bits: int = 32) -> int:
    """A `bits`-bit seed drawn from `numpy.random.SeedSequence(parts)`: distinct parts give unrelated
    seeds, unlike sums such as `seed + i`. Seeds an env's `reset` takes need 31 bits (ale-py's vector
    env takes a non-negative C int)."""
    return int(np.random.SeedSequence([int(part) for part in parts]).generate_state(1, np.uint32)[0] >> (32 - bits))


def env_seed(seed: int, index: int) -> int:
    """The seed of env `index` in a run seeded `seed`.

    Env 0 gets `seed` itself, so a one-env run plays exactly what it always played. Env i > 0 gets
    `derive_seed(seed, i, bits=31)`: unlike `seed + i`, the envs of runs with neighbouring seeds share
    no games (with `seed + i`, run s's env 1 replays run s+1's env 0).
    """
    if index == 0:
        return int(seed)
    return derive_seed(seed, index, bits=31)


def env_seeds(seed: int, num_envs: int) -> list[int]:
    """`env_seed(seed, i)` for i in 0..num_envs-1."""
    return [env_seed(seed, index) for index in range(num_envs)]
