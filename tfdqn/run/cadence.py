"""The run's two cadence rules as pure functions: how many updates are owed, and when a periodic task is due."""


def updates_due(env_steps: int, learning_starts: int, training_interval: int,
                env_steps_per_round: int = 1) -> int:
    """Total gradient updates owed after `env_steps` env steps: one per `training_interval` steps past
    `learning_starts`, counted at the last multiple of `env_steps_per_round` (so they fall due in rounds of
    `env_steps_per_round / training_interval`, run as fused calls). The loop runs `updates_due(...) - updates_done`;
    this is the only cadence rule."""
    rounds_end = env_steps // env_steps_per_round * env_steps_per_round
    return max(0, rounds_end - learning_starts) // training_interval


def crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of `every` (0: never) lies in (before, after]: periods hold for any number of envs."""
    return every > 0 and after // every > before // every
