"""Periodic work of a run, as small hooks the loop calls when they are due, each timed as its phase.

Every hook is due when the env step count crosses a multiple of its period (`cadence.crossed`, so
periods hold for any number of envs). A hook gets only the parts it uses, never the run; one that
reads the network's weights says so (`reads_weights`) and the loop settles the learner before calling
it, so an async learner leaves the weights alone meanwhile. Checkpoints are a run service the loop
calls itself (`run/saving.py`), not a hook.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import threading
import time
from typing import Callable

import numpy as np
import tensorflow as tf
import tqdm

from tfdqn.run.cadence import crossed
from tfdqn.run.evaluation_seeds import CONFIRMATION


class PeriodicHook:
    """Base of the hooks: `period` in env steps (0: never, not even at the end), `at_end`: also at the
    run's last step."""

    phase = "other"  # the PhaseTimer phase its time is charged to
    reads_weights = False  # True: the loop settles the learner before calling it

    def __init__(self, period: int, at_end: bool = False):
        self.period, self.at_end = period, at_end

    def due(self, before: int, after: int, final: bool) -> bool:
        return crossed(before, after, self.period) or (self.at_end and final and self.period > 0)

    def end_training(self, env_steps: int, env_steps_per_sec: float, next_line: str | None) -> None:
        """Training ended at `env_steps`, at `env_steps_per_sec` over the whole loop; `next_line` says what
        the run does next (its final evaluation), or None. Nothing to do, unless the hook says otherwise."""

    def close(self) -> None:
        """Release what the hook holds (nothing, unless it says otherwise)."""


class EvaluationHook(PeriodicHook):
    """Periodic games with the evaluation epsilon, logged as `charts/eval_return` and as an
    `evaluations.csv` row with the run clock's reading (a `CsvLog`: time to a score survives a resume);
    the network with the best mean return so far is kept (`checkpoint.BestCheckpoint`), the last step's
    network included, so the best is the run's product. An evaluation a stop signal cut short is
    discarded whole: the games that finish first are the short ones, whose returns are not the network's.

    `reached_target`: whether the run reached `target` (`run.target_return`), which ends it. With
    `confirm_episodes` (`run.confirm_episodes`), a periodic evaluation that reaches it is only a hit: the same
    network plays that many games on seeds no evaluation used before (`confirmations.csv`,
    `charts/confirmation_return`), the target counts as reached only if their mean reaches it too, and the
    confirmation's games, not the hit's, are what the best network is picked by: a lucky evaluation's games
    choose nothing. A resumed run reads it back from the rows it kept. `on_evaluation` (the Python API's):
    called with each evaluation's record; True ends the run as the target would (`ended_by_callback`).
    `last_mean`: the newest evaluation's mean return (None before the first), which the progress bar
    shows beside the exploration return, and `activity` what it plays while it plays (None between), which the
    bar says; `on_played(seconds, games)` is told each evaluation's length (`run.pace.Pace.evaluated`)."""

    phase = "eval"
    reads_weights = True

    def __init__(self, period: int, evaluator, episodes: int, writer, best, logs: tuple, clock, target: float,
                 confirm_episodes: int = 0, on_evaluation: Callable[[dict], bool | None] | None = None,
                 on_played: Callable[[float, int], None] = lambda seconds, games: None):
        super().__init__(period, at_end=True)
        self._on_played = on_played
        self.activity: str | None = None
        self._evaluator, self._episodes, self._writer, self._best = evaluator, episodes, writer, best
        (self._log, self._confirmations), self._clock, self._target = logs, clock, target
        self._confirm_episodes, self._on_evaluation = confirm_episodes, on_evaluation
        deciding = _row_means(self._confirmations if confirm_episodes else self._log)
        self.reached_target = any(mean >= target for mean in deciding)
        self.ended_by_callback = False
        self.last_mean = (_row_means(self._log) or [None])[-1]

    @property
    def ends_run(self) -> bool:
        return self.reached_target or self.ended_by_callback

    def __call__(self, env_steps: int) -> None:
        started, games = time.perf_counter(), self._episodes
        self.activity = f"evaluating: {self._episodes} games at env step {env_steps:,}"
        try:
            games += self._evaluate(env_steps)
        finally:
            self.activity = None
            self._on_played(time.perf_counter() - started, games)

    def _evaluate(self, env_steps: int) -> int:
        """One periodic evaluation, and its confirmation where it reaches the target; the confirmation's games."""
        returns = self._evaluator.evaluate(self._episodes, env_steps)
        if returns is None:  # None: a stop signal cut it short
            return 0
        mean, seconds = float(np.mean(returns)), round(self._clock.seconds(), 3)
        confirms = mean >= self._target and self._confirm_episodes > 0
        if confirms:
            self.activity = f"confirming a hit of {self._target:g}: {self._confirm_episodes} fresh games"
        confirmation = self._evaluator.evaluate(self._confirm_episodes, env_steps, purpose=CONFIRMATION) \
            if confirms else None
        if confirms and confirmation is None:  # a stop signal cut the confirmation short
            return 0
        self._writer.scalars(env_steps, {"charts/eval_return": mean})
        self._log.write(env_steps, seconds, mean, float(np.std(returns)))
        rating = returns if confirmation is None else confirmation  # what rates this network, and decides the hit
        rated = float(np.mean(rating))
        if confirmation is not None:  # its clock reading: when the hit was confirmed, after its games
            self._writer.scalars(env_steps, {"charts/confirmation_return": rated})
            self._confirmations.write(env_steps, round(self._clock.seconds(), 3), rated, float(np.std(confirmation)))
        self._best.offer(env_steps, rating)
        self.reached_target = self.reached_target or rated >= self._target
        self.last_mean = mean
        if self._on_evaluation is not None:
            record = {"env_steps": env_steps, "run_seconds": seconds, "return_mean": mean,
                      "return_std": float(np.std(returns)), "returns": list(returns),
                      **({"confirmation_returns": list(confirmation)} if confirmation is not None else {})}
            self.ended_by_callback = self.ended_by_callback or self._on_evaluation(record) is True
        return 0 if confirmation is None else len(confirmation)


