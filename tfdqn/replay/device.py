"""The replay ring with its frames and slot records in tf.Variables, sampled inside the update graph.

`replay.device: accelerator` selects it. On a GPU the frames then live in GPU memory and a fused
`update_from_replay(k)` call draws all k batches itself: no Python and no host-to-device batch copy
between updates. The host ring's bookkeeping (the shared ring, stream links, the one predicate) is
kept and mirrored: `add` stages each step on the host, and `flush()` scatters what changed into the
variables in one call per array, just before the learner needs them.

It is a `ReplayRing`: the host API (`sample`, `gather`, `is_sampleable`, checkpoint chunks) behaves
identically, so the same replay tests run on both. The in-graph sampler draws from its own seeded
`tf.random.Generator`, so its batches differ from the host ring's NumPy draws for the same seed.
One-step returns only (the config refuses learner.n_step > 1 with it).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfdqn.replay.ring import CHUNK_SLOTS, PER_SLOT, ReplayRing

_MIRRORED = tuple(name for name in PER_SLOT if name != "frames")  # slot records kept on both sides
_MIRRORED_COUNTERS = ("writes", "oldest", "cursor", "filled")      # what the in-graph predicate and draw read


class DeviceReplay(ReplayRing):
    def __init__(self, capacity: int, frame_shape: tuple, frame_dtype, stack_size: int = 1,
                 num_streams: int = 1, seed: int = 0):
        super().__init__(capacity, frame_shape, frame_dtype, stack_size, num_streams, seed)
        frames_shape = self._frames.shape
        self._frames = None  # the host frame array is never touched (np.zeros pages stay uncommitted)
        self._variables = {"frames": tf.Variable(tf.zeros(frames_shape, tf.as_dtype(frame_dtype)), trainable=False)}
        for name in _MIRRORED + _MIRRORED_COUNTERS:
            self._variables[name] = tf.Variable(getattr(self, "_" + name), trainable=False)
        self._staged = []   # (slots, frames) written since the last flush, in order
        self._touched = []  # slots whose records changed since the last flush
        self._generator = tf.random.Generator.from_seed(seed)

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

    def _assign_counters(self) -> None:
        for name in _MIRRORED_COUNTERS:
            self._variables[name].assign(getattr(self, "_" + name))

    def _load_frames(self, slots) -> np.ndarray:
        self.flush()
        return tf.gather(self._variables["frames"], slots).numpy()

    def chunk_arrays(self, chunk: int) -> dict:
        self.flush()
        part = slice(chunk * CHUNK_SLOTS, (chunk + 1) * CHUNK_SLOTS)
        arrays = {name: getattr(self, "_" + name)[part] for name in _MIRRORED}
        return {"frames": self._variables["frames"][part].numpy(), **arrays}

    def load_chunk(self, chunk: int, arrays: dict) -> None:
        part = slice(chunk * CHUNK_SLOTS, (chunk + 1) * CHUNK_SLOTS)
        self._variables["frames"][part].assign(arrays["frames"])
        for name in _MIRRORED:
            getattr(self, "_" + name)[part] = arrays[name]
            self._variables[name][part].assign(getattr(self, "_" + name)[part])

    def clear_chunk(self, chunk: int) -> None:
        part = slice(chunk * CHUNK_SLOTS, (chunk + 1) * CHUNK_SLOTS)
        self.load_chunk(chunk, {"frames": np.zeros(self._variables["frames"][part].shape,
                                                   self._variables["frames"].dtype.as_numpy_dtype),
                                **{name: np.zeros_like(getattr(self, "_" + name)[part]) for name in _MIRRORED}})

    def counters(self) -> dict:
        """The host ring's counters and the in-graph sampler's RNG state, so a resumed run draws the
        batches the uninterrupted run would have drawn."""
        return {**super().counters(), "graph_rng": self._generator.state.numpy().tolist()}

    def load_counters(self, counters: dict) -> None:
        super().load_counters(counters)
        self._generator.state.assign(np.asarray(counters["graph_rng"], np.int64))
        self._assign_counters()

    # ------------------------------------------------------------------ graph side: sampling

    def _sampleable(self, slot: tf.Tensor) -> tf.Tensor:
        """`ReplayRing.is_sampleable` in TF ops (one-step), on the mirrored records."""
        v = self._variables
        stream, seq = tf.gather(v["stream"], slot), tf.gather(v["seq"], slot)
        history = tf.minimum(tf.cast(tf.gather(v["step_in_episode"], slot), tf.int64), self._stack_size - 1)
        return ((slot < v["filled"][0]) & (tf.gather(v["writes"], stream) - 1 - seq >= 1)
                & (seq - history >= tf.gather(v["oldest"], stream)) & ~tf.gather(v["final_only"], slot))

    def _draw(self, size) -> tf.Tensor:
        """Slots drawn uniformly over every written slot (as `sample_indices` draws)."""
        age = self._generator.uniform([size], 0, self._variables["filled"][0], dtype=tf.int64)
        return (self._variables["cursor"][0] - 1 - age) % self.capacity

    def sample_in_graph(self, batch_size: int) -> tuple:
        """A batch (observation, action, reward, bootstrap, next_observation) drawn and rebuilt in TF ops;
        call `flush()` on the host first. Refused draws are redrawn, as on the host."""
        slot = self._draw(batch_size)

        def redraw(slot, accepted):
            slot = tf.where(accepted, slot, self._draw(batch_size))
            return slot, self._sampleable(slot)

        slot, _ = tf.while_loop(lambda s, ok: ~tf.reduce_all(ok), redraw, (slot, self._sampleable(slot)))
        return self.gather_in_graph(slot)

    def gather_in_graph(self, slot: tf.Tensor) -> tuple:
        """`ReplayRing.gather` (one-step) in TF ops: one window of stack_size + 1 frames serves both stacks."""
        v, k = self._variables, self._stack_size
        columns = [slot]
        for _ in range(k - 1):
            columns.insert(0, tf.gather(v["prev"], columns[0]))
        columns.append(tf.gather(v["next"], slot))
        window = tf.gather(v["frames"], tf.stack(columns, axis=1))
        start = tf.cast(tf.gather(v["step_in_episode"], slot), tf.int64)
        before_start = tf.range(-(k - 1), 2, dtype=tf.int64)[None, :] < -start[:, None]
        window = tf.where(tf.reshape(before_start, [-1, k + 1] + [1] * len(self._frame_shape)),
                          tf.zeros_like(window), window)
        if k == 1:
            observation, next_observation = window[:, 0], window[:, 1]
        else:
            observation, next_observation = window[:, :k], window[:, 1:]
        bootstrap = 1.0 - tf.cast(tf.gather(v["terminated"], slot), tf.float32)
        return observation, tf.gather(v["action"], slot), tf.gather(v["reward"], slot), bootstrap, next_observation
