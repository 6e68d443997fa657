"""Update drivers: when gradient updates run. The loop calls the same three methods whatever the mode.

A driver combines two choices, each a small class:
- where the k batches of a fused call come from (`HostReplayUpdates`: the NumPy ring samples them and
  they are copied in; `PrefetchedHostReplayUpdates`: the same, assembled while the previous update runs;
  `DeviceReplayUpdates`: the update graph samples its own from tf.Variables);
- when the updates run (`InlineDriver`: in the loop's thread right after each collect;
  `BackgroundDriver`: in a learner thread behind a `RatioGate`, while the envs step).
So async + device replay samples inside the graph as inline device replay does: no frame goes
through the host.

The ratio of updates to env steps is 1 / training_interval in every mode, in rounds every
`run.env_steps_per_round` env steps (`cadence.updates_due`).
The background thread's batches depend on thread timing (within one vector step of updates), so
async runs are not bit-reproducible; the synchronous modes are.
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
import time

import numpy as np
import tensorflow as tf

from tfdqn.agent.counters import Counters
from tfdqn.replay.graph_samplers import importance_exponent
from tfdqn.replay.ring import Batch
from tfdqn.run.cadence import updates_due
from tfdqn.telemetry.phase_timer import PhaseTimer

MAX_FUSED_UPDATES = 64  # updates per fused call: bounds the k-batch copy when many updates fall due at once


class HostReplayUpdates:
    """k updates on k batches that the host ring samples together and `update_many` takes in one call;
    with prioritized replay the priorities the k updates return are written back after the call (so
    updates 2..k of a call drew with the priorities from before it: exact at one update per call, which
    the device ring's in-graph tree keeps at any k)."""

    def __init__(self, learner, replay, batch_size: int, beta, replay_lock: threading.Lock):
        self._learner, self._replay, self._batch_size = learner, replay, batch_size
        self._beta, self._lock = beta, replay_lock

    def ready(self) -> bool:
        return self._replay.can_sample(self._batch_size)

    def prepare(self, k: int):
        """Called under the replay lock: everything that reads the replay's host arrays."""
        indices = self._replay.sample_indices(self._batch_size, draws=k * self._batch_size)
        beta = float(self._beta()) if self._replay.sampler.prioritized else 1.0
        return self._replay.stack(indices, k, beta), indices, self._replay.drawn(indices)

    def run(self, prepared) -> dict:
        batches, indices, drawn = prepared
        if self._replay.audit is not None:
            self._replay.audit.check(indices, drawn, *batches[:5])
        metrics = self._learner.update_many(*batches)
        if self._replay.sampler.prioritized:
            with self._lock:
                self._replay.update_priorities(indices, metrics["priority"].numpy().reshape(-1), drawn)
        return metrics

    def pending(self) -> None:
        """Nothing is drawn ahead: a checkpoint needs no batch."""

    def close(self) -> None:
        """Nothing to stop."""


class PrefetchedHostReplayUpdates(HostReplayUpdates):
    """`HostReplayUpdates` that draws the next call's batches as this call's go to the update and assembles
    them (frames decoded, stacks and n-step sums built) in a second thread while the update runs
    (`replay.prefetch`), so an update waits for its batch only when assembling takes longer than updating.

    A call's batches are drawn one call early: from the replay as it was then, before the previous call's
    priorities were written, with beta and importance weights of then (read with the draw, so the second
    thread's timing never decides them). Such runs differ from unprefetched ones and repeat themselves:
    `run` returns only once the next batches are assembled, before any step is added, and a checkpoint
    holds them (`pending`), so a resumed run trains on the batches the uninterrupted one did. Where steps
    are added between the draw and the assembly (an async learner's actor thread), each drawn slot rewritten or
    evicted meanwhile is drawn again as the batch is assembled (`ReplayRing.redraw_changed`), so no batch mixes
    a slot's old transition with its new frames."""

    def __init__(self, learner, replay, batch_size: int, beta, replay_lock: threading.Lock):
        super().__init__(learner, replay, batch_size, beta, replay_lock)
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tfdqn-prefetch")
        self._next = None  # the next call's prepared batches, if drawn

    def prepare(self, k: int):
        prefetched, self._next = self._next, None
        if prefetched is not None and len(prefetched[1]) == k * self._batch_size:
            return prefetched
        return super().prepare(k)  # the first call, or another k than the last (a catch-up round)

    def run(self, prepared) -> dict:
        k = len(prepared[1]) // self._batch_size
        with self._lock:
            indices = self._replay.sample_indices(self._batch_size, draws=k * self._batch_size)
            beta = float(self._beta()) if self._replay.sampler.prioritized else 1.0
            drawn = self._replay.drawn(indices)
            weight = self._replay.sampler.weights(indices.reshape(k, -1), beta)
        assembled = self._pool.submit(self._assemble, indices, drawn, weight, k, beta)
        try:
            return super().run(prepared)
        finally:
            self._next = assembled.result()

    def _assemble(self, indices, drawn, weight, k: int, beta: float) -> tuple:
        with self._lock:
            redrawn = self._replay.redraw_changed(indices.copy(), drawn)
            if not np.array_equal(redrawn, indices):  # weights of the slots drawn anew, as they are now
                weight = self._replay.sampler.weights(redrawn.reshape(k, -1), beta)
            return self._replay.stack(redrawn, k, weight=weight), redrawn, self._replay.drawn(redrawn)

    def pending(self) -> dict | None:
        """The next call's batches, drawn and assembled, as arrays for a checkpoint (None: none drawn)."""
        if self._next is None:
            return None
        batch, indices, drawn = self._next
        return {**{f"batch_{name}": np.asarray(value) for name, value in batch._asdict().items()},
                "indices": indices, "drawn": drawn}

    def restore_pending(self, arrays: dict) -> None:
        """Take back the batches a checkpoint's `pending` held: the first call after a resume trains on them."""
        fields = {name[len("batch_"):]: value for name, value in arrays.items() if name.startswith("batch_")}
        self._next = (Batch(**fields), arrays["indices"], arrays["drawn"])

    def close(self) -> None:
        self._pool.shutdown()


class DeviceReplayUpdates:
    """k updates whose batches the update graph draws from the device ring (`replay.device: accelerator`),
    writing the priorities of a prioritized sampler in the same graph."""

    def __init__(self, learner, replay, batch_size: int, beta, replay_lock: threading.Lock):
        self._replay, self._batch_size = replay, batch_size
        sampler = replay.sampler
        sample = lambda: replay.sample_in_graph(batch_size, beta())  # noqa: E731
        self._update = learner.make_replay_update(sample if replay.audit is None else replay.audited_sample(sample),
                                                  batch_size, sampler.write_in_graph if sampler.prioritized else None)

    def ready(self) -> bool:
        return self._replay.can_sample(self._batch_size)

    def prepare(self, k: int):
        """Called under the replay lock: the steps added since the last call reach the variables."""
        self._replay.flush()
        return k

    def run(self, k: int) -> dict:
        try:
            return self._update(tf.constant(k, tf.int32))
        except tf.errors.OpError:
            if self._replay.audit is not None and self._replay.audit.failure is not None:
                raise self._replay.audit.failure from None  # raised in the graph's audit, which TensorFlow wraps
            raise

    def pending(self) -> None:
        """The graph draws each call's batches when it runs: nothing is drawn ahead."""

    def close(self) -> None:
        """Nothing to stop."""


class WarmupNoise:
    """Held acting noise (`network.noise_refresh: update`) redrawn during the warm-up where an update would
    fall (every `training_interval` env steps), as each update redraws it after: without it every warm-up act
    would read the one draw made at the start, a single fixed policy filling the replay (noisy nets act with
    epsilon 0). Kaixhin/Rainbow redraws on the same cadence from step 0. Counted from the env step counter,
    so a resumed run redraws where the uninterrupted one did."""

    def __init__(self, learner, counters: Counters, cadence: tuple[int, int, int]):
        self._learner, self._counters, self._cadence = learner, counters, cadence
        self._drawn, self._last = self._due(), updates_due(cadence[0], 0, *cadence[1:])

    def _due(self) -> int:
        learning_starts, interval, per_round = self._cadence
        return updates_due(min(int(self._counters.env_steps.numpy()), learning_starts), 0, interval, per_round)

    def after_collect(self) -> None:
        if self._drawn >= self._last:  # learning started: each update redraws it
            return
        due = self._due()
        if due > self._drawn:
            self._drawn = due
            self._learner.redraw_acting_noise()


def _owed(counters: Counters, cadence: tuple[int, int, int]) -> int:
    env_steps, updates = counters.read()
    return updates_due(env_steps, *cadence) - updates


class InlineDriver:
    """Runs every update owed right after each collect, in the loop's thread, up to 64 per fused call."""

    def __init__(self, source, counters: Counters, cadence: tuple[int, int, int], timer: PhaseTimer,
                 warmup_noise: WarmupNoise | None = None):
        self._source, self._counters, self._cadence, self._timer = source, counters, cadence, timer
        self._warmup_noise = warmup_noise
        self.metrics: dict = {}
        self.timers = ()  # its phases are charged to the loop's timer

    def after_collect(self) -> None:
        if self._warmup_noise is not None:
            self._warmup_noise.after_collect()
        due = _owed(self._counters, self._cadence)
        while due > 0 and self._source.ready():
            k = min(due, MAX_FUSED_UPDATES)
            t = time.perf_counter()
            prepared = self._source.prepare(k)
            t = self._timer.add("replay_sample", t)
            self.metrics = self._source.run(prepared)
            self.metrics["td_loss"].numpy()  # wait for the device: the update's time is charged to it
            self._timer.add("update", t)
            due -= k

    def settle(self) -> None:
        """No update is ever running between calls."""

    def pending(self) -> dict | None:
        """The batches drawn ahead for the next call (prefetch), which a checkpoint keeps."""
        return self._source.pending()

    def close(self) -> None:
        self._source.close()


class RatioGate:
    """The waiting rules of both sides of a background learner, over the run's counters.

    The learner waits while it owes nothing; the actors wait while it owes more than `slack` updates
    (unless it cannot learn yet: too few transitions for a batch). `close()` releases everyone."""

    def __init__(self, counters: Counters, cadence: tuple[int, int, int], slack: int):
        self._counters, self._cadence, self._slack = counters, cadence, slack
        self._cond = threading.Condition()
        self._closed = False
        self._busy = False

    def owed(self) -> int:
        return _owed(self._counters, self._cadence)

    def advance(self, can_learn: bool) -> None:
        """Actors: the env step counter moved; wait while the learner is more than `slack` behind."""
        with self._cond:
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._closed or not can_learn or self.owed() <= self._slack)

    def take(self, most: int) -> int:
        """Learner: wait for owed updates; returns how many to run now (0: closed)."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self.owed() > 0)
            if self._closed:
                return 0
            self._busy = True
            return min(self.owed(), most)

    def done(self) -> None:
        """Learner: the updates taken have run (the counter moved in their graph)."""
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def settle(self, can_learn: bool) -> None:
        """Actors: wait until nothing is owed and the learner is idle, so saved counters and weights agree."""
        with self._cond:
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._closed or ((not can_learn or self.owed() <= 0) and not self._busy))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class BackgroundDriver:
    """Runs the updates in a learner thread while the loop's thread acts and steps the envs.

    TensorFlow releases the GIL while a graph runs, so updates overlap env steps. Only sampling and
    adding share the replay lock. A learner failure is raised in the loop's thread at its next call."""

    def __init__(self, source, counters: Counters, cadence: tuple[int, int, int], slack: int,
                 replay_lock: threading.Lock, timer: PhaseTimer, warmup_noise: WarmupNoise | None = None):
        self._source, self._lock, self._timer = source, replay_lock, timer
        self._warmup_noise = warmup_noise
        self.gate = RatioGate(counters, cadence, slack)
        self.metrics: dict = {}
        self.timers = (PhaseTimer(),)  # the learner thread's own phases
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._learn, name="tfdqn-learner", daemon=True)
        self._thread.start()

    def _learn(self) -> None:
        timer = self.timers[0]
        try:
            while k := self.gate.take(MAX_FUSED_UPDATES):
                t = time.perf_counter()
                with self._lock:
                    prepared = self._source.prepare(k) if self._source.ready() else None
                if prepared is None:  # too few transitions yet: the actors do not wait for it either
                    self.gate.done()
                    time.sleep(0.001)
                    continue
                t = timer.add("replay_sample", t)
                metrics = self._source.run(prepared)
                metrics["td_loss"].numpy()
                timer.add("update", t)
                self.metrics = metrics
                self.gate.done()
        except BaseException as error:  # handed to the loop's thread, which raises it
            self._error = error
            self.gate.close()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def after_collect(self) -> None:
        if self._warmup_noise is not None:  # before the learner thread's first update: nothing else draws it
            self._warmup_noise.after_collect()
        t = time.perf_counter()
        self.gate.advance(self._source.ready())
        self._check()
        self._timer.add("wait", t)

    def settle(self) -> None:
        self.gate.settle(self._source.ready())
        self._check()

    def pending(self) -> None:
        """Async runs do not repeat themselves (their batches follow thread timing), so a resumed one draws its
        next batches anew rather than keep any drawn ahead."""

    def close(self) -> None:
        self.gate.close()
        self._thread.join()
        self._source.close()


