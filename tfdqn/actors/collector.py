"""The collector of actors that step their envs elsewhere: actor processes or Ray actors.

It plays the in-process collector's part in the loop (`collect`, `state`, `restore`, `close`), so the
loop, the update drivers and the hooks do not change: each `collect` hands over one vector step of one
actor's envs, from the chunk that actor sent, as `Transitions` of that actor's replay streams (the loop
advances the run's env step counter by their count). The learner's driver then runs the updates
owed, so the ratio of updates to env steps is the configured one whatever the actors' speed: the
learner waits for chunks when it is ahead, and an actor whose chunk the learner has not taken yet is
paused (the transport bounds the requests out). Weights go out every `actors.weight_sync_period` updates, with each actor's
next request, with the update count they were read at.

Lag: a chunk's weights are as old as the updates run on the chunks taken between its request and
its take, which is right after the same actor's previous chunk was taken. Over a run those gaps add
up to `count` chunks per chunk taken whatever the actors' relative speed (a fast actor's chunks wait
less, a slow one's more), so the mean policy lag is at most `weight_sync_period` updates plus one round's:
weight_sync_period + ceil(count * chunk_steps * envs_per_actor / env_steps_per_round)
* env_steps_per_round / training_interval while the actors keep the learner busy (less when it waits
for them). A single chunk keeps that bound only while the actors are equally fast.
Its epsilon clock starts where the run's env step counter will be when the learner takes it (the
counter now plus every step asked for before it), so each transition's epsilon is the one the
in-process collector would use. `metrics()` reports both lags' means over the chunks taken in a summary window.

An actor that dies is restarted once, with a new seed, its unfinished episodes cut as truncations, and what
it had in flight (its request out, a chunk it sent that the learner had not taken yet) dropped and counted as
lost, never added; Ray places the new actor where CPUs are free, any node but the one it died on where
another can take it, so on a cluster it comes back on a surviving node when its own died. A second death, or an
error in its own code, stops the run in one line. `report()` says per actor where each of its lives ran, the
env steps taken from it, the bytes its chunks brought and the chunks lost with it (summary.json's
`actors.per_actor`). A stop request (SIGINT, SIGTERM)
wins over deaths and errors: a group signal takes the actors down with the learner, which then stops
with its checkpoint instead of restarting them.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from tfdqn.actors.transport import ActorDied, ActorError
from tfdqn.envs.seeds import derive_seed
from tfdqn.replay.frame_codec import EncodedFrames, decode_frames
from tfdqn.run.collectors import CollectionStopped, CollectorFailure, CollectorState, Transitions

ACTOR_SEED = 5  # seed stream of the actors' envs and exploration RNGs
WAIT_SECONDS = 1.0  # how often a learner waiting for chunks looks at its stop request


class ActorFailure(CollectorFailure):
    """An actor failed in its own code, or died a second time; the message names it and how."""


class RemoteCollector:
    """Transitions from `actors` (a `ProcessActors` or `RayActors`), actor i writing replay streams
    i * envs_per_actor ... (i + 1) * envs_per_actor - 1."""

    def __init__(self, actors, config, spec, counters, network, cut_episodes: Callable, timer,
                 should_stop: Callable[[], bool] = lambda: False, settle: Callable[[], None] = lambda: None):
        """`settle` is called before each weight read: a background learner finishes its update first."""
        self._actors, self._counters, self._network, self._cut, self._timer = actors, counters, network, cut_episodes, timer
        self._should_stop, self._settle = should_stop, settle
        self._count, self._per_actor = config.actors.count, config.actors.envs_per_actor
        self._chunk_steps, self._period = config.actors.chunk_steps, config.actors.weight_sync_period
        self.num_envs = self._count * self._per_actor
        self._seed, self._resume_seed = config.run.seed, 0
        self._frames = np.zeros((self.num_envs, *spec.frame_shape), spec.frame_dtype)  # each stream's next frame
        self._taken = [None] * self._count  # each actor's last (chunk, step) taken since its next frames were set
        self._restarts = [0] * self._count
        self._lost = [0] * self._count  # chunks dropped with a dead actor
        self._env_steps = [0] * self._count  # env steps taken from each actor
        self._bytes = [0] * self._count  # payload bytes of the chunks each actor sent
        self._past_lives: list[list[dict]] = [[] for _ in range(self._count)]  # dead lives' whereabouts
        self._version, self._published, self._published_updates = None, None, 0  # updates // period, handle, updates
        self._sent = [None] * self._count  # the weight version each actor has
        self._asked = [0] * self._count  # each actor's requests not answered yet
        self._lags: list[tuple[int, int]] = []  # (policy lag in updates, epsilon lag in env steps) per chunk taken
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
            self._sent[index], self._asked[index] = None, 0
        for _ in range(self._actors.in_flight):  # in the order the chunks will come back
            for index in indices:
                self._request(index)

    def _request(self, index: int) -> None:
        """Ask actor `index` for a chunk, with the newest weights where it lacks them."""
        updates = int(self._counters.updates.numpy())
        if updates // self._period != self._version:
            self._settle()
            updates = int(self._counters.updates.numpy())
            self._published = self._actors.publish(self._network.get_weights())
            self._version, self._published_updates = updates // self._period, updates
        weights = self._published if self._sent[index] != self._version else None
        self._sent[index] = self._version
        self._actors.request(index, weights, self._published_updates, self._clock_at_take())
        self._asked[index] += 1

    def _clock_at_take(self) -> int:
        """The run's env step when the learner will take the chunk asked for now: after the rest of the
        chunk it holds and every chunk asked for before (they come back in about the order asked)."""
        held = self._chunk.steps - self._t if self._chunk is not None else 0
        ahead = held + sum(self._asked) * self._chunk_steps
        return int(self._counters.env_steps.numpy()) + ahead * self._per_actor

    def collect(self) -> Transitions:
        if self._chunk is None or self._t == self._chunk.steps:
            started = time.perf_counter()
            if not self._started:
                self._start(list(range(self._count)))
                self._started = True
            self._receive()
            self._timer.add("wait", started)
        chunk, t = self._chunk, self._t
        self._t += 1
        self._env_steps[chunk.actor] += self._per_actor
        streams = self._streams(chunk.actor)
        self._taken[chunk.actor] = chunk, t
        final_frame = _final_frames(chunk, t)
        games = [(int(streams[m]), ret, length) for step, m, ret, length in chunk.games if step == t]
        return Transitions(chunk.frame[t], chunk.action[t], chunk.reward[t], chunk.terminated[t], chunk.truncated[t],
                           final_frame, games, streams)

    def _receive(self) -> None:
        """Take the next chunk any actor sent; the sender is asked for its next one at once. A stop
        request ends the wait (stuck actors must not keep a SIGINT or SIGTERM from checkpointing), and
        wins over an actor's death or error (a group signal kills the actors with the learner)."""
        while True:
            while not self._ready:
                self._ready.extend(self._actors.wait(timeout=WAIT_SECONDS))
                if not self._ready and self._should_stop():
                    raise CollectionStopped()
            index, result = self._ready.pop(0)
            self._asked[index] -= 1
            if isinstance(result, (ActorError, ActorDied)) and self._should_stop():
                raise CollectionStopped()
            if isinstance(result, ActorError):
                raise ActorFailure(f"actor {index} ({self._pid(index)}) failed: {result.message}")
            if isinstance(result, ActorDied):
                self._replace(index, result.how)
                continue
            self._bytes[index] += result.payload_bytes
            self._chunk, self._t = result, 0
            self._record_lag(result)
            self._request(index)
            return

    def _record_lag(self, chunk) -> None:
        env_steps, updates = self._counters.read()
        self._lags.append((updates - chunk.weights_updates, env_steps - chunk.start_env_steps))

    def metrics(self) -> dict:
        """The mean lags of the chunks taken since the last call, as TensorBoard tags ({} if none):
        how many updates old their weights were, and how many env steps behind their epsilon clock.
        The mean, which the round sets (the module docstring), not the median of a few chunks, which
        jumps by a chunk where one actor runs faster than another."""
        if not self._lags:
            return {}
        policy_lag, epsilon_lag = np.mean(np.array(self._lags, np.float64), axis=0)
        self._lags.clear()
        return {"perf/policy_lag_updates": float(policy_lag), "perf/epsilon_lag_steps": float(epsilon_lag)}

    def _next_frames(self, index: int) -> np.ndarray:
        """Actor `index`'s streams' next frames: after the last step taken from it (decoded where the actor
        compressed them, only now that they are needed), else as they were set."""
        streams = self._streams(index)
        if self._taken[index] is not None:
            chunk, t = self._taken[index]
            frames = _frames_after(chunk, t)
            self._frames[streams] = decode_frames(frames, self._frames.shape[1:], self._frames.dtype) \
                if isinstance(frames, EncodedFrames) else frames
            self._taken[index] = None
        return self._frames[streams]

    def _replace(self, index: int, how: str) -> None:
        """Restart a dead actor once, its streams' unfinished episodes cut as truncations and what it had in
        flight dropped: the request that found it dead, any other still out, and chunks not taken yet."""
        pid = self._pid(index)
        self._past_lives[index].append(self._actors.whereabouts(index))
        self._actors.stop(index)
        unread = [result for i, result in self._ready if i == index]
        self._lost[index] += 1 + self._asked[index] + sum(not isinstance(r, (ActorError, ActorDied)) for r in unread)
        if self._restarts[index]:
            raise ActorFailure(f"actor {index} ({pid}) {how} after its one restart")
        streams = self._streams(index)
        self._cut(self._next_frames(index), streams)
        self._ready = [(i, result) for i, result in self._ready if i != index]  # from the dead process
        self._restarts[index] += 1
        print(f"actor {index} ({pid}) {how}; restarting it with seed {self._actor_seed(index)}, its "
              f"unfinished episodes cut as truncations", flush=True)
        self._start([index])

    def _pid(self, index: int) -> str:
        """`pid 4242`, or `pid unknown` for a Ray actor that died before it ever answered."""
        pid = self._actors.whereabouts(index).get("pid")
        return f"pid {pid}" if pid is not None else "pid unknown"

    @property
    def lost_chunks(self) -> int:
        return sum(self._lost)

    def report(self) -> list[dict]:
        """Per actor: where each of its lives ran (pid, and the Ray node id on Ray), the env steps the learner
        took from it, the payload bytes of the chunks it sent, the chunks lost with it and its restarts."""
        lives = [self._past_lives[index] + ([self._actors.whereabouts(index)] if self._started else [])
                 for index in range(self._count)]
        return [{"actor": index, "lives": lives[index], "env_steps": self._env_steps[index],
                 "bytes_sent": self._bytes[index], "lost_chunks": self._lost[index], "restarts": self._restarts[index]}
                for index in range(self._count)]

    def state(self) -> CollectorState:
        """The streams' next frames: actors' envs live elsewhere, so a resumed run starts new games."""
        return CollectorState(np.concatenate([self._next_frames(index) for index in range(self._count)]), None, None)

    def restore(self, state: CollectorState, replay, seed: int) -> None:
        """Continue from a checkpoint: the replay's unfinished episodes cut as truncations, and actors
        (not started yet) seeded from `seed`; they get the checkpoint's weights with their first request."""
        replay.cut_episodes(state.frames)
        self._frames[...] = state.frames
        self._taken = [None] * self._count
        self._resume_seed = seed

    def close(self) -> None:
        self._actors.close()


def _frames_after(chunk, t: int):
    """The frames of the chunk's actor's envs after step `t`: the next step's, or the chunk's last ones."""
    return chunk.frame[t + 1] if t + 1 < chunk.steps else chunk.next_frame


def _final_frames(chunk, t: int):
    """Step `t`'s final frames, one per env of the chunk's actor; the replay reads only the rows of episodes
    that ended there (the others are the next frames, or empty codes)."""
    here = chunk.ended[:, 0] == t
    rows = chunk.ended[here, 1]
    if isinstance(chunk.frame, EncodedFrames):
        codes = np.full(chunk.frame.shape[1], b"", dtype=object)
        codes[rows] = chunk.final_frame.codes[here]
        return EncodedFrames(chunk.frame.codec, codes)
    next_frame = _frames_after(chunk, t)
    if not here.any():
        return next_frame
    final_frame = next_frame.copy()
    final_frame[rows] = chunk.final_frame[here]
    return final_frame
