"""Periodic work of a run, as small hooks the loop calls when they are due, each timed as its phase.

Every hook is due when the env step count crosses a multiple of its period (`cadence.crossed`, so
periods hold for any number of envs); summaries and checkpoints are also due at the last step.
"""

from __future__ import annotations

import collections
import pathlib
import time

import numpy as np
import tensorflow as tf
import tqdm

from tfdqn.errors import RunFailure
from tfdqn.run.cadence import crossed, updates_due
from tfdqn.run.checkpoint import write_failure


class PeriodicHook:
    """Base of the hooks: `period` in env steps (0: never), `at_end`: also at the run's last step."""

    phase = "other"  # the PhaseTimer phase its time is charged to

    def __init__(self, period: int, at_end: bool = False):
        self.period, self.at_end = period, at_end

    def due(self, before: int, after: int, final: bool) -> bool:
        return crossed(before, after, self.period) or (self.at_end and final)

    def close(self) -> None:
        """Release what the hook holds (nothing, unless it says otherwise)."""


def check_finite(learner, kept_checkpoint: int | None) -> None:
    """Stop with the env step where the TD loss first became NaN or Inf; never checkpoint past it."""
    bad_update = int(learner.first_nonfinite_update.numpy())
    if bad_update:
        step = int(learner.first_nonfinite_env_step.numpy())
        kept = (f"the last good checkpoint (env step {kept_checkpoint}) is kept" if kept_checkpoint
                else "no checkpoint")
        raise RunFailure(f"the TD loss became NaN or Inf at update {bad_update} (env step {step}); "
                         f"{kept}; check the rewards or lower learner.learning_rate")


class CheckpointHook(PeriodicHook):
    """Saves a complete checkpoint once the driver has settled; `last` is the newest one this run kept."""

    phase = "checkpoint"

    def __init__(self, period: int, checkpointer, collector, driver, learner, last: int | None = None):
        super().__init__(period, at_end=True)
        self._checkpointer, self._collector, self._driver, self._learner = checkpointer, collector, driver, learner
        self.last = last
        self.cost = None  # {"seconds", "bytes"} of the newest save, until a summary reports it

    def kept(self) -> str:
        return f"env step {self.last}" if self.last else "none"

    def __call__(self, env_steps: int) -> None:
        self._driver.settle()
        check_finite(self._learner, self.last)
        try:
            self.cost = self._checkpointer.save(env_steps, self._collector.state())
        except (OSError, tf.errors.OpError) as error:
            raise RunFailure(f"checkpoint at env step {env_steps} could not be written ({write_failure(error)}); "
                             f"the previous complete checkpoint ({self.kept()}) is intact") from None
        self.last = env_steps

    def save_unless_saved(self, env_steps: int) -> None:
        """A stop signal's checkpoint: skipped when the step was just saved."""
        if self.last != env_steps:
            self(env_steps)


class EvaluationHook(PeriodicHook):
    """Periodic greedy (or eval-epsilon) games, logged as `charts/eval_return`; the network with the best
    mean return so far is kept (`checkpoint.BestCheckpoint`).

    The driver settles first, so an async learner leaves the weights alone while they are evaluated
    and kept (evaluation advances no env step, so no update falls due meanwhile)."""

    phase = "eval"

    def __init__(self, period: int, evaluator, episodes: int, writer, driver, best):
        super().__init__(period)
        self._evaluator, self._episodes, self._writer = evaluator, episodes, writer
        self._driver, self._best = driver, best

    def __call__(self, env_steps: int) -> None:
        self._driver.settle()
        returns = self._evaluator.evaluate(self._episodes, env_steps)
        if returns:  # none when a stop signal cut the evaluation short
            self._writer.scalars(env_steps, {"charts/eval_return": np.mean(returns)})
            self._best.offer(env_steps, returns)


