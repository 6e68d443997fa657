"""The collector of actors that step their envs elsewhere: actor processes or Ray actors.

It plays the in-process collector's part in the loop (`collect`, `state`, `restore`, `close`), so the
loop, the update drivers and the hooks do not change: each `collect` hands over one vector step of one
actor's envs, from the chunk that actor sent, as `Transitions` of that actor's replay streams (the loop
advances the run's env step counter by their count). The learner's driver then runs the updates
owed, so the ratio of updates to env steps is the configured one whatever the actors' speed: the learner waits for chunks
when it is ahead, and an actor whose chunk the learner has not taken yet is paused (the transport
bounds the requests out). Weights go out every `actors.weight_sync_period` updates, with each actor's
next request. An actor that dies is restarted once, with a new seed, its unfinished episodes cut as
truncations; a second death, or an error in its own code, stops the run in one line.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from tfdqn.actors.transport import ActorDied, ActorError
from tfdqn.envs.seeds import derive_seed
from tfdqn.run.collectors import CollectionStopped, CollectorFailure, CollectorState, Transitions

ACTOR_SEED = 5  # seed stream of the actors' envs and exploration RNGs
WAIT_SECONDS = 1.0  # how often a learner waiting for chunks looks at its stop request


class ActorFailure(CollectorFailure):
    """An actor failed in its own code, or died a second time; the message names it and how."""


class RemoteCollector:
    """Transitions from `actors` (a `ProcessActors` or `RayActors`), actor i writing replay streams
    i * envs_per_actor ... (i + 1) * envs_per_actor - 1."""

    def __init__(self, actors, config, spec, counters, network, cut_episodes: Callable, timer,
                 should_stop: Callable[[], bool] = lambda: False):
        self._actors, self._counters, self._network, self._cut, self._timer = actors, counters, network, cut_episodes, timer
        self._should_stop = should_stop
        self._count, self._per_actor = config.actors.count, config.actors.envs_per_actor
        self._period = config.actors.weight_sync_period
        self.num_envs = self._count * self._per_actor
        self._seed, self._resume_seed = config.run.seed, 0
        self._frames = np.zeros((self.num_envs, *spec.frame_shape), spec.frame_dtype)  # each stream's next frame
        self._restarts = [0] * self._count
        self._version, self._published = None, None  # weight version (updates // period) and its handle
        self._sent = [None] * self._count  # the weight version each actor has
        self._chunk, self._t = None, 0
        self._ready: list = []
        self._started = False

    @property
    def restarts(self) -> int:
        return sum(self._restarts)

    def _streams(self, index: int) -> np.ndarray:
        """The replay streams of actor `index`'s envs."""
        return index * self._per_actor + np.arange(self._per_actor)

    def _actor_seed(self, index: int) -> int:
        return derive_seed(self._seed, ACTOR_SEED, index, self._restarts[index], self._resume_seed, bits=31)

    def _start(self, indices: list[int]) -> None:
        """Start the actors, all before the first request: a request waits for its actor to be ready
        (TensorFlow's import), and they start in parallel."""
        for index in indices:
            self._actors.start(index, self._actor_seed(index))
            self._sent[index] = None
        for index in indices:
            for _ in range(self._actors.in_flight):
                self._request(index)

    def _request(self, index: int) -> None:
        """Ask actor `index` for a chunk, with the newest weights where it lacks them."""
        version = int(self._counters.updates.numpy()) // self._period
        if version != self._version:
            self._published, self._version = self._actors.publish(self._network.get_weights()), version
        weights = self._published if self._sent[index] != version else None
        self._sent[index] = version
        self._actors.request(index, weights, int(self._counters.env_steps.numpy()))

    def collect(self) -> Transitions:
        if self._chunk is None or self._t == self._chunk.steps:
            started = time.perf_counter()
            if not self._started:
                self._start(list(range(self._count)))
                self._started = True
            self._chunk, self._t = self._receive(), 0
            self._timer.add("wait", started)
        chunk, t = self._chunk, self._t
        self._t += 1
        streams = self._streams(chunk.actor)
        next_frame = chunk.frame[t + 1] if t + 1 < chunk.steps else chunk.next_frame
        self._frames[streams] = next_frame
        final_frame = next_frame  # the replay reads it only where an episode ended
        here = chunk.ended[:, 0] == t
        if here.any():
            final_frame = next_frame.copy()
            final_frame[chunk.ended[here, 1]] = chunk.final_frame[here]
        games = [(int(streams[m]), ret, length) for step, m, ret, length in chunk.games if step == t]
        return Transitions(chunk.frame[t], chunk.action[t], chunk.reward[t], chunk.terminated[t], chunk.truncated[t],
                           final_frame, games, streams)

    def _receive(self):
        """The next chunk any actor sent; the sender is asked for its next one at once. A stop request
        ends the wait (stuck actors must not keep a SIGINT or SIGTERM from checkpointing)."""
        while True:
            while not self._ready:
                self._ready.extend(self._actors.wait(timeout=WAIT_SECONDS))
                if not self._ready and self._should_stop():
                    raise CollectionStopped()
            index, result = self._ready.pop(0)
            if isinstance(result, ActorError):
                raise ActorFailure(f"actor {index} ({self._pid(index)}) failed: {result.message}")
            if isinstance(result, ActorDied):
                self._replace(index, result.how)
                continue
            self._request(index)
            return result

    def _replace(self, index: int, how: str) -> None:
        """Restart a dead actor once, its streams' unfinished episodes cut as truncations."""
        pid = self._pid(index)
        self._actors.stop(index)
        if self._restarts[index]:
            raise ActorFailure(f"actor {index} ({pid}) {how} after its one restart")
        streams = self._streams(index)
        self._cut(self._frames[streams], streams)
        self._ready = [(i, result) for i, result in self._ready if i != index]  # from the dead process
        self._restarts[index] += 1
        print(f"actor {index} ({pid}) {how}; restarting it with seed {self._actor_seed(index)}, its "
              f"unfinished episodes cut as truncations", flush=True)
        self._start([index])

    def _pid(self, index: int) -> str:
        """`pid 4242`, or `pid unknown` for a Ray actor that died before it ever answered."""
        pid = self._actors.pid(index)
        return f"pid {pid}" if pid is not None else "pid unknown"

    def state(self) -> CollectorState:
        """The streams' next frames: actors' envs live elsewhere, so a resumed run starts new games."""
        return CollectorState(self._frames.copy(), None, None)

    def restore(self, state: CollectorState, replay, seed: int) -> None:
        """Continue from a checkpoint: the replay's unfinished episodes cut as truncations, and actors
        (not started yet) seeded from `seed`; they get the checkpoint's weights with their first request."""
        replay.cut_episodes(state.frames)
        self._frames[...] = state.frames
        self._resume_seed = seed

    def close(self) -> None:
        self._actors.close()
