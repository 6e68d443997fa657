"""Circular replay that stores each frame once and rebuilds stacked observations at sample time.

A stack of k Atari frames shares k-1 frames with its neighbours, so storing frames rather than
observations cuts replay memory about k-fold (1M transitions of 84x84 uint8 fit in about 7.1 GB).
Each env (stream) writes its own ring; an episode's final frame gets a slot of its own so a
truncated transition can bootstrap from it. Every rule for which slots may not be sampled lives in
`is_sampleable`, the one predicate that sampling, `len()` and the tests share.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Batch(NamedTuple):
    """Transitions for the learner; `discount` is 0 only on termination, so truncation bootstraps."""

    observation: np.ndarray       # [B, *observation_shape], frame dtype
    action: np.ndarray            # [B] int32
    reward: np.ndarray            # [B] float32, raw (the learner clips); n-step: sum of gamma^j r_{t+j}
    discount: np.ndarray          # [B] float32: 0.0 where the episode terminated, else 1.0 (n-step: gamma^(m-1)
                                  # for the m rewards summed, so the learner's gamma * discount is gamma^m)
    next_observation: np.ndarray  # [B, *observation_shape], frame dtype: m steps on (1 for one-step)


def _slots_per_stream(capacity: int, stack_size: int, num_streams: int, n_step: int = 1) -> int:
    """Slots each stream gets; a stream must hold a full stack, its n next frames and a pending newest slot."""
    if stack_size < 1:
        raise ValueError(f"stack_size = {stack_size}; allowed: >= 1")
    if num_streams < 1:
        raise ValueError(f"num_streams = {num_streams}; allowed: >= 1")
    slots = capacity // num_streams
    if slots < stack_size + n_step + 1:
        raise ValueError(f"capacity = {capacity} gives {slots} slots to each of {num_streams} streams; "
                         f"allowed: at least stack_size + n_step + 1 = {stack_size + n_step + 1} slots per stream")
    return slots


def _layout(capacity: int, frame_shape: tuple, frame_dtype, stack_size: int, num_streams: int,
            n_step: int = 1) -> dict:
    """Name -> (shape, dtype) of every array the ring allocates: one source for allocation and size."""
    per_slot = (num_streams, _slots_per_stream(capacity, stack_size, num_streams, n_step))
    per_stream = (num_streams,)
    return {
        "frames": (per_slot + tuple(frame_shape), np.dtype(frame_dtype)),
        "action": (per_slot, np.dtype(np.int32)),
        "reward": (per_slot, np.dtype(np.float32)),
        "terminated": (per_slot, np.dtype(np.bool_)),       # truncation needs no flag: a final-only slot follows
        "step_in_episode": (per_slot, np.dtype(np.int32)),  # frame index within its episode: where zero padding starts
        "final_only": (per_slot, np.dtype(np.bool_)),       # holds only an episode's final frame, not a transition
        "cursor": (per_stream, np.dtype(np.int64)),         # next slot to write
        "filled": (per_stream, np.dtype(np.int64)),         # slots written so far, at most slots per stream
        "final_count": (per_stream, np.dtype(np.int64)),    # final-only slots among the written ones
        "episode_step": (per_stream, np.dtype(np.int64)),   # step_in_episode of the next frame written
    }


PER_SLOT = ("frames", "action", "reward", "terminated", "step_in_episode", "final_only")
PER_STREAM = ("cursor", "filled", "final_count", "episode_step")
CHUNK_SLOTS = 16_384  # slots per chunk of the saved ring: a checkpoint rewrites only chunks written since the last


class ReplayRing:
    """Preallocated per-stream rings of frames with uniform sampling of rebuilt transitions.

    Arrays are created with np.zeros, so the OS commits pages only as the ring fills.
    """

    def __init__(self, capacity: int, frame_shape: tuple, frame_dtype, stack_size: int = 1,
                 num_streams: int = 1, seed: int = 0, n_step: int = 1, gamma: float = 1.0):
        layout = _layout(capacity, frame_shape, frame_dtype, stack_size, num_streams, n_step)
        for name, (shape, dtype) in layout.items():  # self._frames, self._action, ... as listed in _layout
            setattr(self, "_" + name, np.zeros(shape, dtype))
        self._num_streams = num_streams
        self._slots = layout["frames"][0][1]
        self._stack_size = stack_size
        self._n_step, self._gamma = n_step, gamma
        self._frame_shape = tuple(frame_shape)
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self.capacity = self._slots * num_streams  # slots actually allocated, final-frame slots included
        self.observation_shape = self._frame_shape if stack_size == 1 else (stack_size, *self._frame_shape)
        self.nbytes = sum(getattr(self, "_" + name).nbytes for name in layout)
        self._dirty = np.zeros(-(-self._slots // CHUNK_SLOTS), bool)

    @staticmethod
    def bytes_needed(capacity: int, frame_shape: tuple, frame_dtype, stack_size: int = 1,
                     num_streams: int = 1, n_step: int = 1) -> int:
        """`nbytes` of a ring built with these arguments, computed without allocating it."""
        layout = _layout(capacity, frame_shape, frame_dtype, stack_size, num_streams, n_step)
        return sum(math.prod(shape) * dtype.itemsize for shape, dtype in layout.values())

    def add(self, frame, action, reward, terminated, truncated, next_frame, streams=None) -> None:
        """Record one env step of every stream, or of `streams` (distinct indices) where given; each
        argument has a leading axis of one entry per stream written.

        `frame` is the newest frame of the observation the action was chosen from. `next_frame` is
        stored only where the episode ended: there it is the final frame, and that stream's next
        add() starts a new episode. Elsewhere it must equal the next add()'s `frame`.
        """
        streams = self._selected(streams)
        frame = self._per_stream("frame", frame, self._frame_shape, len(streams))
        terminated = self._per_stream("terminated", terminated, (), len(streams)).astype(bool)
        truncated = self._per_stream("truncated", truncated, (), len(streams)).astype(bool)
        self._write(streams, frame, self._per_stream("action", action, (), len(streams)),
                    self._per_stream("reward", reward, (), len(streams)), terminated, final_only=False)
        ended = np.flatnonzero(terminated | truncated)
        if ended.size:
            next_frame = self._per_stream("next_frame", next_frame, self._frame_shape, len(streams))
            self._write(streams[ended], next_frame[ended], 0, 0.0, False, final_only=True)
            self._episode_step[streams[ended]] = 0

    def _selected(self, streams) -> np.ndarray:
        """The stream indices an add() or cut_episodes() writes: `streams`, or all of them (None)."""
        return np.arange(self._num_streams) if streams is None else np.asarray(streams)

    def _per_stream(self, name: str, value, shape: tuple, count: int) -> np.ndarray:
        """`value` as an array of shape [count, *shape] (one entry per stream written), or a ValueError naming it."""
        value = np.asarray(value)
        expected = (count, *shape)
        if value.shape != expected:
            raise ValueError(f"add(): {name} has shape {value.shape}; allowed: {expected} "
                             f"(leading axis: one entry per stream)")
        return value

    def _write(self, streams, frame, action, reward, terminated, final_only: bool) -> None:
        """Write one slot for each of `streams` (distinct) at its cursor and advance the cursor."""
        slot = self._cursor[streams]
        self._final_count[streams] -= self._final_only[streams, slot]  # an overwritten final-only slot leaves
        self._store_frames(streams, slot, frame)
        self._action[streams, slot] = action
        self._reward[streams, slot] = reward
        self._terminated[streams, slot] = terminated
        self._step_in_episode[streams, slot] = self._episode_step[streams]
        self._final_only[streams, slot] = final_only
        self._final_count[streams] += final_only
        self._dirty[slot // CHUNK_SLOTS] = True
        self._cursor[streams] = (slot + 1) % self._slots
        self._filled[streams] = np.minimum(self._filled[streams] + 1, self._slots)
        self._episode_step[streams] += 1

    def _store_frames(self, streams: np.ndarray, slot: np.ndarray, frame: np.ndarray) -> None:
        self._frames[streams, slot] = frame

    def _load_frames(self, streams: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """A fresh array of the frames at (streams, slots), broadcast together."""
        return self._frames[streams, slots]

    def is_sampleable(self, indices: np.ndarray) -> np.ndarray:
        """The one predicate: which flat indices (stream * slots_per_stream + slot) hold usable transitions.

        `age` counts writes since the slot was written (0: newest). A slot is refused when it was never
        written or was overwritten (age >= filled), when it is among the n_step newest (the frames and
        rewards it looks ahead to are not all written yet), when it holds only a final frame, or when a
        history frame its stack needs (up to stack_size - 1 back, never before the episode's first
        frame) has been overwritten by the wrap.
        """
        stream, slot = np.divmod(np.asarray(indices), self._slots)
        age = (self._cursor[stream] - 1 - slot) % self._slots
        history = np.minimum(self._step_in_episode[stream, slot], self._stack_size - 1)
        return (age >= self._n_step) & (age + history < self._filled[stream]) & ~self._final_only[stream, slot]

    def __len__(self) -> int:
        """Number of transitions that may be sampled now (stored transitions the predicate accepts).

        Only a stream's n_step newest slots and its stack_size - 1 oldest slots can be refused while
        written and not final-only, so the predicate runs on those alone: O(num_streams * (n_step + stack_size)).
        """
        k, n = self._stack_size, self._n_step
        filled = self._filled[:, None]
        newest = np.broadcast_to(np.arange(n), (len(filled), n))
        ages = np.concatenate([newest, filled - (k - 1) + np.arange(k - 1)], axis=1)
        present = (ages < filled) & ((ages >= n) | (np.arange(n + k - 1) < n))  # written, each slot counted once
        stream = np.broadcast_to(np.arange(self._num_streams)[:, None], ages.shape)[present]
        slot = (self._cursor[stream] - 1 - ages[present]) % self._slots
        refused = ~self._final_only[stream, slot] & ~self.is_sampleable(stream * self._slots + slot)
        return int(self._filled.sum() - self._final_count.sum() - refused.sum())

    def can_sample(self, batch_size: int) -> bool:
        """Whether at least `batch_size` distinct transitions are sampleable (sampling is with replacement)."""
        return len(self) >= batch_size

    def sample(self, batch_size: int) -> Batch:
        """A batch drawn uniformly, with replacement, from the sampleable transitions of all streams."""
        return self.gather(self.sample_indices(batch_size))

    def sample_stacked(self, count: int, batch_size: int) -> Batch:
        """`count` batches drawn together, stacked on a leading axis: the input of fused updates. Each
        batch needs `batch_size` sampleable transitions, not all of them together (a round of 64
        updates may fall due right after learning_starts)."""
        indices = self.sample_indices(batch_size, draws=count * batch_size)
        return Batch(*(x.reshape(count, batch_size, *x.shape[1:]) for x in self.gather(indices)))

    def sample_indices(self, batch_size: int, draws: int | None = None) -> np.ndarray:
        """[draws] (default: batch_size) flat indices drawn uniformly over written slots, redrawing those
        the predicate refuses; at least `batch_size` transitions must be sampleable."""
        if not self.can_sample(batch_size):
            raise ValueError(f"sample({batch_size}): only {len(self)} transitions are sampleable; "
                             f"check can_sample() first")
        draws = batch_size if draws is None else draws
        ends = np.cumsum(self._filled)
        indices = np.empty(draws, np.int64)
        todo = np.arange(draws)
        while todo.size:
            draw = self._rng.integers(ends[-1], size=todo.size)
            stream = np.searchsorted(ends, draw, side="right")
            age = draw - (ends[stream] - self._filled[stream])
            candidate = stream * self._slots + (self._cursor[stream] - 1 - age) % self._slots
            accepted = self.is_sampleable(candidate)
            indices[todo[accepted]] = candidate[accepted]
            todo = todo[~accepted]
        return indices

    def gather(self, indices: np.ndarray) -> Batch:
        """Rebuild the transitions at sampleable flat `indices`; frames before an episode's start are zero.

        One window of stack_size + 1 frames per transition serves both stacks: the next observation
        ends one slot later in the same episode, so its zero padding falls on the same frames.
        `observation` and `next_observation` are read-only overlapping views of that one window: a
        single fresh allocation per batch keeps sampling clear of page faults from repeated large mallocs.
        """
        stream, slot = np.divmod(np.asarray(indices), self._slots)
        if self._n_step > 1:
            return self._gather_n_step(stream, slot)
        k = self._stack_size
        back = np.arange(k - 1, -2, -1)  # frames back from `slot`: k-1 .. 0, then -1 (the next frame)
        window = self._load_frames(stream[:, None], (slot[:, None] - back) % self._slots)
        window[back > self._step_in_episode[stream, slot][:, None]] = 0
        window.flags.writeable = False
        if k == 1:
            observation, next_observation = window[:, 0], window[:, 1]
        else:
            observation, next_observation = window[:, :k], window[:, 1:]
        return Batch(
            observation=observation,
            action=self._action[stream, slot],
            reward=self._reward[stream, slot],
            discount=(~self._terminated[stream, slot]).astype(np.float32),
            next_observation=next_observation,
        )

    def _stack(self, stream: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """The observations whose newest frames are at (stream, slot), zero before each episode's start."""
        k = self._stack_size
        back = np.arange(k - 1, -1, -1)
        frames = self._load_frames(stream[:, None], (slot[:, None] - back) % self._slots)
        frames[back > self._step_in_episode[stream, slot][:, None]] = 0
        return frames[:, 0] if k == 1 else frames

    def _gather_n_step(self, stream: np.ndarray, slot: np.ndarray) -> Batch:
        """n-step transitions: the rewards of up to n steps summed with gamma^j, stopping where the episode
        ended (the slot after its last transition holds only the final frame), and the observation m
        steps on; a termination within them leaves nothing to bootstrap from."""
        ahead = (slot[:, None] + np.arange(self._n_step)) % self._slots  # [B, n]
        ended_before = np.cumsum(self._final_only[stream[:, None], ahead], axis=1) > 0  # step j is past the end
        summed = ~ended_before
        steps = summed.sum(axis=1)  # m: 1..n
        reward = (self._reward[stream[:, None], ahead] * summed * self._gamma ** np.arange(self._n_step)).sum(axis=1)
        last = ahead[np.arange(len(slot)), steps - 1]
        discount = np.where(self._terminated[stream, last], 0.0, self._gamma ** (steps - 1))
        return Batch(observation=self._stack(stream, slot), action=self._action[stream, slot],
                     reward=reward.astype(np.float32), discount=discount.astype(np.float32),
                     next_observation=self._stack(stream, (slot + steps) % self._slots))

    # ---------------------------------------------------------------- persistence (see checkpoint.py)

    @property
    def num_chunks(self) -> int:
        return len(self._dirty)

    def dirty_chunks(self) -> list[int]:
        """Chunks written since the last `mark_saved`: a checkpoint must write them."""
        return np.flatnonzero(self._dirty).tolist()

    def mark_saved(self, chunks: list[int]) -> None:
        """`chunks` are on disk in a complete checkpoint: only later writes make them dirty again.
        Called after the checkpoint's marker, so a save that failed part-way rewrites them next time."""
        self._dirty[chunks] = False

    def chunk_arrays(self, chunk: int) -> dict:
        """Views of every per-slot array over one chunk of slots (all streams)."""
        part = slice(chunk * CHUNK_SLOTS, (chunk + 1) * CHUNK_SLOTS)
        return {name: getattr(self, "_" + name)[:, part] for name in PER_SLOT}

    def load_chunk(self, chunk: int, arrays: dict) -> None:
        for name, view in self.chunk_arrays(chunk).items():
            view[...] = arrays[name]

    def counters(self) -> dict:
        """Cursor, fill level and episode positions per stream, and the sampling RNG's state."""
        return {**{name: getattr(self, "_" + name).tolist() for name in PER_STREAM},
                "rng": self._rng.bit_generator.state}

    def clear_chunk(self, chunk: int) -> None:
        """Zero a chunk that a restored checkpoint had not written yet (no stale flags survive)."""
        for view in self.chunk_arrays(chunk).values():
            view[...] = 0

    def cut_episodes(self, final_frame, streams=None) -> None:
        """End the episode of every stream (or of `streams`) where it stands, as a truncation:
        `final_frame` (one per stream cut) becomes the newest transition's next frame, and the next add()
        starts a new episode. Used where a game cannot go on: a resumed run's envs that could not be
        saved, an actor process that died."""
        streams = self._selected(streams)
        final_frame = self._per_stream("final_frame", final_frame, self._frame_shape, len(streams))
        open_episode = self._episode_step[streams] > 0
        if open_episode.any():
            self._write(streams[open_episode], final_frame[open_episode], 0, 0.0, False, final_only=True)
            self._episode_step[streams[open_episode]] = 0

    def load_counters(self, counters: dict) -> None:
        for name in PER_STREAM:
            getattr(self, "_" + name)[...] = counters[name]
        self._rng.bit_generator.state = counters["rng"]
        self._dirty[:] = False
