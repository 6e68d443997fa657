"""Lossless codecs for single replay frames: `replay.compression` names one.

Each frame is compressed on its own, so any slot decodes without its neighbours and a stack is rebuilt
from decoded frames exactly as from raw ones (docs/experiments/replay.md). zstd keeps the smaller codes, lz4 decodes
faster. A codec decodes into a row of the caller's array (`decode_into`): a batch of 224 frames decoded to
bytes objects first, then copied, spent more time in the allocator than in decoding (docs/experiments/replay.md).

A codec object holds a compression and a decompression context, neither safe to share between threads:
each thread that encodes or decodes makes its own with `make_codec`. A codec's library is imported when
the codec is made, so `tfdqn.config`, which reads `CODECS`, imports on a host that has neither (the jax-only
host tools/run_programs.py runs on).
"""

from __future__ import annotations

import math

import numpy as np

CODECS = ("none", "zstd", "lz4")


class Zstd:
    """Zstandard at level 1."""

    name = "zstd"

    def __init__(self, frame_bytes: int):
        import zstandard

        self._compressor = zstandard.ZstdCompressor(level=1, write_content_size=True, write_checksum=False)
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame_bytes = frame_bytes

    def encode(self, frame: np.ndarray) -> bytes:
        """The code in a bytes object of its own size: zstd's is its output buffer shrunk in place, which
        leaves the rest of that 7 KB allocation as a hole no later buffer fits (about 4 KB per frame held)."""
        return bytes(memoryview(self._compressor.compress(frame.tobytes())))

    def decode_into(self, code: bytes, out: np.ndarray) -> None:
        """`code` decoded into `out`, a C-contiguous uint8 array of the frame's bytes (zstandard decodes
        only to a bytes object of its own, which is copied; it is freed at once, so its memory is reused)."""
        out[:] = np.frombuffer(self._decompressor.decompress(code, max_output_size=self._frame_bytes), np.uint8)


class Lz4:
    """LZ4's block format without a size prefix (the frame's size is known): the fastest to decode, larger
    codes than zstd's. python-lz4 (the reference liblz4) encodes: cramjam's encoder left MsPacman's frames 9%
    larger (2,043 against 1,859 bytes); cramjam decodes, straight into the caller's buffer, which python-lz4
    cannot."""

    name = "lz4"

    def __init__(self, frame_bytes: int):
        import cramjam
        import lz4.block

        self._compress, self._decompress_into = lz4.block.compress, cramjam.lz4.decompress_block_into
        self._frame_bytes = frame_bytes

    def encode(self, frame: np.ndarray) -> bytes:
        return self._compress(np.ascontiguousarray(frame), store_size=False)

    def decode_into(self, code: bytes, out: np.ndarray) -> None:
        """`code` decoded into `out`, a C-contiguous uint8 array of the frame's bytes."""
        written = self._decompress_into(code, out)
        if written != self._frame_bytes:
            raise ValueError(f"an lz4 code decoded to {written} bytes; allowed: a frame's {self._frame_bytes}")


def make_codec(name: str, frame_bytes: int) -> Zstd | Lz4:
    """The codec `name` (not "none") for frames of `frame_bytes` bytes."""
    codecs = {"zstd": Zstd, "lz4": Lz4}
    if name not in codecs:
        raise ValueError(f"replay.compression = {name!r}; allowed: {', '.join(CODECS)}")
    return codecs[name](frame_bytes)


class EncodedFrames:
    """Frames compressed one by one where they were made (an actor's process), so that the ring stores the
    codes as they come, never coding a frame twice: `codes` is an object array of bytes, one per frame, of
    any leading shape. Indexing takes frames as an array's leading axes would. Pickles as its two fields."""

    __slots__ = ("codec", "codes")

    def __init__(self, codec: str, codes: np.ndarray):
        self.codec, self.codes = codec, codes

    @property
    def shape(self) -> tuple:
        return self.codes.shape

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, index) -> "EncodedFrames":
        return EncodedFrames(self.codec, self.codes[index])

    def __getstate__(self):
        return self.codec, self.codes

    def __setstate__(self, state):
        self.codec, self.codes = state

    def nbytes(self) -> int:
        """The codes' bytes (what they add to a pickled chunk)."""
        return sum(map(len, self.codes.ravel().tolist()))


def encode_frames(codec: Zstd | Lz4, frames: np.ndarray, frame_ndim: int) -> EncodedFrames:
    """Each frame of `frames` (its last `frame_ndim` axes are one frame) compressed with `codec`."""
    leading = frames.shape[:frames.ndim - frame_ndim]
    flat = frames.reshape(-1, *frames.shape[frames.ndim - frame_ndim:])
    codes = np.empty(len(flat), dtype=object)
    codes[:] = [codec.encode(frame) for frame in flat]
    return EncodedFrames(codec.name, codes.reshape(leading))


def decode_codes(codec: Zstd | Lz4, codes: list[bytes], frame_shape: tuple, frame_dtype,
                 leading: tuple | None = None) -> np.ndarray:
    """A fresh array [*leading, *frame_shape] (leading: one axis of len(codes)) of `codes` decoded in order,
    each straight into its row; b"" (a slot never written) gives a zero frame."""
    out = np.empty((*(leading or (len(codes),)), *frame_shape), frame_dtype)
    rows = out.reshape(len(codes), -1).view(np.uint8)
    for row, code in zip(rows, codes):
        if code:
            codec.decode_into(code, row)
        else:
            row[:] = 0
    return out


def decode_frames(frames: EncodedFrames, frame_shape: tuple, frame_dtype) -> np.ndarray:
    """The frames `frames` holds, as an array [*frames.shape, *frame_shape]."""
    codec = make_codec(frames.codec, math.prod(frame_shape) * np.dtype(frame_dtype).itemsize)
    return decode_codes(codec, frames.codes.ravel().tolist(), frame_shape, frame_dtype, frames.shape)
