"""How long a run will take: said in one line near its start, and counted in the progress bar's time left.

The warm-up (`run.learning_starts` env steps of acting alone) runs several times faster than learning, so a
time left read from its rate promises hours that learning turns into days. Before the loop starts, the
run times its own compiled update on batches of zeros, between the act calls the loop makes meanwhile, and
puts back every variable they wrote, so the run is the one it would have been. During the warm-up the time
left counts the learning to come at the rate that cost implies beside the warm-up's measured one; once
learning runs, its own measured rate (over the last minute) takes over. A warm-up over before the line is
due (3 s of rate) has it said as learning begins, from the warm-up's rate. Evaluations are counted apart: their
games still to come (periodic and final) at the seconds a game has taken so far, once one has been timed, and
their time is left out of the env-step rate. The line is said again once they are timed.
With the replay on the accelerator the host replay's update is timed: the in-graph one has nothing to
sample before the replay holds a batch.
"""

from __future__ import annotations

import collections
import sys
import time

import numpy as np
import tensorflow as tf
import tqdm

from tfdqn.run.drivers import MAX_FUSED_UPDATES
from tfdqn.run.hooks import PeriodicHook

PROBE_SECONDS = 0.2  # time spent timing each of the two figures after the first (compiling) calls
PROBE_CALLS = (3, 10)  # fewest and most timed calls of each
WINDOW_SECONDS = 60.0  # the measured rate is env steps over the last minute of the phase under way
LINE_AFTER_SECONDS = 3.0  # the expected length is said once the rate spans this long


def _probe_state(agent) -> list[tf.Variable]:
    """Every variable an update or an act call writes: the networks (noise streams and held acting noise
    included), the optimizer's slots and step, the counters, the generators and the record of a first
    non-finite loss."""
    learner, copy = agent.learner, agent.acting_copy
    variables = [*agent.online.variables, *agent.target.variables, *learner.optimizer.variables,
                 *(copy.network.variables if copy is not None else ()), agent.counters.updates,
                 agent.counters.env_steps, learner.generator.state, agent.actor.generator.state,
                 learner.first_nonfinite_update, learner.first_nonfinite_env_step]
    return list({id(variable): variable for variable in variables}.values())


def _zeros(spec: tf.TensorSpec, *leading: int) -> tf.Tensor:
    return tf.zeros([*leading, *spec.shape[len(leading):]], spec.dtype)


def _median_seconds(call) -> float:
    """The median time of `call()` over a few calls (at least PROBE_CALLS[0], within PROBE_SECONDS)."""
    times, deadline = [], time.perf_counter() + PROBE_SECONDS
    while len(times) < PROBE_CALLS[0] or (time.perf_counter() < deadline and len(times) < PROBE_CALLS[1]):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def fused_updates(run_config, num_envs: int) -> int:
    """Updates per fused call in this run's steady state: those one collect (one vector step, at least one
    round) makes due, up to the drivers' most. The probe calls with that many, as XLA compiles per shape."""
    per_collect = max(num_envs, run_config.env_steps_per_round) / run_config.training_interval
    return int(min(MAX_FUSED_UPDATES, max(1, per_collect)))


def measure_update_seconds(agent, batch_size: int, fused: int = 1, act_rows: int = 1, acts: int = 0) -> float:
    """Seconds one update adds to the loop here: a call of `fused` updates after `acts` act calls on
    `act_rows` observations (as the loop runs them between calls), less those act calls timed alone, as
    each slows the other (caches); the median of a few after first calls that compile. Batches and
    observations are zeros; the agent is left as it was."""
    learner, actor = agent.learner, agent.actor
    batch = [_zeros(spec, fused, batch_size) for spec in learner.update_many_function.input_signature]
    observation = _zeros(actor.act_function.input_signature[0], act_rows)

    def act() -> None:
        actor.act(observation).numpy()

    def cycle() -> None:
        for _ in range(acts):
            act()
        learner.update_many(*batch)["td_loss"].numpy()

    state = _probe_state(agent)
    saved = [variable.numpy() for variable in state]
    try:
        cycle()  # the first calls compile
        alone = _median_seconds(act) if acts else 0.0
        return max(0.0, _median_seconds(cycle) - acts * alone) / fused
    finally:
        for variable, value in zip(state, saved):
            variable.assign(value)


