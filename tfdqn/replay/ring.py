"""Circular replay that stores each frame once and rebuilds stacked observations at sample time.

A stack of k Atari frames shares k-1 frames with its neighbours, so storing frames rather than
observations cuts replay memory about k-fold (docs/results/replay.md gives the bytes of Atari transitions).

All streams (envs) write one ring in the order their steps arrive, so the ring holds the newest
`capacity` slots whatever the number of streams and their rates: a slow actor's envs get the share of
the samples that they have of the data, no more. Each slot records its stream, its index within that
stream (`seq`) and links to the stream's previous and next slots, which stacking (k-1 frames back)
and n-step returns (n frames on) follow. An episode's final frame gets a slot of its own so a
truncated transition can bootstrap from it. Every rule for which slots may not be sampled lives in
`is_sampleable`, the one predicate that sampling, `len()` and the tests share.
"""

from __future__ import annotations

import math
import sys
from typing import NamedTuple

import numpy as np

from tfdqn.replay.frame_codec import EncodedFrames
from tfdqn.replay.frame_store import frame_store_bytes, make_frame_store
from tfdqn.replay.samplers import Sampler, UniformSampler
from tfdqn.replay.sum_tree import SumTree


class Batch(NamedTuple):
    """Transitions for the learner, whose target is reward + gamma * bootstrap * max_a Q(next_observation, a)."""

    observation: np.ndarray       # [B, *observation_shape], frame dtype
    action: np.ndarray            # [B] int32
    reward: np.ndarray            # [B] float32: sum of gamma^j r_{t+j} over the m steps, each r clipped to its
                                  # sign first where the ring clips (logged returns stay raw)
    bootstrap: np.ndarray         # [B] float32: 0.0 where the episode terminated, else gamma^(m-1) for the m
                                  # rewards summed (1.0 for one-step), so gamma * bootstrap discounts m steps
    next_observation: np.ndarray  # [B, *observation_shape], frame dtype: m steps on (1 for one-step)
    weight: np.ndarray            # [B] float32 importance weight of each transition's loss (1 when uniform)


def _check_sizes(capacity: int, stack_size: int, num_streams: int, n_step: int) -> None:
    """Refuse a ring in which streams stepping together could not each hold a full stack, its n next
    frames and a pending newest slot."""
    if stack_size < 1:
        raise ValueError(f"stack_size = {stack_size}; allowed: >= 1")
    if num_streams < 1:
        raise ValueError(f"num_streams = {num_streams}; allowed: >= 1")
    slots = capacity // num_streams
    if slots < stack_size + n_step + 1:
        raise ValueError(f"capacity = {capacity} gives {slots} slots to each of {num_streams} streams; "
                         f"allowed: at least stack_size + n_step + 1 = {stack_size + n_step + 1} slots per stream")


def _layout(capacity: int, stack_size: int, num_streams: int, n_step: int = 1) -> dict:
    """Name -> (shape, dtype) of every array the ring allocates besides its frames (frame_store.py): one
    source for allocation and size."""
    _check_sizes(capacity, stack_size, num_streams, n_step)
    slot, stream, ring = (capacity,), (num_streams,), (1,)
    return {
        "action": (slot, np.dtype(np.int32)),
        "reward": (slot, np.dtype(np.float32)),
        "terminated": (slot, np.dtype(np.bool_)),       # truncation needs no flag: a final-only slot follows
        "step_in_episode": (slot, np.dtype(np.int32)),  # frame index within its episode: where zero padding starts
        "final_only": (slot, np.dtype(np.bool_)),       # holds only an episode's final frame, not a transition
        "stream": (slot, np.dtype(np.int32)),           # the stream that wrote the slot
        "seq": (slot, np.dtype(np.int64)),              # the slot's index among its stream's writes
        "prev": (slot, np.dtype(np.int64)),             # the stream's previous slot (itself where none was left)
        "next": (slot, np.dtype(np.int64)),             # the stream's next slot (itself until it is written)
        "writes": (stream, np.dtype(np.int64)),         # slots the stream has written: the next one's seq
        "oldest": (stream, np.dtype(np.int64)),         # seq of the stream's oldest slot still held (writes: none)
        "oldest_slot": (stream, np.dtype(np.int64)),    # where that slot is
        "newest_slot": (stream, np.dtype(np.int64)),    # where the stream's newest slot is
        "episode_step": (stream, np.dtype(np.int64)),   # step_in_episode of the stream's next frame
        "cursor": (ring, np.dtype(np.int64)),           # next slot to write
        "filled": (ring, np.dtype(np.int64)),           # slots written so far, at most capacity
        "held": (ring, np.dtype(np.int64)),             # slots holding data: the `held` newest written ones
        "final_count": (ring, np.dtype(np.int64)),      # final-only slots among the held ones
    }


