"""The replay's frame stores: compressed frames come back exactly as stored, are counted as they come and go,
and a ring holding them samples, saves and restores as the raw ring does, draw for draw."""

import json
import subprocess
import sys

import cramjam
import numpy as np
import pytest

from tests.conftest import REPO

from tfdqn.config import EnvConfig
from tfdqn.envs.atari_vector import AtariVector
from tfdqn.replay.frame_codec import make_codec
from tfdqn.replay.frame_store import CompressedFrames, RawFrames, code_memory
from tfdqn.replay.ring import ReplayRing

CODECS = ("zstd", "lz4")


@pytest.fixture(scope="module")
def breakout_frames() -> np.ndarray:
    """600 84x84 frames of random Breakout play through the trainer's envs, and 40 of uniform noise (which no
    codec shrinks), some ending in zero bytes."""
    env = AtariVector(EnvConfig(id="Breakout", fire_on_reset=False), 1, seed=1)
    rng = np.random.default_rng(0)
    frames = [env.reset()[0]]
    for _ in range(599):
        frames.append(env.step(rng.integers(4, size=1)).next_frames[0])
    noise = rng.integers(0, 256, size=(40, 84, 84), dtype=np.uint8)
    noise[::2, -1, -8:] = 0
    return np.concatenate([np.stack(frames), noise])


@pytest.mark.parametrize("codec", CODECS)
def test_every_frame_decodes_to_its_bytes_and_game_frames_shrink(breakout_frames, codec):
    coder = make_codec(codec, breakout_frames[0].nbytes)
    codes = [coder.encode(frame) for frame in breakout_frames]
    out = np.empty(breakout_frames[0].nbytes, np.uint8)
    for frame, code in zip(breakout_frames, codes):
        coder.decode_into(code, out)
        assert out.tobytes() == frame.tobytes()
    game = np.mean([len(code) for code in codes[:600]])
    assert game < breakout_frames[0].nbytes / 10, game  # docs/experiments/replay.md: 300 (zstd) and 411 (lz4) of 7,056


# An 84x84 frame (a bar of 144 on rows 40-43, columns 10-73; row 80 counting 0..83) as python-lz4 4.4's
# lz4.block.compress(frame, store_size=False) coded it, fixed here: codes a checkpoint holds must decode through
# cramjam, whatever the encoder's version makes of the frame now.
PYTHON_LZ4_CODE = bytes.fromhex(
    "1f000100ffffffffffffffffffffffffff231f9001002c0f690d010f53002c0f5400aa0f0200ffffffffffffffffffffffbfff44"
    "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334"
    "35363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152531b0ce4500000000000")


def test_saved_lz4_codes_decode_to_their_frame():
    """A checkpoint's saved codes are restored as they are, so lz4 blocks written before must decode."""
    frame = np.zeros((84, 84), np.uint8)
    frame[40:44, 10:74] = 144
    frame[80] = np.arange(84)
    out = np.empty(frame.nbytes, np.uint8)
    make_codec("lz4", frame.nbytes).decode_into(PYTHON_LZ4_CODE, out)
    np.testing.assert_array_equal(out.reshape(84, 84), frame)
    codec = make_codec("lz4", frame.nbytes)
    with pytest.raises(cramjam.DecompressionError):
        codec.decode_into(PYTHON_LZ4_CODE[:-20], out)
    with pytest.raises(ValueError, match="an lz4 code decoded to 84 bytes; allowed: a frame's 7056"):
        codec.decode_into(make_codec("lz4", 84).encode(frame[80]), out)


@pytest.mark.parametrize("codec", CODECS)
def test_a_compressed_store_loads_what_the_raw_store_loads_and_counts_its_bytes(breakout_frames, codec):
    capacity, shape = 256, breakout_frames.shape[1:]
    raw, compressed = RawFrames(capacity, shape, np.uint8), CompressedFrames(capacity, shape, np.uint8, codec)
    rng = np.random.default_rng(1)
    for start in range(0, len(breakout_frames), 32):  # wraps twice: slots are overwritten
        slots = (np.arange(start, start + 32) * 7) % capacity
        frames = breakout_frames[start:start + 32]
        raw.store(slots[:len(frames)], frames)
        compressed.store(slots[:len(frames)], frames)
        drawn = rng.integers(capacity, size=(32, 7))  # a batch's windows, with repeats and unwritten slots
        np.testing.assert_array_equal(compressed.load(drawn), raw.load(drawn))
    codes = [code for code in compressed._codes.tolist() if code]
    assert compressed.code_bytes() == sum(code_memory(len(code)) for code in codes)
    assert RawFrames.bytes_needed(capacity, shape, np.uint8) == capacity * 7056 and raw.code_bytes() == 0
    assert CompressedFrames.bytes_needed(capacity, shape, np.uint8) == capacity * 8


