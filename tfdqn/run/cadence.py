"""The run's two cadence rules as pure functions: how many updates are owed, and when a periodic task is due."""

import functools

from tfdqn.config import interval_fraction


@functools.lru_cache(maxsize=16)
def _interval(training_interval: float):
    fraction = interval_fraction(training_interval)
    if fraction is None:
        raise ValueError(f"training_interval = {training_interval!r}; allowed: a number > 0 such as 4 or 0.25")
    return fraction.numerator, fraction.denominator


def updates_due(env_steps: int, learning_starts: int, training_interval: float,
                env_steps_per_round: int = 1) -> int:
    """Total gradient updates owed after `env_steps` env steps: one per `training_interval` steps past
    `learning_starts` (0.25: four per env step), counted at the last multiple of `env_steps_per_round` (so
    they fall due in rounds of `env_steps_per_round / training_interval`, run as fused calls). Counted in
    integers (the interval as a fraction), so no rounding ever owes one update more or less. The loop
    runs `updates_due(...) - updates_done`; this is the only cadence rule."""
    numerator, denominator = _interval(training_interval)
    rounds_end = env_steps // env_steps_per_round * env_steps_per_round
    return max(0, rounds_end - learning_starts) * denominator // numerator


def no_update_reason(run) -> str | None:
    """Why a run of these `run` settings (config.run) is owed no update by its last step, or None."""
    if updates_due(run.total_steps, run.learning_starts, run.training_interval, run.env_steps_per_round) > 0:
        return None
    return (f"run.total_steps {run.total_steps:,} leaves no update due after run.learning_starts "
            f"{run.learning_starts:,}, so the run only acts")


def crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of `every` (0: never) lies in (before, after]: periods hold for any number of envs."""
    return every > 0 and after // every > before // every