def _row_means(log) -> list[float]:
    """The mean return of each row a resumed run's evaluation log kept (its third column)."""
    return [float(row.split(",")[2]) for row in log.rows]


@dataclasses.dataclass(frozen=True)
class SummarySources:
    """What a summary reads, and nothing else of the run."""

    counters: object      # agent.counters.Counters
    actor: object         # its epsilon
    learner: object       # its optimizer's learning rate
    timer: object         # the loop thread's PhaseTimer
    driver: object        # update metrics and the learner thread's timers
    monitor: object       # system readings
    writer: object        # telemetry.tensorboard.Logger
    episodes: object      # run.episodes.EpisodeLog
    collector: object     # its `metrics()`: policy lag where actors act
    checkpoint: object    # run.saving.CheckpointService: `check_finite`, `drain_cost`
    replay_gib: Callable[[], float]  # the replay's filled part, in GiB
    last_eval: Callable[[], float | None] = lambda: None  # EvaluationHook.last_mean, for the progress bar
    seconds_left: Callable[[int], float | None] = lambda env_steps: None  # run.pace.Pace's, for the progress bar
    activity: Callable[[], str | None] = lambda: None  # EvaluationHook.activity: what plays now, for the bar


def in_gib(system: dict) -> dict:
    """The `system/*_bytes` readings again in GiB, the unit of the layout's memory chart."""
    return {key.removesuffix("_bytes") + "_gib": value / 2**30 for key, value in system.items() if key.endswith("_bytes")}