@pytest.mark.parametrize("codec", CODECS)
def test_saved_chunks_restore_into_either_store_and_zeroing_forgets_their_bytes(breakout_frames, codec, tmp_path):
    capacity, shape, part = 300, breakout_frames.shape[1:], slice(100, 200)
    source = CompressedFrames(capacity, shape, np.uint8, codec)
    source.store(np.arange(150), breakout_frames[:150])  # the chunk is half written
    np.savez(tmp_path / "chunk.npz", **source.chunk_arrays(part))  # as checkpoint.py saves a chunk
    expected = source.load(np.arange(100, 200))
    assert not expected[50:].any()
    other = "lz4" if codec == "zstd" else "zstd"
    for target in (RawFrames(capacity, shape, np.uint8), CompressedFrames(capacity, shape, np.uint8, codec),
                   CompressedFrames(capacity, shape, np.uint8, other)):
        with np.load(tmp_path / "chunk.npz") as arrays:
            target.load_chunk(part, arrays)
        np.testing.assert_array_equal(target.load(np.arange(100, 200)), expected)
    same = CompressedFrames(capacity, shape, np.uint8, codec)
    with np.load(tmp_path / "chunk.npz") as arrays:
        same.load_chunk(part, arrays)
    assert same._codes[100:150].tolist() == source._codes[100:150].tolist()  # the saved bytes, not recompressed
    raw = RawFrames(capacity, shape, np.uint8)
    raw.store(np.arange(150), breakout_frames[:150])
    compressed = CompressedFrames(capacity, shape, np.uint8, codec)
    compressed.load_chunk(part, raw.chunk_arrays(part))  # a raw checkpoint resumed with compression on
    np.testing.assert_array_equal(compressed.load(np.arange(100, 200)), expected)
    before = compressed.code_bytes()
    compressed.zero_chunk(part)
    assert compressed.code_bytes() == 0 < before and not compressed.load(np.arange(capacity)).any()


def _play(rings, frames, steps, seed):
    """The same random play of 3 streams (ends and cuts included) into each of `rings`."""
    rng = np.random.default_rng(seed)
    for t in range(steps):
        streams = np.sort(rng.choice(3, size=rng.integers(1, 4), replace=False))
        frame = frames[(t * 3 + streams) % len(frames)]
        terminated, truncated = rng.random(len(streams)) < 0.03, rng.random(len(streams)) < 0.02
        final = frames[(t * 5 + streams) % len(frames)]
        for ring in rings:
            ring.add(frame, np.full(len(streams), t % 4), np.full(len(streams), t % 3 - 1.0),
                     terminated, truncated & ~terminated, final, streams=streams)


@pytest.mark.parametrize("codec", CODECS)
def test_a_ring_with_compressed_frames_draws_the_batches_of_the_raw_ring(breakout_frames, codec, tmp_path):
    """Prioritized or not, through wraps, ends and a save and restore by chunks: the same batches, draw for draw."""
    from tfdqn.replay.samplers import PrioritizedSampler

    def ring(compression, seed=3):
        return ReplayRing(500, (84, 84), np.uint8, 4, num_streams=3, seed=seed, n_step=3, gamma=0.99,
                          clip_rewards=True, sampler=PrioritizedSampler(0.6, 1e-6), compression=compression)

    raw, compressed = ring("none"), ring(codec)
    _play([raw, compressed], breakout_frames, 900, seed=4)
    assert len(raw) == len(compressed) > 300
    for _ in range(5):
        for a, b in zip(raw.sample_stacked(2, 32, beta=0.5), compressed.sample_stacked(2, 32, beta=0.5)):
            np.testing.assert_array_equal(a, b)
    saved = {}
    for chunk in compressed.dirty_chunks():
        np.savez(tmp_path / f"{chunk}.npz", **compressed.chunk_arrays(chunk))
    counters = json.loads(json.dumps(compressed.counters()))
    restored = ring(codec, seed=99)
    for chunk in range(restored.num_chunks):
        with np.load(tmp_path / f"{chunk}.npz") as arrays:
            restored.load_chunk(chunk, arrays)
            saved[chunk] = arrays["frame_codes"].nbytes
    restored.load_counters(counters)
    restored.sampler.load_arrays(compressed.sampler.arrays())
    assert restored.memory_bytes() == compressed.memory_bytes() < raw.memory_bytes() / 5
    for a, b in zip(raw.sample_stacked(2, 32, beta=0.5), restored.sample_stacked(2, 32, beta=0.5)):
        np.testing.assert_array_equal(a, b)
    assert sum(saved.values()) < raw.capacity * 7056 / 5  # the checkpoint carries the codes


_MEMORY_PROBE = """
import json, sys
import numpy as np, psutil
from tfdqn.config import EnvConfig
from tfdqn.envs.atari_vector import AtariVector
from tfdqn.replay.frame_store import CompressedFrames

env = AtariVector(EnvConfig(id="Breakout"), 1, seed=2)
rng = np.random.default_rng(0)
frames = np.stack([env.reset()[0]] + [env.step(rng.integers(4, size=1)).next_frames[0] for _ in range(999)])
store = CompressedFrames(60_000, (84, 84), np.uint8, sys.argv[1])
before = psutil.Process().memory_info().rss
for start in range(0, 60_000, 100):
    store.store(np.arange(start, start + 100), frames[start % 1000:start % 1000 + 100])
print(json.dumps([psutil.Process().memory_info().rss - before, store.code_bytes()]))
"""


@pytest.mark.parametrize("codec", CODECS)
def test_the_codes_counted_are_the_memory_they_take(codec):
    """The budget's figure against the process's: 60,000 Breakout frames stored, in a fresh process."""
    result = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, codec], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    grown, counted = json.loads(result.stdout)
    assert 0.9 * grown < counted < 1.1 * grown + 2**20, (grown, counted)