def make_driver(config, agent, replay, replay_lock: threading.Lock, timer: PhaseTimer, num_envs: int,
                pending: dict | None = None):
    """The driver the config asks for: `replay.device` picks the batch source, `run.async_learner` the thread;
    `pending`: the batches a restored checkpoint held drawn ahead (an inline driver's prefetch)."""
    run, r = config.run, config.replay
    source_type = (DeviceReplayUpdates if r.device == "accelerator"
                   else PrefetchedHostReplayUpdates if r.prefetch else HostReplayUpdates)
    beta = lambda: importance_exponent(agent.counters.env_steps, r.importance_exponent,  # noqa: E731
                                       r.importance_exponent_end, run.total_steps)
    source = source_type(agent.learner, replay, r.batch_size, beta, replay_lock)
    cadence = (run.learning_starts, run.training_interval, run.env_steps_per_round)
    warmup_noise = WarmupNoise(agent.learner, agent.counters, cadence) if agent.learner.holds_acting_noise else None
    if not run.async_learner:
        if pending is not None and isinstance(source, PrefetchedHostReplayUpdates):
            source.restore_pending(pending)
        return InlineDriver(source, agent.counters, cadence, timer, warmup_noise)
    # One vector step's updates, or one round's, may be pending.
    slack = max(1, math.ceil(max(num_envs, run.env_steps_per_round) / run.training_interval))
    return BackgroundDriver(source, agent.counters, cadence, slack, replay_lock, timer, warmup_noise)
