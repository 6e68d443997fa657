"""The replay ring with its frames and slot records in tf.Variables, sampled inside the update graph.

`replay.device: accelerator` selects it. On a GPU the frames then live in GPU memory and a fused
`update_from_replay(k)` call draws all k batches itself: no Python and no host-to-device batch copy
between updates. The host ring's bookkeeping (cursors, episode positions, the one predicate) is kept
and mirrored: `add` stages each step on the host, and `flush()` scatters what was staged into the
variables in one call per array, just before the learner needs them.

It is a `ReplayRing`: the host API (`sample`, `gather`, `is_sampleable`, checkpoint chunks) behaves
identically, so the same replay tests run on both. The in-graph sampler draws from its own seeded
`tf.random.Generator`, so its batches differ from the host ring's NumPy draws for the same seed.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfdqn.replay.ring import CHUNK_SLOTS, PER_SLOT, ReplayRing

_MIRRORED = tuple(name for name in PER_SLOT if name != "frames")  # slot records kept on both sides


class DeviceReplay(ReplayRing):
    def __init__(self, capacity: int, frame_shape: tuple, frame_dtype, stack_size: int = 1,
                 num_streams: int = 1, seed: int = 0):
        super().__init__(capacity, frame_shape, frame_dtype, stack_size, num_streams, seed)
        frames_shape = self._frames.shape
        self._frames = None  # the host frame array is never touched (np.zeros pages stay uncommitted)
        self._variables = {"frames": tf.Variable(tf.zeros(frames_shape, tf.as_dtype(frame_dtype)), trainable=False)}
        for name in _MIRRORED:
            self._variables[name] = tf.Variable(getattr(self, "_" + name), trainable=False)
        self._variables["cursor"] = tf.Variable(self._cursor, trainable=False)
        self._variables["filled"] = tf.Variable(self._filled, trainable=False)
        self._staged = []  # (streams, slots, frames) written since the last flush
        self._generator = tf.random.Generator.from_seed(seed)

    # ------------------------------------------------------------------ host side: staging and flushing

    def _store_frames(self, streams, slot, frame) -> None:
        streams, slot = np.broadcast_arrays(np.asarray(streams), np.asarray(slot))
        frame = np.broadcast_to(frame, (len(streams), *self._frame_shape))
        self._staged.append((streams.copy(), slot.copy(), np.array(frame)))

    def flush(self) -> None:
        """Copy every slot written since the last flush, and the cursors, into the variables."""
        if not self._staged:
            return
        streams = np.concatenate([s for s, _, _ in self._staged])
        slots = np.concatenate([s for _, s, _ in self._staged])
        frames = np.concatenate([f for _, _, f in self._staged])
        self._staged = []
        flat = streams * self._slots + slots
        _, last = np.unique(flat[::-1], return_index=True)  # a slot written twice keeps its newest write
        keep = len(flat) - 1 - last
        index = np.stack([streams[keep], slots[keep]], axis=1)
        self._variables["frames"].scatter_nd_update(index, frames[keep])
        for name in _MIRRORED:
            self._variables[name].scatter_nd_update(index, getattr(self, "_" + name)[streams[keep], slots[keep]])
        self._variables["cursor"].assign(self._cursor)
        self._variables["filled"].assign(self._filled)

    def _load_frames(self, streams, slots) -> np.ndarray:
        self.flush()
        streams, slots = np.broadcast_arrays(streams, slots)
        return tf.gather_nd(self._variables["frames"], np.stack([streams, slots], axis=-1)).numpy()

    def chunk_arrays(self, chunk: int) -> dict:
        self.flush()
        part = slice(chunk * CHUNK_SLOTS, (chunk + 1) * CHUNK_SLOTS)
        arrays = {name: getattr(self, "_" + name)[:, part] for name in _MIRRORED}
        return {"frames": self._variables["frames"][:, part].numpy(), **arrays}

    def load_chunk(self, chunk: int, arrays: dict) -> None:
        part = slice(chunk * CHUNK_SLOTS, (chunk + 1) * CHUNK_SLOTS)
        self._variables["frames"][:, part].assign(arrays["frames"])
        for name in _MIRRORED:
            getattr(self, "_" + name)[:, part] = arrays[name]
            self._variables[name][:, part].assign(getattr(self, "_" + name)[:, part])

    def clear_chunk(self, chunk: int) -> None:
        part = slice(chunk * CHUNK_SLOTS, (chunk + 1) * CHUNK_SLOTS)
        self.load_chunk(chunk, {"frames": np.zeros(self._variables["frames"][:, part].shape,
                                                   self._variables["frames"].dtype.as_numpy_dtype),
                                **{name: np.zeros_like(getattr(self, "_" + name)[:, part]) for name in _MIRRORED}})

    def counters(self) -> dict:
        """The host ring's counters and the in-graph sampler's RNG state, so a resumed run draws the
        batches the uninterrupted run would have drawn."""
        return {**super().counters(), "graph_rng": self._generator.state.numpy().tolist()}

    def load_counters(self, counters: dict) -> None:
        super().load_counters(counters)
        self._generator.state.assign(np.asarray(counters["graph_rng"], np.int64))
        self._variables["cursor"].assign(self._cursor)
        self._variables["filled"].assign(self._filled)

    # ------------------------------------------------------------------ graph side: sampling

    def _sampleable(self, stream: tf.Tensor, slot: tf.Tensor) -> tf.Tensor:
        """`ReplayRing.is_sampleable` in TF ops, on the mirrored records."""
        v = self._variables
        at = tf.stack([stream, slot], axis=1)
        cursor, filled = tf.gather(v["cursor"], stream), tf.gather(v["filled"], stream)
        age = (cursor - 1 - slot) % self._slots
        history = tf.minimum(tf.cast(tf.gather_nd(v["step_in_episode"], at), tf.int64), self._stack_size - 1)
        return (age >= 1) & (age + history < filled) & ~tf.gather_nd(v["final_only"], at)

    def _draw(self, size: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Uniform over every written slot of every stream (as `sample_indices` draws)."""
        filled = self._variables["filled"]
        ends = tf.cumsum(filled)
        draw = self._generator.uniform([size], 0, ends[-1], dtype=tf.int64)
        stream = tf.searchsorted(ends, draw, side="right", out_type=tf.int64)
        age = draw - (tf.gather(ends, stream) - tf.gather(filled, stream))
        return stream, (tf.gather(self._variables["cursor"], stream) - 1 - age) % self._slots

    def sample_in_graph(self, batch_size: int) -> tuple:
        """A batch (observation, action, reward, discount, next_observation) drawn and rebuilt in TF ops;
        call `flush()` on the host first. Refused draws are redrawn, as on the host."""
        stream, slot = self._draw(batch_size)
        accepted = self._sampleable(stream, slot)

        def redraw(stream, slot, accepted):
            new_stream, new_slot = self._draw(batch_size)
            stream, slot = tf.where(accepted, stream, new_stream), tf.where(accepted, slot, new_slot)
            return stream, slot, self._sampleable(stream, slot)

        stream, slot, _ = tf.while_loop(lambda s, t, ok: ~tf.reduce_all(ok), redraw, (stream, slot, accepted))
        return self.gather_in_graph(stream, slot)

    def gather_in_graph(self, stream: tf.Tensor, slot: tf.Tensor) -> tuple:
        """`ReplayRing.gather` in TF ops: one window of stack_size + 1 frames serves both stacks."""
        v, k = self._variables, self._stack_size
        back = tf.range(k - 1, -2, -1, dtype=tf.int64)
        slots = (slot[:, None] - back) % self._slots
        window = tf.gather_nd(v["frames"], tf.stack([tf.broadcast_to(stream[:, None], tf.shape(slots)), slots], -1))
        at = tf.stack([stream, slot], axis=1)
        start = tf.cast(tf.gather_nd(v["step_in_episode"], at), tf.int64)
        before_start = back[None, :] > start[:, None]
        window = tf.where(tf.reshape(before_start, [-1, k + 1] + [1] * len(self._frame_shape)),
                          tf.zeros_like(window), window)
        if k == 1:
            observation, next_observation = window[:, 0], window[:, 1]
        else:
            observation, next_observation = window[:, :k], window[:, 1:]
        discount = 1.0 - tf.cast(tf.gather_nd(v["terminated"], at), tf.float32)
        return (observation, tf.gather_nd(v["action"], at), tf.gather_nd(v["reward"], at), discount,
                next_observation)