class ProgressBar(tqdm.tqdm):
    """A tqdm bar that shows the rate it is given (`shown_rate`, env steps/s) in place of tqdm's own estimate,
    so the bar shows one rate, and the time left it is given (`seconds_left`, from `run.pace.Pace`, which
    counts the slower learning to come while the warm-up runs) in place of tqdm's remaining steps over that
    rate (tqdm's way: a `format_dict` override and a bar format naming the new field)."""

    FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{time_left}, {rate_fmt}{postfix}]"
    shown_rate: float | None = None  # None: tqdm's own, env steps since the bar started over its time
    seconds_left: float | None = None  # None: not measured yet, shown as "?"

    def __init__(self, **kwargs):
        super().__init__(bar_format=self.FORMAT, **kwargs)

    @property
    def format_dict(self) -> dict:
        left = "?" if self.seconds_left is None else self.format_interval(self.seconds_left)
        return {**super().format_dict, "rate": self.shown_rate, "time_left": left}


def bar_postfix(recent_returns, eval_mean: float | None, epsilon: float) -> str:
    """The exploration games' recent mean return, the newest evaluation's mean, and epsilon, labelled so
    the two returns are not read for one another."""
    train = f"{np.mean(recent_returns):.1f}" if len(recent_returns) else "-"
    evaluated = "-" if eval_mean is None else f"{eval_mean:.1f}"
    return f"train ret {train} | eval {evaluated} | eps {epsilon:.3f}"