SLOT_RECORDS = ("action", "reward", "terminated", "step_in_episode", "final_only", "stream", "seq", "prev",
            "next")
COUNTERS = ("writes", "oldest", "oldest_slot", "newest_slot", "episode_step", "cursor", "filled", "held",
            "final_count")
OPTIONAL_COUNTERS = {"held": "filled"}  # counter -> the one it equals in a checkpoint written before it existed
CHUNK_SLOTS = 16_384  # slots per chunk of the saved ring: a checkpoint rewrites only chunks written since the last


def chunk_part(chunk: int) -> slice:
    return slice(chunk * CHUNK_SLOTS, (chunk + 1) * CHUNK_SLOTS)


class ReplayRing:
    """One preallocated ring of frames shared by every stream, with uniform sampling of rebuilt transitions.

    Arrays are created with np.zeros, so the OS commits pages only as the ring fills. `compression`
    (`replay.compression`) names the frames' lossless codec, or "none". With compression, `memory_budget`
    (bytes, 0: none) caps `memory_bytes()`: where frames compress worse than that allows, the ring vacates
    its oldest slots early and holds fewer transitions, says so once on stderr, and never takes more.
    """

    def __init__(self, capacity: int, frame_shape: tuple, frame_dtype, stack_size: int = 1,
                 num_streams: int = 1, seed: int = 0, n_step: int = 1, gamma: float = 1.0,
                 clip_rewards: bool = False, sampler: Sampler | None = None, compression: str = "none",
                 memory_budget: int = 0):
        layout = _layout(capacity, stack_size, num_streams, n_step)
        for name, (shape, dtype) in layout.items():  # self._action, self._reward, ... as listed in _layout
            setattr(self, "_" + name, np.zeros(shape, dtype))
        self._frames = make_frame_store(capacity, frame_shape, frame_dtype, compression)
        self._num_streams = num_streams
        self._stack_size = stack_size
        self._n_step, self._gamma, self._clip_rewards = n_step, gamma, clip_rewards
        self._frame_shape = tuple(frame_shape)
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self.capacity = capacity  # slots, final-frame slots included
        self.observation_shape = self._frame_shape if stack_size == 1 else (stack_size, *self._frame_shape)
        self._dirty = np.zeros(-(-capacity // CHUNK_SLOTS), bool)
        self._chunk_in_use = np.zeros_like(self._dirty)  # chunks written or loaded since made or cleared: not all zeros
        self.audit = None  # a `ReplayAudit` that shadows every write (`replay.audit`), or None
        self.sampler = sampler or UniformSampler()
        self.sampler.attach(self)
        self.nbytes = self.bytes_needed(capacity, frame_shape, frame_dtype, stack_size, num_streams, n_step,
                                        self.sampler.prioritized, compression)
        self.raw_nbytes = self.bytes_needed(capacity, frame_shape, frame_dtype, stack_size, num_streams, n_step,
                                            self.sampler.prioritized)  # the same ring without compression
        if memory_budget and compression == "none":
            raise ValueError(f"memory_budget = {memory_budget} needs compression; allowed: 0 without it")
        self.memory_budget = memory_budget
        self.fewest_held = None  # the fewest slots held after the budget first made the ring vacate some
        self._floor = num_streams * (stack_size + n_step + 1)  # never vacated below: each stream's stack and look-ahead

    @staticmethod
    def bytes_needed(capacity: int, frame_shape: tuple, frame_dtype, stack_size: int = 1,
                     num_streams: int = 1, n_step: int = 1, prioritized: bool = False,
                     compression: str = "none") -> int:
        """`nbytes` of a ring built with these arguments, computed without allocating it: with compression,
        without the compressed frames themselves (`frame_bytes` says what they take as they come)."""
        layout = _layout(capacity, stack_size, num_streams, n_step)
        sampler = SumTree.bytes_needed(capacity) if prioritized else 0
        frames = frame_store_bytes(capacity, frame_shape, frame_dtype, compression)
        return sum(math.prod(shape) * dtype.itemsize for shape, dtype in layout.values()) + sampler + frames

    @property
    def compression(self) -> str:
        return self._frames.codec

    def memory_bytes(self) -> int:
        """What the ring takes now at most: `nbytes`, plus the compressed frames it holds (with compression)."""
        return self.nbytes + self._frames.code_bytes()

    def filled_bytes(self) -> int:
        """What the ring's filled part takes: its arrays' share for the slots written (arrays are allocated whole,
        but pages count in memory once written) and the compressed frames it holds."""
        return int(self.filled / self.capacity * self.nbytes) + self.memory_bytes() - self.nbytes

    @property
    def filled(self) -> int:
        """Slots written so far, at most `capacity` (an episode's final frame takes one of its own)."""
        return int(self._filled[0])

    @property
    def held(self) -> int:
        """Slots holding data now: `filled`, less those a memory budget vacated."""
        return int(self._held[0])

    def add(self, frame, action, reward, terminated, truncated, final_frame, streams=None) -> None:
        """Record one env step of every stream, or of `streams` (distinct indices) where given; each
        argument has a leading axis of one entry per stream written.

        `frame` is the newest frame of the observation the action was chosen from. `final_frame` is read
        only where the episode ended (terminated or truncated): it is the episode's final frame, stored
        in a slot of its own, and that stream's next add() starts a new episode. Elsewhere the next
        frame is the next add()'s `frame`.
        """
        streams = self._selected(streams)
        frame = self._per_stream("frame", frame, self._frame_shape, len(streams))
        terminated = self._per_stream("terminated", terminated, (), len(streams)).astype(bool)
        truncated = self._per_stream("truncated", truncated, (), len(streams)).astype(bool)
        self._write(streams, frame, self._per_stream("action", action, (), len(streams)),
                    self._per_stream("reward", reward, (), len(streams)), terminated, final_only=False)
        ended = np.flatnonzero(terminated | truncated)
        if ended.size:
            final_frame = self._per_stream("final_frame", final_frame, self._frame_shape, len(streams))
            self._write(streams[ended], final_frame[ended], 0, 0.0, False, final_only=True)
            self._episode_step[streams[ended]] = 0
        if self.memory_budget and self.memory_bytes() > self.memory_budget:
            self._keep_within_budget()

    def _keep_within_budget(self) -> None:
        """Vacate the oldest slots, in steps of about a thousandth of the ring, until the memory is within the
        budget again; the first time, say so in one line."""
        while self.memory_bytes() > self.memory_budget and self._held[0] > self._floor:
            per_slot = max(self._frames.code_bytes() / self._held[0], 1.0)
            count = int((self.memory_bytes() - self.memory_budget) / per_slot) + 1 + self.capacity // 1000
            self._vacate(min(count, int(self._held[0]) - self._floor))
        if self.fewest_held is None:
            print(f"warning: replay frames take {self._frames.code_bytes() / self._held[0]:,.0f} bytes each with "
                  f"{self.compression}, more than the memory budget of {self.memory_budget / 2**30:.2f} GiB allows "
                  f"for {self.capacity:,} transitions: holding the newest {int(self._held[0]):,} instead",
                  file=sys.stderr, flush=True)
        self.fewest_held = min(int(self._held[0]), self.fewest_held or self.capacity)

    def _vacate(self, count: int) -> None:
        """Forget the `count` oldest held slots before the cursor reaches them, and their frames."""
        slots = (self._cursor[0] - self._held[0] + np.arange(count)) % self.capacity
        self._evict(slots)
        self._frames.forget(slots)
        self.sampler.vacated(slots)
        self._mark_written(slots)  # a checkpoint must not bring their frames back
        self._held[0] -= count

    def _selected(self, streams) -> np.ndarray:
        """The stream indices an add() or cut_episodes() writes: `streams`, or all of them (None)."""
        return np.arange(self._num_streams) if streams is None else np.asarray(streams)

    def _per_stream(self, name: str, value, shape: tuple, count: int) -> np.ndarray | EncodedFrames:
        """`value` as an array of shape [count, *shape] (one entry per stream written), or a ValueError naming it.
        Frames may come compressed already (`EncodedFrames`, from an actor): one code per stream."""
        if isinstance(value, EncodedFrames):
            shape = ()
        else:
            value = np.asarray(value)
        expected = (count, *shape)
        if value.shape != expected:
            raise ValueError(f"add(): {name} has shape {value.shape}; allowed: {expected} "
                             f"(leading axis: one entry per stream)")
        return value

    def _write(self, streams, frame, action, reward, terminated, final_only: bool) -> None:
        """Write one slot for each of `streams` (distinct) at the cursor, in order, evicting the oldest slots."""
        slots = (self._cursor[0] + np.arange(len(streams))) % self.capacity
        self._evict(slots[self.capacity - self._held[0]:])  # the rest of the cursor's slots hold nothing
        self._link(streams, slots)
        self._store_frames(slots, frame)
        self._action[slots] = action
        self._reward[slots] = reward
        self._terminated[slots] = terminated
        self._step_in_episode[slots] = self._episode_step[streams]
        self._final_only[slots] = final_only
        self._stream[slots] = streams
        self._seq[slots] = self._writes[streams]
        self._writes[streams] += 1
        self._newest_slot[streams] = slots
        self._episode_step[streams] += 1
        self._final_count += final_only * len(streams)
        self.sampler.written(slots, final_only)
        self._cursor[0] = (self._cursor[0] + len(streams)) % self.capacity
        self._filled[0] = min(self._filled[0] + len(streams), self.capacity)
        self._held[0] = min(self._held[0] + len(streams), self.capacity)
        if self.audit is not None:
            self.audit.written(streams, frame, action, reward, terminated, final_only)

    def _evict(self, held: np.ndarray) -> None:
        """Forget what the slots `held` held: the globally oldest slots, so each is also its stream's oldest."""
        if not held.size:
            return
        owner, seq = self._stream[held], self._seq[held]
        self._final_count -= np.count_nonzero(self._final_only[held])
        np.maximum.at(self._oldest, owner, seq + 1)
        newest_evicted = seq + 1 == self._oldest[owner]  # one per owner: its next slot is now its oldest
        self._oldest_slot[owner[newest_evicted]] = self._next[held[newest_evicted]]

    def _link(self, streams: np.ndarray, slots: np.ndarray) -> None:
        """Chain each new slot to its stream's newest one still held (to itself where none is) and mark
        what changed. The slots written were just evicted, so no stream's held newest slot is among them."""
        newest = self._newest_slot[streams]
        empty = self._oldest[streams] == self._writes[streams]  # none of the stream's slots is held
        if empty.any():
            self._oldest_slot[streams[empty]] = slots[empty]
            newest = np.where(empty, slots, newest)
        self._prev[slots] = newest
        self._next[newest] = slots
        self._next[slots] = slots
        self._mark_written(np.concatenate([slots, newest]))

    def _mark_written(self, slots: np.ndarray) -> None:
        """`slots` changed: their chunks must be saved again."""
        self._dirty[slots // CHUNK_SLOTS] = True
        self._chunk_in_use[slots // CHUNK_SLOTS] = True

    def _store_frames(self, slots: np.ndarray, frame: np.ndarray) -> None:
        self._frames.store(slots, frame)

    def _load_frames(self, slots: np.ndarray) -> np.ndarray:
        """A fresh array of the frames at `slots`."""
        return self._frames.load(slots)

    def is_sampleable(self, indices: np.ndarray) -> np.ndarray:
        """The one predicate: which slots hold usable transitions.

        A slot is refused when it was never written, when it is among its stream's n_step newest (the
        frames and rewards it looks ahead to are not all written yet), when it holds only a final frame,
        or when a history frame its stack needs (up to stack_size - 1 back, never before the episode's
        first frame) has been evicted.
        """
        slot = np.asarray(indices)
        stream, seq = self._stream[slot], self._seq[slot]
        history = np.minimum(self._step_in_episode[slot], self._stack_size - 1)
        return ((slot < self._filled[0]) & (self._writes[stream] - 1 - seq >= self._n_step)
                & (seq - history >= self._oldest[stream]) & ~self._final_only[slot])

    def __len__(self) -> int:
        """Number of transitions that may be sampled now (held transitions the predicate accepts).

        Only a stream's n_step newest slots and its stack_size - 1 oldest slots can be refused while held
        and not final-only, so the predicate runs on those alone: O(num_streams * (n_step + stack_size)).
        """
        held = self._writes - self._oldest
        candidates, newest, oldest = [], self._newest_slot, self._oldest_slot
        for j in range(self._n_step):  # the j-th newest slot of each stream
            candidates.append(newest[j < held])
            newest = self._prev[newest]
        for j in range(self._stack_size - 1):  # the j-th oldest, unless already counted among the newest
            candidates.append(oldest[(j < held) & (held - 1 - j >= self._n_step)])
            oldest = self._next[oldest]
        slots = np.concatenate(candidates)
        refused = ~self._final_only[slots] & ~self.is_sampleable(slots)
        return int(self._held[0] - self._final_count[0] - refused.sum())

    def can_sample(self, batch_size: int) -> bool:
        """Whether at least `batch_size` distinct transitions are sampleable (sampling is with replacement)."""
        return len(self) >= batch_size

    def sample(self, batch_size: int, beta: float = 1.0) -> Batch:
        """A batch drawn with replacement from the sampleable transitions of all streams, as the sampler
        draws (uniformly, or by priority with importance weights of exponent `beta`)."""
        return Batch(*(x[0] for x in self.sample_stacked(1, batch_size, beta)))

    def sample_stacked(self, count: int, batch_size: int, beta: float = 1.0) -> Batch:
        """`count` batches drawn together, stacked on a leading axis: the input of fused updates. Each
        batch needs `batch_size` sampleable transitions, not all of them together (a round of 64
        updates may fall due right after learning_starts)."""
        return self.stack(self.sample_indices(batch_size, draws=count * batch_size), count, beta)

    def stack(self, indices: np.ndarray, count: int, beta: float = 1.0, weight: np.ndarray | None = None) -> Batch:
        """The transitions at `indices` ([count * B], as drawn) as `count` batches stacked on a leading
        axis, each weighted by the sampler (importance exponent `beta`), or by `weight` [count, B]: the
        sampler's weights read when the indices were drawn, where priorities may have changed since."""
        batch = self.gather(indices)
        weight = self.sampler.weights(indices.reshape(count, -1), beta) if weight is None else weight
        return Batch(*(x.reshape(count, -1, *x.shape[1:]) for x in batch[:-1]), weight)

    def sample_indices(self, batch_size: int, draws: int | None = None) -> np.ndarray:
        """[draws] (default: batch_size) slots drawn by the sampler in batches of `batch_size`, redrawing
        those the predicate refuses; at least `batch_size` transitions must be sampleable."""
        if not self.can_sample(batch_size):
            raise ValueError(f"sample({batch_size}): only {len(self)} transitions are sampleable; "
                             f"check can_sample() first")
        draws = batch_size if draws is None else draws
        indices = self.sampler.draw(draws, batch_size, self._rng)
        refused = np.flatnonzero(~self.is_sampleable(indices))
        while refused.size:
            indices[refused] = self.sampler.redraw(refused.size, self._rng)
            refused = refused[~self.is_sampleable(indices[refused])]
        return indices

    def draw_uniform(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """[count] slots drawn uniformly over the held ones (refused ones included: the caller redraws)."""
        age = rng.integers(self._held[0], size=count)  # 0: the newest slot
        return (self._cursor[0] - 1 - age) % self.capacity

    def update_priorities(self, indices: np.ndarray, losses: np.ndarray, drawn: np.ndarray) -> None:
        """Give the transitions at `indices` the priorities of their per-sample `losses` (|TD error| or
        the distributional loss), except where the slot was rewritten since it was drawn (its stream or
        write count, read by `drawn` then, changed)."""
        current = (self._stream[indices] == drawn[0]) & (self._seq[indices] == drawn[1])
        self.sampler.update(indices[current], losses[current])

    def drawn(self, indices: np.ndarray) -> np.ndarray:
        """[2, N]: the (stream, write count) of each slot at `indices` now, which names the transition it holds:
        what `redraw_changed` and `update_priorities` compare against once the lock was let go, and what the
        replay audit checks a batch against."""
        return np.stack([self._stream[indices], self._seq[indices]])

    def redraw_changed(self, indices: np.ndarray, drawn: np.ndarray) -> np.ndarray:
        """`indices` (changed in place, and returned) with each slot that holds another transition than when it was
        `drawn` (rewritten since) or is no longer sampleable (its history evicted) drawn again by the sampler: a
        batch assembled after the lock was let go is made of transitions as they are, never of a slot's old
        step mixed with new ones. Nothing changes, and nothing is drawn, where no step was added in between."""
        changed = np.flatnonzero((self._stream[indices] != drawn[0]) | (self._seq[indices] != drawn[1])
                                 | ~self.is_sampleable(indices))
        while changed.size:
            indices[changed] = self.sampler.redraw(changed.size, self._rng)
            changed = changed[~self.is_sampleable(indices[changed])]
        return indices

    def _window_slots(self, slot: np.ndarray) -> np.ndarray:
        """[B, stack_size + n_step] slots of each stream's frames stack_size - 1 back to n_step on from
        `slot`, followed along the stream's links (past an episode's start they point anywhere)."""
        columns = [slot]
        for _ in range(self._stack_size - 1):
            columns.insert(0, self._prev[columns[0]])
        for _ in range(self._n_step):
            columns.append(self._next[columns[-1]])
        return np.stack(columns, axis=1)

    def gather(self, indices: np.ndarray) -> Batch:
        """Rebuild the transitions at sampleable `indices`; frames before an episode's start are zero.

        One window of stack_size + n_step frames per transition serves both stacks: the next observation
        ends m slots later in the same episode, so its zero padding falls on the same frames. The window
        is read-only; with one-step returns `observation` and `next_observation` are overlapping views
        of it: one fresh allocation per batch keeps sampling clear of page faults.
        """
        slot = np.asarray(indices)
        k, n = self._stack_size, self._n_step
        window_slots = self._window_slots(slot)
        window = self._load_frames(window_slots)
        offset = np.arange(-(k - 1), n + 1)  # each window frame's steps after `slot`
        window[offset[None, :] < -self._step_in_episode[slot][:, None]] = 0
        window.flags.writeable = False
        reward, bootstrap, steps = self._returns(window_slots[:, k - 1:k - 1 + n])
        if n == 1:
            next_observation = window[:, 1:]
        else:
            next_observation = window[np.arange(len(slot))[:, None], steps[:, None] + np.arange(k)]
        observation = window[:, :k]
        if k == 1:
            observation, next_observation = observation[:, 0], next_observation[:, 0]
        return Batch(observation=observation, action=self._action[slot], reward=reward, bootstrap=bootstrap,
                     next_observation=next_observation, weight=np.ones(len(slot), np.float32))

    def _returns(self, ahead: np.ndarray) -> tuple:
        """(reward, bootstrap, m) of the transitions whose n slots from the first on are `ahead` [B, n]: up to
        n rewards (each clipped to its sign first, where the ring clips) summed with gamma^j, stopping where the episode ended (the slot after its last
        transition holds only the final frame); a termination leaves nothing to bootstrap from."""
        rewards = np.sign(self._reward[ahead]) if self._clip_rewards else self._reward[ahead]
        if self._n_step == 1:
            return rewards[:, 0], (~self._terminated[ahead[:, 0]]).astype(np.float32), None
        summed = np.cumsum(self._final_only[ahead], axis=1) == 0  # step j comes before the episode's end
        steps = summed.sum(axis=1)  # m: 1..n
        reward = (rewards * summed * self._gamma ** np.arange(self._n_step)).sum(axis=1)
        last = ahead[np.arange(len(ahead)), steps - 1]
        bootstrap = np.where(self._terminated[last], 0.0, self._gamma ** (steps - 1))
        return reward.astype(np.float32), bootstrap.astype(np.float32), steps

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
        """Every per-slot array over one chunk of slots (views; the frames as their store saves them)."""
        part = chunk_part(chunk)
        return {**self._frames.chunk_arrays(part), **{name: getattr(self, "_" + name)[part] for name in SLOT_RECORDS}}

    def load_chunk(self, chunk: int, arrays) -> None:
        self._chunk_in_use[chunk] = True
        part = chunk_part(chunk)
        self._frames.load_chunk(part, arrays)
        for name in SLOT_RECORDS:
            getattr(self, "_" + name)[part] = arrays[name]

    def counters(self) -> dict:
        """Cursor, fill level, stream positions and episode positions, the sampling RNG's state and the
        sampler's scalars (a prioritized sampler's running maximum)."""
        return {**{name: getattr(self, "_" + name).tolist() for name in COUNTERS},
                "rng": self._rng.bit_generator.state, "sampler": self.sampler.counters()}

    def clear_chunk(self, chunk: int) -> None:
        """Zero a chunk that a restored checkpoint had not written yet (no stale flags survive). A chunk
        nothing wrote or loaded still holds the zeros it was made with and is left untouched, so a resumed
        run commits only the memory its restored transitions need, as the uninterrupted run did."""
        if self._chunk_in_use[chunk]:
            self._zero_chunk(chunk)
            self._chunk_in_use[chunk] = False

    def _zero_chunk(self, chunk: int) -> None:
        part = chunk_part(chunk)
        self._frames.zero_chunk(part)
        for name in SLOT_RECORDS:
            getattr(self, "_" + name)[part] = 0

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
        for name in COUNTERS:
            getattr(self, "_" + name)[...] = counters[name if name in counters else OPTIONAL_COUNTERS[name]]
        self._rng.bit_generator.state = counters["rng"]
        self.sampler.load_counters(counters["sampler"])
        self._dirty[:] = False
