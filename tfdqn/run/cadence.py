"""The run's two cadence rules as pure functions: how many updates are owed, and when a periodic task is due."""


def updates_due(env_steps: int, learning_starts: int, training_interval: int) -> int:
    """Total gradient updates owed after `env_steps` env steps: one per `training_interval` steps past
    `learning_starts`. The loop runs `updates_due(...) - updates_done`; this is the only cadence rule."""
    return max(0, env_steps - learning_starts) // training_interval


def crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of `every` (0: never) lies in (before, after]: periods hold for any number of envs."""
    return every > 0 and after // every > before // every