class SummaryHook(PeriodicHook):
    """Writes one summary per period: episodes, epsilon, losses, throughput, phase shares, system load;
    and, unless quiet, refreshes the progress bar every second whatever the period (a long period
    would freeze it), at the cost of one clock read per loop iteration. The bar's rate is that of the
    last second; it closes where training ends with the whole training's rate (`end_training`), so a
    final evaluation that plays for minutes neither freezes it nor counts in it. Where the loop's thread is
    busy for longer (a fused round of hundreds of updates, a periodic evaluation), a second thread redraws
    the bar each second, its clock and time left moving, and says what plays (`SummarySources.activity`).

    `perf/share_*` are shares of the loop thread's wall time and add up to 1; `perf/learner_busy_share`
    is the share of wall time the learner spent updating, in whichever thread it runs. A phase's share
    is written once time has been charged to it, and the learner's figures once it has updated: a flat
    line at zero would read as a measurement.
"""

    phase = "log"
    BAR_SECONDS = 1.0  # longest time between two refreshes of the progress bar

    def __init__(self, period: int, total_steps: int, sources: SummarySources, quiet: bool):
        super().__init__(period, at_end=True)
        self._s = sources
        self._last = sources.counters.read()
        self._postfix_text = "" if quiet else self._postfix()
        self._bar = ProgressBar(total=total_steps, initial=self._last[0], disable=quiet, unit="step",
                                dynamic_ncols=True, postfix=self._postfix_text or None)
        self._bar_shown = (time.monotonic(), self._last[0])  # when the bar was last refreshed, at which env step
        self._summary_due = False
        self._lock = threading.Lock()  # the loop's thread and the redrawing thread take turns at the bar
        self._drawn = (time.monotonic(), None)  # when the bar was last drawn by either, with which activity
        self._stop = threading.Event()
        self._redrawing = None if quiet else threading.Thread(target=self._redraw, name="tfdqn-bar", daemon=True)
        if self._redrawing is not None:
            self._redrawing.start()

    def due(self, before: int, after: int, final: bool) -> bool:
        self._summary_due = crossed(before, after, self.period) or final
        return self._summary_due or (not self._bar.disable and
                                     time.monotonic() - self._bar_shown[0] >= self.BAR_SECONDS)

    def __call__(self, env_steps: int) -> None:
        if self._summary_due:
            self._summarize(env_steps)
        if not self._bar.disable:
            self._show(env_steps)

    def _show(self, env_steps: int) -> None:
        """The bar at `env_steps`, with env steps/s since its last refresh, recent returns and epsilon."""
        now = time.monotonic()
        seconds, steps = now - self._bar_shown[0], env_steps - self._bar_shown[1]
        postfix = self._postfix()  # read here: the redrawing thread calls no TensorFlow
        with self._lock:
            self._bar.shown_rate = steps / seconds if seconds > 0 else None
            self._bar.seconds_left = self._s.seconds_left(env_steps)
            self._move_bar(env_steps, postfix)
        self._bar_shown = (now, env_steps)

    def _postfix(self) -> str:
        return bar_postfix(self._s.episodes.recent, self._s.last_eval(), float(self._s.actor.epsilon().numpy()))

    def _move_bar(self, env_steps: int, postfix: str) -> None:
        """Called holding the lock."""
        self._postfix_text = postfix
        self._bar.set_postfix_str(postfix, refresh=False)
        self._bar.total = max(self._bar.total, env_steps)  # N envs may end a few steps past total_steps
        self._bar.update(env_steps - self._bar.n)
        self._drawn = (time.monotonic(), None)

    def _redraw(self) -> None:
        """The bar drawn again each second the loop's thread has not, and at once when what plays changes: its
        clock and time left go on through a long round of updates or an evaluation, which it names."""
        while not self._stop.wait(0.1):
            activity = self._s.activity()
            with self._lock:
                if self._stop.is_set():
                    return
                if activity == self._drawn[1] and time.monotonic() - self._drawn[0] < self.BAR_SECONDS:
                    continue
                if self._bar.seconds_left is not None:  # the time left runs down while nothing else moves
                    self._bar.seconds_left = max(0.0, self._bar.seconds_left - (time.monotonic() - self._drawn[0]))
                self._bar.set_postfix_str(self._postfix_text + (f" | {activity}" if activity else ""), refresh=False)
                self._bar.refresh()
                self._drawn = (time.monotonic(), activity)

    def _stop_redrawing(self) -> None:
        self._stop.set()
        if self._redrawing is not None and self._redrawing is not threading.current_thread():
            self._redrawing.join()

    def end_training(self, env_steps: int, env_steps_per_sec: float, next_line: str | None) -> None:
        """Close the bar at `env_steps` with the training's rate, then print `next_line` below it."""
        self._stop_redrawing()
        if self._bar.disable:
            return
        self._bar.shown_rate = env_steps_per_sec
        if env_steps >= self._bar.total:  # else stopped early: the last time left still says what is to go
            self._bar.seconds_left = 0.0
        self._move_bar(env_steps, self._postfix())
        self._bar.close()
        if next_line:
            print(next_line, file=sys.stderr, flush=True)

    def _summarize(self, env_steps: int) -> None:
        s = self._s
        s.checkpoint.check_finite()
        shares = s.timer.window_shares()  # closes the window: what follows is charged to the next one
        learner_shares = [timer.window_shares() for timer in s.driver.timers]
        system = s.monitor.drain()
        now = s.counters.read()
        wall = shares.pop("wall_seconds")
        charged = s.timer.charged() | {"other"}
        values = {
            **s.episodes.drain(),
            "charts/epsilon": s.actor.epsilon().numpy(),
            "charts/learning_rate": float(s.learner.optimizer.learning_rate),
            "perf/env_steps_per_sec": (now[0] - self._last[0]) / wall,
            **{f"perf/{key}": value for key, value in shares.items() if key.removeprefix("share_") in charged},
            **self._learner_figures(now, wall, shares, learner_shares),
            **s.collector.metrics(),
            **s.checkpoint.drain_cost(),
            **system,
            **in_gib(system),
            "system/replay_gib": s.replay_gib(),
        }
        s.writer.scalars(env_steps, values)
        self._last = now

    def _learner_figures(self, now: tuple[int, int], wall: float, shares: dict, learner_shares: list) -> dict:
        """Losses, updates/s and the learner's busy share, once the learner has made an update."""
        metrics = self._s.driver.metrics
        if not now[1] or not metrics:
            return {}
        return {"losses/td_loss": metrics["td_loss"].numpy(), "losses/q_values": metrics["q_values"].numpy(),
                "perf/updates_per_sec": (now[1] - self._last[1]) / wall,
                "perf/learner_busy_share": sum(s.get("share_update", 0.0) for s in [shares, *learner_shares])}

    def close(self) -> None:
        self._stop_redrawing()
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