def idle_tags(config, start: int) -> set:
    """The perf/ tags that stay zero in every summary of a run from env step `start` with `config`, decided
    once: flat lines at zero would read as a measurement. The background learner's sampling and updates
    are its own thread's (`perf/learner_busy_share`), only it or actors make the loop wait, actors act and
    step envs in their own processes, and a periodic hook's time shows only if it runs before the last
    step (the last summary comes first there)."""
    run, step = config.run, config.steps_per_collect

    def runs_before_end(period: int) -> bool:
        first = (start // period + 1) * period if period > 0 else None
        return first is not None and start + -(-(first - start) // step) * step < run.total_steps

    idle = {"replay_sample", "update"} if run.async_learner else set()
    if config.actors.kind != "inline":
        idle |= {"act", "env_step"}
    elif not run.async_learner:
        idle.add("wait")
    idle |= {name for name, period in (("eval", run.eval_every), ("checkpoint", run.checkpoint_every))
             if not runs_before_end(period)}
    tags = {f"perf/share_{name}" for name in idle}
    if not updates_due(run.total_steps + step, run.learning_starts, run.training_interval, run.update_every):
        tags |= {"perf/share_replay_sample", "perf/share_update", "perf/updates_per_sec", "perf/learner_busy_share"}
    return tags


def in_gib(system: dict) -> dict:
    """The `system/*_bytes` readings again in GiB, the unit of the layout's memory chart."""
    return {key.removesuffix("_bytes") + "_gib": value / 2**30 for key, value in system.items() if key.endswith("_bytes")}


class SummaryHook(PeriodicHook):
    """Writes one summary per period: episodes, epsilon, losses, throughput, phase shares, system load;
    and, unless quiet, refreshes the progress bar every second whatever the period (Atari's 5,000 env
    steps would freeze it for a minute), at the cost of one clock read per loop iteration.

    `perf/share_*` are shares of the loop thread's wall time and add up to 1; `perf/learner_busy_share`
    is the share of wall time the learner spent updating, in whichever thread it runs. Tags that this
    run's mode leaves at zero (`idle_tags`) are not written."""

    phase = "log"
    BAR_SECONDS = 1.0  # longest time between two refreshes of the progress bar

    def __init__(self, period: int, run, quiet: bool):
        super().__init__(period, at_end=True)
        self._run = run
        self._last = run.agent.counters.read()
        self.system_means = collections.defaultdict(list)  # every summary's system readings, for summary.json
        self._bar = tqdm.tqdm(total=run.config.run.total_steps, initial=self._last[0], disable=quiet, unit="step",
                              dynamic_ncols=True)
        self._bar_shown = (time.monotonic(), self._last[0])  # when the bar was last refreshed, at which env step
        self._summary_due = False
        self._idle = idle_tags(run.config, self._last[0])

    def due(self, before: int, after: int, final: bool) -> bool:
        self._summary_due = super().due(before, after, final)
        return self._summary_due or (not self._bar.disable and
                                     time.monotonic() - self._bar_shown[0] >= self.BAR_SECONDS)

    def __call__(self, env_steps: int) -> None:
        if self._summary_due:
            self._summarize(env_steps)
        if not self._bar.disable:
            self._show(env_steps)

    def _show(self, env_steps: int) -> None:
        """The bar at `env_steps`, with env steps/s since its last refresh, recent return and epsilon."""
        now = time.monotonic()
        seconds, steps = now - self._bar_shown[0], env_steps - self._bar_shown[1]
        recent = self._run.episodes.recent
        self._bar.set_postfix(steps_per_s=f"{steps / seconds:.0f}" if seconds > 0 else "-",
                              ret=f"{np.mean(recent):.1f}" if recent else "nan",
                              eps=f"{float(self._run.agent.actor.epsilon().numpy()):.3f}", refresh=False)
        self._bar.total = max(self._bar.total, env_steps)  # N envs may end a few steps past total_steps
        self._bar.update(env_steps - self._bar.n)
        self._bar_shown = (now, env_steps)

    def _summarize(self, env_steps: int) -> None:
        run = self._run
        check_finite(run.agent.learner, run.checkpoint.last)
        shares = run.timer.window_shares()  # closes the window: what follows is charged to the next one
        learner_shares = [timer.window_shares() for timer in run.driver.timers]
        system = run.monitor.drain()
        for key, value in system.items():
            self.system_means[key].append(value)
        now = run.agent.counters.read()
        wall = shares.pop("wall_seconds")
        metrics = run.driver.metrics
        values = {
            **run.episodes.drain(),
            "charts/epsilon": run.agent.actor.epsilon().numpy(),
            "charts/learning_rate": float(run.agent.learner.optimizer.learning_rate),
            "losses/td_loss": metrics["td_loss"].numpy() if metrics else None,
            "losses/q_values": metrics["q_values"].numpy() if metrics else None,
            "perf/env_steps_per_sec": (now[0] - self._last[0]) / wall,
            "perf/updates_per_sec": (now[1] - self._last[1]) / wall,
            "perf/learner_busy_share": sum(s["share_update"] for s in [shares, *learner_shares]),
            **{f"perf/{key}": value for key, value in shares.items()},
            **system,
            **in_gib(system),
            "system/replay_gib": self._replay_gib(),
        }
        if run.checkpoint.cost:
            values.update({"perf/checkpoint_seconds": run.checkpoint.cost["seconds"],
                           "perf/checkpoint_bytes": run.checkpoint.cost["bytes"]})
            run.checkpoint.cost = None
        run.writer.scalars(env_steps, {tag: value for tag, value in values.items() if tag not in self._idle})
        self._last = now

    def _replay_gib(self) -> float:
        """The replay's filled part: its arrays are allocated whole, but pages count in RSS once written."""
        replay = self._run.replay
        with self._run.replay_lock:
            return len(replay) / self._run.config.replay.capacity * replay.nbytes / 2**30

    def close(self) -> None:
        self._bar.close()


class ProfilerHook(PeriodicHook):
    """Records a TensorFlow profiler trace of env steps [first, last) into `logdir`."""

    phase = "log"

    def __init__(self, steps: tuple[int, int], logdir: pathlib.Path):
        super().__init__(0)
        self._first, self._last = steps
        self._logdir = str(logdir)
        self._active = False

    def due(self, before: int, after: int, final: bool) -> bool:
        if self._active:
            return after >= self._last or final
        return self._first is not None and self._first <= after < self._last

    def __call__(self, env_steps: int) -> None:
        if self._active:
            self.close()
        else:
            tf.profiler.experimental.start(self._logdir)
            self._active, self._first = True, None

    def close(self) -> None:
        if self._active:
            tf.profiler.experimental.stop()
            self._active = False
