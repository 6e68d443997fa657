"""The run's checkpoint service: the loop asks it whether a save is due and has it save a settled learner.

It is a service of the run, not a hook: the loop calls it at its period, at the last step and when a
stop signal ends the run, and a collector failure names the checkpoint it kept. Hooks never see it.
"""

from __future__ import annotations

import tensorflow as tf

from tfdqn.errors import RunFailure
from tfdqn.run.cadence import crossed
from tfdqn.run.checkpoint import write_failure


class CheckpointService:
    """Saves a complete checkpoint every `period` env steps (0: only at the end) and at the last step.

    `last` is the env step of the newest checkpoint this run kept (or resumed from). The caller settles
    the learner first: a checkpoint holds weights no update is writing."""

    def __init__(self, period: int, checkpointer, collector, learner, logs, clock, pending, last: int | None = None):
        self.period = period
        self._pending = pending  # the driver's batches drawn ahead, which a checkpoint keeps (`Driver.pending`)
        self._checkpointer, self._collector, self._learner = checkpointer, collector, learner
        self._logs = logs  # the CSV logs: their rows up to a checkpoint go to disk before the checkpoint does
        self._clock = clock  # its reading goes into the checkpoint
        self.last = last
        self._cost = None  # {"seconds", "bytes"} of the newest save, until `drain_cost` reports it

    def due(self, before: int, after: int, final: bool) -> bool:
        return final or crossed(before, after, self.period)

    def kept(self) -> str:
        return f"env step {self.last}" if self.last else "none"

    def check_finite(self) -> None:
        """Stop with the env step where the TD loss first became NaN or Inf; never checkpoint past it."""
        bad_update = int(self._learner.first_nonfinite_update.numpy())
        if bad_update:
            step = int(self._learner.first_nonfinite_env_step.numpy())
            kept = f"the last good checkpoint ({self.kept()}) is kept" if self.last else "no checkpoint"
            raise RunFailure(f"the TD loss became NaN or Inf at update {bad_update} (env step {step}); "
                             f"{kept}; check the rewards or lower learner.learning_rate")

    def save(self, env_steps: int) -> None:
        """Write checkpoint `env_steps`; a failure stops the run in one line and keeps the previous one."""
        self.check_finite()
        try:
            for log in self._logs:
                log.sync()
            self._clock.save()
            self._cost = self._checkpointer.save(env_steps, self._collector.state(), self._pending())
        except (OSError, tf.errors.OpError) as error:
            raise RunFailure(f"checkpoint at env step {env_steps} could not be written ({write_failure(error)}); "
                             f"the previous complete checkpoint ({self.kept()}) is intact") from None
        self.last = env_steps

    def save_unless_saved(self, env_steps: int) -> None:
        """A stop signal's checkpoint: skipped when the step was just saved."""
        if self.last != env_steps:
            self.save(env_steps)

    def drain_cost(self) -> dict:
        """`perf/checkpoint_seconds` and `perf/checkpoint_bytes` of the newest save, once; {} when none came."""
        cost, self._cost = self._cost, None
        return {} if cost is None else {"perf/checkpoint_seconds": cost["seconds"], "perf/checkpoint_bytes": cost["bytes"]}
