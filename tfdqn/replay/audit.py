"""`replay.audit`: every transition the replay is given, kept apart from it, and every batch an update trains on
checked against what was given.

The ring rebuilds transitions from slots it links, evicts and rewrites while other threads draw from it, which
is where a replay goes wrong without a crash: a batch made of a rewritten slot, an n-step sum that runs past
an episode's end, a stack that borrows another episode's frame. The audit keeps its own record of each write
(its stream and index in that stream, a checksum of its frame, action, reward and flags), and for each
transition of a batch recomputes from those records alone, in NumPy, what the batch must hold: the
observation's stack with its zero padding, the action, the n-step return and bootstrap, the next
observation. The first difference stops the run in one line naming the slot. It costs a Python loop per
sampled transition: a switch for tests and short runs, off by default.
"""

from __future__ import annotations

import collections
import math
import threading
import zlib

import numpy as np

from tfdqn.errors import RunFailure
from tfdqn.replay.frame_codec import EncodedFrames, decode_frames

_FIELDS = ("stream", "seq", "checksum", "action", "reward", "terminated", "final_only", "episode_step")


class ReplayAuditFailure(RunFailure):
    """A batch holds something the replay was never given."""


def _checksum(frame: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(frame).tobytes())


def _close(value: float, expected: float, rtol: float, atol: float) -> bool:
    """`np.isclose(value, expected, rtol, atol)` for two Python floats: its test without its array machinery,
    which cost most of an audited run's checking (two calls per transition drawn)."""
    return value == expected or (math.isfinite(expected) and abs(value - expected) <= atol + rtol * abs(expected))


