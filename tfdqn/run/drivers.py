"""The learner in its own thread, so gradient updates overlap env steps and acting.

TensorFlow releases the GIL while a graph runs, so the env and act calls of the main thread proceed
during an update. `RatioGate` keeps the replay ratio at 1 / training_interval: the learner waits when
it has done every update owed (`schedules.updates_due`), and the actors wait when it falls more than
`slack` updates behind. The batch for the next update is sampled while the actors step, and only
sampling and adding share the replay lock.

Determinism: which transitions a batch can draw depends on thread timing (within `slack` updates),
so async runs are not bit-reproducible; the ratio, the seeds of env, actor and replay, and every
update's inputs being real stored transitions still hold.
"""

from __future__ import annotations

import threading
import time

from tfdqn.run.cadence import updates_due
from tfdqn.telemetry.phase_timer import PhaseTimer


class RatioGate:
    """Shared counters with the waiting rules of both sides; `close()` releases everyone."""

    def __init__(self, learning_starts: int, training_interval: int, slack: int, env_steps: int, updates: int):
        self._cadence = (learning_starts, training_interval)
        self._slack = slack
        self.env_steps, self.updates = env_steps, updates
        self._cond = threading.Condition()
        self._closed = False
        self._busy = False

    def _owed(self) -> int:
        return updates_due(self.env_steps, *self._cadence) - self.updates

    def advance(self, env_steps: int, can_learn: bool) -> None:
        """Actors: publish the env step count, then wait while the learner is more than `slack` behind
        (unless it cannot learn yet: too few transitions to sample a batch)."""
        with self._cond:
            self.env_steps = env_steps
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._closed or not can_learn or self._owed() <= self._slack)

    def take(self, most: int) -> int:
        """Learner: wait for owed updates; returns how many to run now (0: closed)."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._owed() > 0)
            if self._closed:
                return 0
            self._busy = True
            return min(self._owed(), most)

    def done(self, count: int) -> None:
        with self._cond:
            self.updates += count
            self._busy = False
            self._cond.notify_all()

    def settle(self, can_learn: bool) -> None:
        """Actors: wait until every owed update is done and the learner is idle (before a checkpoint
        or the end of the run), so saved counters and weights agree."""
        with self._cond:
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._closed or ((not can_learn or self._owed() <= 0) and not self._busy))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class AsyncLearner:
    """Runs `update_many` on fused batches from `replay` in a daemon thread, behind a `RatioGate`."""

    def __init__(self, learner, replay, replay_lock: threading.Lock, gate: RatioGate, batch_size: int,
                 most_per_call: int):
        self._learner, self._replay, self._lock, self.gate = learner, replay, replay_lock, gate
        self._batch_size, self._most = batch_size, most_per_call
        self.timer = PhaseTimer()
        self.metrics = {}
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tfdqn-learner", daemon=True)

    def start(self) -> "AsyncLearner":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while k := self.gate.take(self._most):
                t = time.perf_counter()
                with self._lock:
                    ready = self._replay.can_sample(self._batch_size)
                    batches = self._replay.sample_stacked(k, self._batch_size) if ready else None
                if batches is None:  # too few transitions yet: the actors do not wait for it either
                    self.gate.done(0)
                    time.sleep(0.001)
                    continue
                t = self.timer.add("replay_sample", t)
                metrics = self._learner.update_many(*batches)
                metrics["td_loss"].numpy()
                self.timer.add("update", t)
                self.metrics = metrics
                self.gate.done(k)
        except BaseException as error:  # handed to the main thread, which raises it
            self.error = error
            self.gate.close()

    def check(self) -> None:
        """Re-raise a learner-thread failure in the caller's thread."""
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self.gate.close()
        self._thread.join()
