"""Lossless codecs for single replay frames: `replay.compression` names one.

Each frame is compressed on its own, so any slot decodes without its neighbours and a stack is rebuilt
from decoded frames exactly as from raw ones (docs/replay.md). zstd keeps the smaller codes, lz4 decodes
faster.

A codec object holds a compression and a decompression context, neither safe to share between threads:
each thread that encodes or decodes makes its own with `make_codec`.
"""

from __future__ import annotations

import lz4.block
import numpy as np
import zstandard

CODECS = ("none", "zstd", "lz4")


class Zstd:
    """Zstandard at level 1."""

    name = "zstd"

    def __init__(self, frame_bytes: int):
        self._compressor = zstandard.ZstdCompressor(level=1, write_content_size=True, write_checksum=False)
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame_bytes = frame_bytes

    def encode(self, frame: np.ndarray) -> bytes:
        """The code in a bytes object of its own size: zstd's is its output buffer shrunk in place, which
        leaves the rest of that 7 KB allocation as a hole no later buffer fits (about 4 KB per frame held)."""
        return bytes(memoryview(self._compressor.compress(frame.tobytes())))

    def decode(self, code: bytes) -> bytes:
        return self._decompressor.decompress(code, max_output_size=self._frame_bytes)


class Lz4:
    """LZ4's block format: the fastest to decode, larger codes than zstd's."""

    name = "lz4"

    def __init__(self, frame_bytes: int):
        self._block = lz4.block
        self._frame_bytes = frame_bytes

    def encode(self, frame: np.ndarray) -> bytes:
        return self._block.compress(frame.tobytes(), store_size=False)

    def decode(self, code: bytes) -> bytes:
        return self._block.decompress(code, uncompressed_size=self._frame_bytes)


def make_codec(name: str, frame_bytes: int) -> Zstd | Lz4:
    """The codec `name` (not "none") for frames of `frame_bytes` bytes."""
    codecs = {"zstd": Zstd, "lz4": Lz4}
    if name not in codecs:
        raise ValueError(f"replay.compression = {name!r}; allowed: {', '.join(CODECS)}")
    return codecs[name](frame_bytes)