class ReplayAudit:
    """The shadow of a ring's writes, by (stream, index in that stream), and the check of batches against it.

    It keeps the newest `keep` writes (twice the ring's capacity: every transition the ring holds, and those
    a batch drawn before their eviction may still carry)."""

    def __init__(self, frame_shape: tuple, frame_dtype, stack_size: int, n_step: int, gamma: float,
                 clip_rewards: bool, keep: int):
        self._frame_shape, self._frame_dtype = tuple(frame_shape), np.dtype(frame_dtype)
        self._stack_size, self._n_step, self._gamma, self._clip = stack_size, n_step, gamma, clip_rewards
        self._keep = keep
        self._zero = _checksum(np.zeros(self._frame_shape, self._frame_dtype))
        self._records: dict[tuple[int, int], tuple] = {}
        self._writes: dict[int, int] = {}  # stream -> its writes so far: the next one's index
        self._episode_steps: dict[int, int] = {}  # stream -> its next write's step within its episode
        self._order: collections.deque = collections.deque()
        self._lock = threading.Lock()  # writes come from the loop's thread, checks from a learner's
        self.checked = 0  # transitions checked so far
        self.failure: ReplayAuditFailure | None = None  # the first failure, kept where a graph swallowed it

    def written(self, streams, frames, action, reward, terminated, final_only: bool) -> None:
        """The ring wrote one slot per stream of `streams`: what it was given, as given. Each stream's writes are
        numbered, and its episodes' steps counted, here on their own (an episode ends at its final frame)."""
        if isinstance(frames, EncodedFrames):
            frames = decode_frames(frames, self._frame_shape, self._frame_dtype)
        count = len(streams)
        frames = np.broadcast_to(np.asarray(frames, self._frame_dtype), (count, *self._frame_shape))
        action, reward, terminated = (np.broadcast_to(np.asarray(value), (count,))
                                      for value in (action, reward, terminated))
        sums = [_checksum(frame) for frame in frames]
        with self._lock:
            for i in range(count):
                stream = int(streams[i])
                seq, episode_step = self._writes.get(stream, 0), self._episode_steps.get(stream, 0)
                self._records[(stream, seq)] = (sums[i], int(action[i]), float(reward[i]),
                                                bool(terminated[i]), bool(final_only), episode_step)
                self._order.append((stream, seq))
                self._writes[stream] = seq + 1
                self._episode_steps[stream] = 0 if final_only else episode_step + 1
            while len(self._order) > self._keep:
                self._records.pop(self._order.popleft(), None)

    def check(self, slots, drawn, observation, action, reward, bootstrap, next_observation) -> None:
        """Each transition of a batch (any leading axes: k batches of B) against the records: the slot's
        (stream, index) as the batch was `drawn` ([2, N]) names the transition it claims to be."""
        slots = np.asarray(slots).reshape(-1)
        drawn = np.asarray(drawn).reshape(2, -1)
        frames = np.asarray(observation).reshape(len(slots), self._stack_size, *self._frame_shape)
        next_frames = np.asarray(next_observation).reshape(len(slots), self._stack_size, *self._frame_shape)
        action, reward, bootstrap = (np.asarray(x).reshape(-1) for x in (action, reward, bootstrap))
        # the frames' checksums before the lock: the loop's thread goes on adding meanwhile
        sums = [[_checksum(frame) for frame in stack] for stack in frames]
        next_sums = [[_checksum(frame) for frame in stack] for stack in next_frames]
        with self._lock:
            for i, slot in enumerate(slots):
                problem = self._problem(int(drawn[0, i]), int(drawn[1, i]), sums[i], int(action[i]),
                                        float(reward[i]), float(bootstrap[i]), next_sums[i])
                if problem:
                    self.failure = ReplayAuditFailure(
                        f"replay audit: slot {slot} (stream {drawn[0, i]}, its write {drawn[1, i]}) in a batch an "
                        f"update was to train on: {problem}")
                    raise self.failure
            self.checked += len(slots)

    def _problem(self, stream: int, seq: int, sums: list[int], action: int, reward: float, bootstrap: float,
                 next_sums: list[int]) -> str | None:
        """What the batch's transition gets wrong against the records, or None."""
        first = self._records.get((stream, seq))
        if first is None or first[4]:
            return "no transition was written there" if first is None else "it holds only an episode's final frame"
        if action != first[1]:
            return f"action {action}, but {first[1]} was written"
        wrong = self._stack_problem(stream, seq, first[5], sums)
        if wrong:
            return f"observation: {wrong}"
        total, steps, last = 0.0, 0, first
        for j in range(self._n_step):
            record = self._records.get((stream, seq + j))
            if record is None:
                return f"step {j} of its {self._n_step}-step return was never written (not yet, or forgotten)"
            if record[4]:  # the episode's final frame: its return ends here
                break
            total += self._gamma ** j * (float(np.sign(record[2])) if self._clip else record[2])
            steps, last = j + 1, record
        expected_bootstrap = 0.0 if last[3] else self._gamma ** (steps - 1)
        if not _close(reward, total, rtol=1e-5, atol=1e-5):
            return f"{steps}-step return {reward:.6g}, but the rewards written give {total:.6g}"
        if not _close(bootstrap, expected_bootstrap, rtol=1e-5, atol=1e-7):
            return f"bootstrap {bootstrap:.6g}, but the steps written give {expected_bootstrap:.6g}"
        following = self._records.get((stream, seq + steps))
        if following is None:
            return f"its next frame ({steps} on) was never written"
        wrong = self._stack_problem(stream, seq + steps, following[5], next_sums)
        return f"next observation: {wrong}" if wrong else None

    def _stack_problem(self, stream: int, seq: int, episode_step: int, sums: list[int]) -> str | None:
        """The stack ending at write `seq` (its frames' checksums `sums`): each frame as written, zeros before the
        episode's first."""
        for j in range(self._stack_size):
            back = self._stack_size - 1 - j
            if back > episode_step:
                expected = self._zero
            else:
                record = self._records.get((stream, seq - back))
                if record is None:
                    return f"frame {j} of its stack (write {seq - back}) was never written"
                expected = record[0]
            if sums[j] != expected:
                source = "zeros (before the episode's first frame)" if back > episode_step else f"write {seq - back}"
                return f"frame {j} of its stack differs from {source}"
        return None

    def arrays(self) -> dict:
        """The records in write order and each stream's counts, for a checkpoint (`audit-S.npz`)."""
        with self._lock:
            rows = [(*key, *self._records[key]) for key in self._order if key in self._records]
            streams = sorted(self._writes)
            counts = {"count_stream": np.asarray(streams, np.int64),
                      "count_writes": np.asarray([self._writes[s] for s in streams], np.int64),
                      "count_episode_step": np.asarray([self._episode_steps[s] for s in streams], np.int64)}
        columns = list(zip(*rows)) if rows else [()] * len(_FIELDS)
        dtypes = (np.int64, np.int64, np.uint32, np.int64, np.float64, np.bool_, np.bool_, np.int64)
        return {**{name: np.asarray(column, dtype) for name, column, dtype in zip(_FIELDS, columns, dtypes)},
                **counts}

    def load_arrays(self, arrays) -> None:
        """The records and counts a checkpoint held, in place of any kept now."""
        with self._lock:
            self._records.clear()
            self._order.clear()
            for row in zip(*(arrays[name].tolist() for name in _FIELDS)):
                key = (row[0], row[1])
                self._records[key] = tuple(row[2:])
                self._order.append(key)
            streams = arrays["count_stream"].tolist()
            self._writes = dict(zip(streams, arrays["count_writes"].tolist()))
            self._episode_steps = dict(zip(streams, arrays["count_episode_step"].tolist()))
