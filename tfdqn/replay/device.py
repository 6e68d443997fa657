"""The replay ring with its frames and slot records in tf.Variables, sampled inside the update graph.

`replay.device: accelerator` selects it. On a GPU the frames then live in GPU memory and a fused
`update_from_replay(k)` call draws all k batches itself: no Python and no host-to-device batch copy
between updates. The host ring's bookkeeping (the shared ring, stream links, the one predicate) is
kept and mirrored: `add` stages each step on the host, and `flush()` scatters what changed into the
variables in one call per array, just before the learner needs them.

It is a `ReplayRing`: the host API (`sample`, `gather`, `is_sampleable`, checkpoint chunks) behaves
identically, so the same replay tests run on both. The in-graph sampler draws from its own seeded
`tf.random.Generator`, so its batches differ from the host ring's NumPy draws for the same seed.
n-step returns and reward clipping are rebuilt in the graph as the host ring rebuilds them; a
prioritized sampler keeps its sum tree in a tf.Variable (`graph_samplers.GraphPrioritizedSampler`), sampled
and updated inside the update graph.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfdqn.replay.frame_store import raw_frames
from tfdqn.replay.graph_samplers import GraphUniformSampler
from tfdqn.replay.ring import SLOT_RECORDS, ReplayRing, chunk_part

_MIRRORED = SLOT_RECORDS  # slot records kept on both sides
_MIRRORED_COUNTERS = ("writes", "oldest", "cursor", "filled")      # what the in-graph predicate and draw read


class DeviceReplay(ReplayRing):
    def __init__(self, capacity: int, frame_shape: tuple, frame_dtype, stack_size: int = 1,
                 num_streams: int = 1, seed: int = 0, n_step: int = 1, gamma: float = 1.0,
                 clip_rewards: bool = False, sampler=None):
        self.graph_generator = tf.random.Generator.from_seed(seed)
        super().__init__(capacity, frame_shape, frame_dtype, stack_size, num_streams, seed, n_step, gamma,
                         clip_rewards, sampler or GraphUniformSampler())
        frames_shape = (capacity, *frame_shape)
        self._frames = None  # the host frame array is never touched (np.zeros pages stay uncommitted)
        self._variables = {"frames": tf.Variable(tf.zeros(frames_shape, tf.as_dtype(frame_dtype)), trainable=False)}
        for name in _MIRRORED + _MIRRORED_COUNTERS:
            self._variables[name] = tf.Variable(getattr(self, "_" + name), trainable=False)
        self._staged = []   # (slots, frames) written since the last flush, in order
        self._touched = []  # slots whose records changed since the last flush

    # ------------------------------------------------------------------ host side: staging and flushing

    def _store_frames(self, slots, frame) -> None:
        frame = np.broadcast_to(frame, (len(slots), *self._frame_shape))
        self._staged.append((slots.copy(), np.array(frame)))

    def _mark_written(self, slots: np.ndarray) -> None:
        super()._mark_written(slots)
        self._touched.append(slots)

    def flush(self) -> None:
        """Copy every frame and slot record changed since the last flush, and the counters, into the variables."""
        if self._staged:
            slots = np.concatenate([s for s, _ in self._staged])
            frames = np.concatenate([f for _, f in self._staged])
            _, last = np.unique(slots[::-1], return_index=True)  # a slot written twice keeps its newest write
            keep = len(slots) - 1 - last
            self._variables["frames"].scatter_nd_update(slots[keep, None], frames[keep])
        if self._touched:
            touched = np.unique(np.concatenate(self._touched))
            for name in _MIRRORED:
                self._variables[name].scatter_nd_update(touched[:, None], getattr(self, "_" + name)[touched])
        self._staged, self._touched = [], []
        self._assign_counters()
        self.sampler.flush()

    def sample_indices(self, batch_size: int, draws: int | None = None) -> np.ndarray:
        self.flush()  # a prioritized sampler's new slots enter its tree here
        return super().sample_indices(batch_size, draws)

    def _assign_counters(self) -> None:
        for name in _MIRRORED_COUNTERS:
            self._variables[name].assign(getattr(self, "_" + name))

    def _load_frames(self, slots) -> np.ndarray:
        self.flush()
        return tf.gather(self._variables["frames"], slots).numpy()

    def chunk_arrays(self, chunk: int) -> dict:
        self.flush()
        part = chunk_part(chunk)
        arrays = {name: getattr(self, "_" + name)[part] for name in _MIRRORED}
        return {"frames": self._variables["frames"][part].numpy(), **arrays}

    def load_chunk(self, chunk: int, arrays: dict) -> None:
        self._chunk_in_use[chunk] = True
        part = chunk_part(chunk)
        frames = self._variables["frames"]
        frames[part].assign(raw_frames(arrays, self._frame_shape, frames.dtype.as_numpy_dtype))
        for name in _MIRRORED:
            getattr(self, "_" + name)[part] = arrays[name]
            self._variables[name][part].assign(getattr(self, "_" + name)[part])

    @property
    def compression(self) -> str:
        return "none"  # the frames live in a tf.Variable as they are

    def memory_bytes(self) -> int:
        return self.nbytes

    def _zero_chunk(self, chunk: int) -> None:
        part = chunk_part(chunk)
        self.load_chunk(chunk, {"frames": np.zeros(self._variables["frames"][part].shape,
                                                   self._variables["frames"].dtype.as_numpy_dtype),
                                **{name: np.zeros_like(getattr(self, "_" + name)[part]) for name in _MIRRORED}})

    def counters(self) -> dict:
        """The host ring's counters and the in-graph sampler's RNG state, so a resumed run draws the
        batches the uninterrupted run would have drawn."""
        return {**super().counters(), "graph_rng": self.graph_generator.state.numpy().tolist()}

    def load_counters(self, counters: dict) -> None:
        super().load_counters(counters)
        self.graph_generator.state.assign(np.asarray(counters["graph_rng"], np.int64))
        self._assign_counters()

    # ------------------------------------------------------------------ graph side: sampling

    def _sampleable(self, slot: tf.Tensor) -> tf.Tensor:
        """`ReplayRing.is_sampleable` in TF ops, on the mirrored records."""
        v = self._variables
        stream, seq = tf.gather(v["stream"], slot), tf.gather(v["seq"], slot)
        history = tf.minimum(tf.cast(tf.gather(v["step_in_episode"], slot), tf.int64), self._stack_size - 1)
        return ((slot < v["filled"][0]) & (tf.gather(v["writes"], stream) - 1 - seq >= self._n_step)
                & (seq - history >= tf.gather(v["oldest"], stream)) & ~tf.gather(v["final_only"], slot))

    def draw_uniform_in_graph(self, size) -> tf.Tensor:
        """Slots drawn uniformly over every written slot (as `draw_uniform` draws)."""
        age = self.graph_generator.uniform([size], 0, self._variables["filled"][0], dtype=tf.int64)
        return (self._variables["cursor"][0] - 1 - age) % self.capacity

    def sample_in_graph(self, batch_size: int, beta=1.0) -> tuple:
        """A batch (observation, action, reward, bootstrap, next_observation, weight) and its slots, drawn
        by the sampler and rebuilt in TF ops; call `flush()` on the host first. Refused draws are redrawn,
        as on the host."""
        slot = self.sampler.draw_in_graph(batch_size, self.graph_generator)

        def redraw(slot, accepted):
            slot = tf.where(accepted, slot, self.sampler.redraw_in_graph(batch_size, self.graph_generator))
            return slot, self._sampleable(slot)

        slot, _ = tf.while_loop(lambda s, ok: ~tf.reduce_all(ok), redraw, (slot, self._sampleable(slot)))
        return (*self.gather_in_graph(slot)[:-1], self.sampler.weights_in_graph(slot, beta), slot)

    def audited_sample(self, sample):
        """`sample` (a `sample_in_graph` call) with each batch it draws checked by the replay audit on the host
        before the update may use it (`replay.audit`: a Python call inside the graph, for tests)."""
        def audited():
            *batch, weight, slot = sample()
            drawn = tf.stack([tf.cast(tf.gather(self._variables["stream"], slot), tf.int64),
                              tf.gather(self._variables["seq"], slot)])
            checked = tf.py_function(self._audit_check, [slot, drawn, *batch], tf.bool)
            with tf.control_dependencies([checked]):
                return tuple(tf.identity(x) for x in (*batch, weight, slot))
        return audited

    def _audit_check(self, *tensors) -> bool:
        self.audit.check(*(t.numpy() for t in tensors))
        return True

    def gather_in_graph(self, slot: tf.Tensor) -> tuple:
        """`ReplayRing.gather` in TF ops: one window of stack_size + n_step frames serves both stacks."""
        v, k, n = self._variables, self._stack_size, self._n_step
        columns = [slot]
        for _ in range(k - 1):
            columns.insert(0, tf.gather(v["prev"], columns[0]))
        for _ in range(n):
            columns.append(tf.gather(v["next"], columns[-1]))
        window_slots = tf.stack(columns, axis=1)
        window = tf.gather(v["frames"], window_slots)
        start = tf.cast(tf.gather(v["step_in_episode"], slot), tf.int64)
        before_start = tf.range(-(k - 1), n + 1, dtype=tf.int64)[None, :] < -start[:, None]
        window = tf.where(tf.reshape(before_start, [-1, k + n] + [1] * len(self._frame_shape)),
                          tf.zeros_like(window), window)
        reward, bootstrap, steps = self._returns_in_graph(window_slots[:, k - 1:k - 1 + n])
        # the next observation's stack ends m = steps slots after `slot`
        next_columns = steps[:, None] + tf.range(k, dtype=tf.int64)[None, :]
        next_observation = tf.gather(window, next_columns, axis=1, batch_dims=1)
        observation = window[:, :k]
        if k == 1:
            observation, next_observation = observation[:, 0], next_observation[:, 0]
        weight = tf.ones_like(reward)
        return observation, tf.gather(v["action"], slot), reward, bootstrap, next_observation, weight

    def _returns_in_graph(self, ahead: tf.Tensor) -> tuple:
        """`ReplayRing._returns` in TF ops: (reward, bootstrap, m) from the n slots `ahead` [B, n]."""
        v = self._variables
        rewards = tf.gather(v["reward"], ahead)
        rewards = tf.sign(rewards) if self._clip_rewards else rewards
        before_end = tf.cumsum(tf.cast(tf.gather(v["final_only"], ahead), tf.int32), axis=1) == 0
        steps = tf.reduce_sum(tf.cast(before_end, tf.int64), axis=1)  # m: 1..n
        discounts = tf.constant([self._gamma ** j for j in range(self._n_step)], tf.float32)
        reward = tf.reduce_sum(rewards * tf.cast(before_end, tf.float32) * discounts, axis=1)
        last = tf.gather(ahead, steps - 1, axis=1, batch_dims=1)
        terminated = tf.gather(v["terminated"], last)
        bootstrap = tf.where(terminated, 0.0, tf.pow(tf.cast(self._gamma, tf.float32), tf.cast(steps - 1, tf.float32)))
        return reward, bootstrap, steps