class RateWindow:
    """Env steps per second over the last `seconds` of the samples it was given."""

    def __init__(self, seconds: float = WINDOW_SECONDS):
        self._seconds = seconds
        self._samples: collections.deque = collections.deque()

    def add(self, now: float, env_steps: int) -> None:
        self._samples.append((now, env_steps))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._seconds:
            self._samples.popleft()

    def span(self) -> float:
        return self._samples[-1][0] - self._samples[0][0] if self._samples else 0.0

    def rate(self) -> float | None:
        if self.span() <= 0:
            return None
        return (self._samples[-1][1] - self._samples[0][1]) / self.span()

    def clear(self) -> None:
        self._samples.clear()

    def skip(self, seconds: float) -> None:
        """Leave out the last `seconds` (spent on something else, an evaluation): the samples before move on by it."""
        self._samples = collections.deque((now + seconds, env_steps) for now, env_steps in self._samples)


class Pace:
    """The run's expected time left. `update_seconds`: one update's measured cost (None: no update is due
    in this run); `overlapped`: the updates run beside the env steps (an async learner, or actors in
    other processes), so a learning step costs the larger of the two, else their sum."""

    def __init__(self, run_config, update_seconds: float | None, overlapped: bool):
        self._learning_starts, self._total = run_config.learning_starts, run_config.total_steps
        self._interval, self._update_seconds = run_config.training_interval, update_seconds
        self._overlapped = overlapped
        self._eval_every, self._eval_episodes = run_config.eval_every, run_config.eval_episodes
        # the final evaluation plays the last network, and the best-evaluated one where periodic evaluation ran
        self._final_games = run_config.final_eval_episodes * (2 if run_config.eval_every else 1)
        self._played = (0.0, 0)  # seconds and games of the evaluations so far
        self.evaluations_said = False  # the line was said again with the evaluations timed
        self._window = RateWindow()
        self._learning: bool | None = None  # the phase the window's samples are from
        self._acting_rate: float | None = None  # the warm-up's last measured rate
        self.line_said = False

    def observe(self, now: float, env_steps: int) -> None:
        learning = env_steps >= self._learning_starts
        if learning != self._learning:
            self._acting_rate = self._window.rate() if learning else None
            self._window.clear()
            self._learning = learning
        self._window.add(now, env_steps)

    def evaluated(self, seconds: float, games: int) -> None:
        """An evaluation played `games` in `seconds`: the time left counts the games to come at its pace, and the
        env-step rate leaves its time out."""
        self._played = (self._played[0] + seconds, self._played[1] + games)
        self._window.skip(seconds)

    @property
    def game_seconds(self) -> float | None:
        """Seconds an evaluation game has taken, over all played so far (None: none yet)."""
        return self._played[0] / self._played[1] if self._played[1] else None

    def _evaluations_left(self, env_steps: int) -> tuple[int, int]:
        """(periodic evaluations still to come up to `run.total_steps`, the last step's included; the games they
        and the final evaluation play)."""
        periodic = 0
        if self._eval_every and env_steps < self._total:
            periodic = self._total // self._eval_every - env_steps // self._eval_every + bool(self._total % self._eval_every)
        return periodic, periodic * self._eval_episodes + self._final_games

    def learning_rate(self, acting_rate: float) -> float:
        """Env steps/s once updates run, from the warm-up's rate (acting and env steps, without updates)."""
        if self._update_seconds is None:
            return acting_rate
        act, update = 1.0 / acting_rate, self._update_seconds / self._interval
        return 1.0 / (max(act, update) if self._overlapped else act + update)

    def seconds_left(self, env_steps: int) -> float | None:
        """Seconds to `run.total_steps` at the measured rate, the warm-up's followed by learning's, and the
        evaluation games to come once one was timed; None before a rate is measured."""
        return self._with_evaluations(env_steps, self._step_seconds_left(env_steps))

    def _with_evaluations(self, env_steps: int, step_seconds: float | None) -> float | None:
        """`step_seconds` and the evaluation games to come at the pace timed so far (none before one is)."""
        if step_seconds is None or self.game_seconds is None:
            return step_seconds
        return step_seconds + self._evaluations_left(env_steps)[1] * self.game_seconds

    def _step_seconds_left(self, env_steps: int) -> float | None:
        rate = self._window.rate()
        if self._learning and not rate and self._acting_rate:  # learning has just begun: the estimate still
            rate = self.learning_rate(self._acting_rate)
        if not rate:
            return None
        if self._learning:
            return max(0, self._total - env_steps) / rate
        return (self._learning_starts - env_steps) / rate + \
            max(0, self._total - self._learning_starts) / self.learning_rate(rate)

    def _warm_up_stands_in(self) -> bool:
        """Learning has begun before its own rate spans LINE_AFTER_SECONDS and the warm-up's was measured: a
        warm-up shorter than that ends before the line is due, so learning's rate is read from the warm-up's."""
        return bool(self._learning and self._acting_rate and self._window.span() < LINE_AFTER_SECONDS)

    def due_line(self, env_steps: int) -> bool:
        """Whether to say the line now: steps still to go, and either not yet said and the rate measured long
        enough or the warm-up over before it was (then said at once, from the warm-up's rate), or said before the
        evaluations were timed and they now are (said again, with them)."""
        if env_steps >= self._total:
            return False
        if self.line_said:
            return not self.evaluations_said and self.game_seconds is not None and bool(self._window.rate())
        return self._warm_up_stands_in() or (self._window.span() >= LINE_AFTER_SECONDS and bool(self._window.rate()))

    def _evaluation_clause(self, env_steps: int) -> str:
        """What the evaluations to come add: counted and timed, or counted only, before one has played."""
        periodic, games = self._evaluations_left(env_steps)
        if not games:
            return ""
        what = (f"{periodic} periodic evaluation{'s' if periodic != 1 else ''} of {self._eval_episodes} games and "
                if periodic else "") + f"the final evaluation's {self._final_games} games"
        if self.game_seconds is None:
            return f" (and {what}, not timed yet)"
        self.evaluations_said = True
        return f" (with {what}: {_duration(games * self.game_seconds)} at {self.game_seconds:.2g} s a game)"

    def _update_clause(self) -> str:
        """What learning's rate adds to acting's ("" where the run makes no updates)."""
        if self._update_seconds is None:
            return ""
        ms = f"{self._update_seconds * 1e3:.1f} ms"
        if self._interval >= 1:
            return f": one {ms} update per {self._interval:g} env steps"
        return f": {1 / self._interval:g} updates of {ms} per env step"

    def line(self, env_steps: int) -> str:
        """The expected length: the time left and what it is read from."""
        self.line_said = True
        steps_left = f"{max(0, self._total - env_steps):,} env steps"
        if self._warm_up_stands_in():
            rate = self.learning_rate(self._acting_rate)
            left = self._with_evaluations(env_steps, max(0, self._total - env_steps) / rate)
            return (f"time left: about {_duration(left)} for {steps_left} of "
                    f"learning at about {rate:,.0f}/s, from the warm-up's {self._acting_rate:,.0f}/s"
                    f"{self._update_clause()}{self._evaluation_clause(env_steps)}")
        rate, left, evaluations = self._window.rate(), self.seconds_left(env_steps), self._evaluation_clause(env_steps)
        if self._learning:
            return f"time left: about {_duration(left)} for {steps_left} at {rate:,.0f}/s{evaluations}"
        learning = ""
        if self._total > self._learning_starts:
            learning = (f", then {self._total - self._learning_starts:,} learning at about "
                        f"{self.learning_rate(rate):,.0f}/s{self._update_clause()}")
        return (f"time left: about {_duration(left)} for {steps_left}: "
                f"{self._learning_starts - env_steps:,} of warm-up at {rate:,.0f}/s{learning}{evaluations}")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class PaceHook(PeriodicHook):
    """Gives the run's `Pace` a reading about once a second and prints its expected-length line above the
    progress bar (on stdout with the other lines a run prints, also when quiet): once, and again once the
    evaluations are timed."""

    phase = "log"
    SECONDS = 1.0

    def __init__(self, pace: Pace):
        super().__init__(0)
        self._pace = pace
        self._last: float | None = None

    def due(self, before: int, after: int, final: bool) -> bool:
        return self._last is None or time.monotonic() - self._last >= self.SECONDS

    def __call__(self, env_steps: int) -> None:
        self._last = time.monotonic()
        self._pace.observe(self._last, env_steps)
        if self._pace.due_line(env_steps):
            tqdm.tqdm.write(self._pace.line(env_steps), file=sys.stdout)
            sys.stdout.flush()
