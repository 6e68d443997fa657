"""Where the replay ring keeps its frames, one per slot: as they are, or each compressed losslessly.

Both stores answer `load` with the very frames `store` was given, so a run with compression is the same
run bit for bit. A saved chunk describes itself (raw frames, or a codec's bytes with each slot's length),
so either store restores a chunk either wrote: a checkpoint's compressed bytes are written and read as
they are, never compressed again.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from tfdqn.replay.frame_codec import EncodedFrames, decode_codes, decode_frames, make_codec

EMPTY_CODE_BYTES = sys.getsizeof(b"")  # a bytes object's own size besides its contents (CPython: 33)
SMALL_OBJECT_BYTES = 512  # CPython's allocator serves objects up to this size from pools, in steps of 16 bytes


def code_memory(length: int) -> int:
    """What a code of `length` bytes takes as a bytes object: its size rounded up to the allocator's 16-byte
    step, plus malloc's 16-byte header above SMALL_OBJECT_BYTES."""
    size = -(-(length + EMPTY_CODE_BYTES) // 16) * 16
    return size if size <= SMALL_OBJECT_BYTES else size + 16


def _frame_bytes(frame_shape: tuple, frame_dtype) -> int:
    return math.prod(frame_shape) * np.dtype(frame_dtype).itemsize


class RawFrames:
    """Frames as they are, in one array allocated up front (np.zeros: pages are committed as slots fill)."""

    codec = "none"

    def __init__(self, capacity: int, frame_shape: tuple, frame_dtype):
        self._frames = np.zeros((capacity, *frame_shape), frame_dtype)
        self._frame_shape, self._frame_dtype = tuple(frame_shape), np.dtype(frame_dtype)

    @staticmethod
    def bytes_needed(capacity: int, frame_shape: tuple, frame_dtype) -> int:
        return capacity * _frame_bytes(frame_shape, frame_dtype)

    def store(self, slots: np.ndarray, frames: np.ndarray | EncodedFrames) -> None:
        if isinstance(frames, EncodedFrames):
            frames = decode_frames(frames, self._frame_shape, self._frame_dtype)
        self._frames[slots] = frames

    def load(self, slots: np.ndarray) -> np.ndarray:
        """A fresh array [*slots.shape, *frame_shape] of the frames at `slots`."""
        return self._frames[slots]

    def code_bytes(self) -> int:
        """Bytes held beyond `bytes_needed`: none (the array is all of it)."""
        return 0

    def chunk_arrays(self, part: slice) -> dict:
        return {"frames": self._frames[part]}

    def load_chunk(self, part: slice, arrays) -> None:
        self._frames[part] = raw_frames(arrays, self._frame_shape, self._frame_dtype)

    def zero_chunk(self, part: slice) -> None:
        self._frames[part] = 0

    def forget(self, slots: np.ndarray) -> None:
        """The ring no longer reads `slots`: their frames may go (an array keeps them; it frees nothing)."""


class CompressedFrames:
    """Each frame compressed on its own with `codec` (frame_codec.py), held as one bytes object per slot.

    A slot costs an 8-byte reference (`bytes_needed`), and once written its code in a bytes object of its
    own (`code_memory`; `code_bytes` counts them as frames come and go)."""

    def __init__(self, capacity: int, frame_shape: tuple, frame_dtype, codec: str):
        self._frame_shape, self._frame_dtype = tuple(frame_shape), np.dtype(frame_dtype)
        self.codec = codec
        self._codec = make_codec(codec, _frame_bytes(frame_shape, frame_dtype))
        self._codes = np.full(capacity, b"", dtype=object)  # b"": never written (no codec makes an empty code)
        self._code_bytes = 0  # what the codes held take (code_memory of each)

    @staticmethod
    def bytes_needed(capacity: int, frame_shape: tuple, frame_dtype) -> int:
        """The references alone: what the frames themselves take depends on the game (`code_bytes`)."""
        return capacity * np.dtype(object).itemsize

    def store(self, slots: np.ndarray, frames: np.ndarray | EncodedFrames) -> None:
        """Compress `frames` into `slots`; codes of this store's codec (an actor's) are held as they come."""
        if isinstance(frames, EncodedFrames):
            if frames.codec == self.codec:
                for slot, code in zip(slots.tolist(), frames.codes.tolist()):
                    self._replace(slice(slot, slot + 1), [code])
                return
            frames = decode_frames(frames, self._frame_shape, self._frame_dtype)
        frames = np.broadcast_to(frames, (len(slots), *self._frame_shape))
        for slot, frame in zip(slots.tolist(), frames):
            code = self._codec.encode(np.ascontiguousarray(frame, self._frame_dtype))
            self._replace(slice(slot, slot + 1), [code])

    def load(self, slots: np.ndarray) -> np.ndarray:
        """A fresh array [*slots.shape, *frame_shape] of the frames at `slots`, each decoded straight into its
        place (a batch repeats few slots; sorting repeats out cost a second copy of the batch); slots never
        written read as zeros."""
        codes = self._codes[np.ravel(slots)].tolist()
        return decode_codes(self._codec, codes, self._frame_shape, self._frame_dtype, np.shape(slots))

    def code_bytes(self) -> int:
        """The codes held as bytes objects: the memory the frames take now beyond `bytes_needed`."""
        return self._code_bytes

    def _replace(self, part: slice, codes: list[bytes]) -> None:
        """Hold `codes` in the slots of `part`, counting what comes and goes."""
        self._code_bytes += _memory(codes) - _memory(self._codes[part].tolist())
        self._codes[part] = codes

    def chunk_arrays(self, part: slice) -> dict:
        """The chunk's codes as they are, one after another, with each slot's length (0: never written)."""
        codes = self._codes[part].tolist()
        return {"frame_codes": np.frombuffer(b"".join(codes), np.uint8),
                "frame_code_lengths": np.fromiter(map(len, codes), np.int64, len(codes)),
                "frame_codec": np.array(self.codec)}

    def load_chunk(self, part: slice, arrays) -> None:
        if "frame_codes" in arrays and str(arrays["frame_codec"]) == self.codec:
            codes = _split_codes(arrays)
        else:  # raw frames, or another codec's: compressed here
            frames = raw_frames(arrays, self._frame_shape, self._frame_dtype)
            codes = [self._codec.encode(frame) for frame in frames]
        self._replace(part, codes)

    def zero_chunk(self, part: slice) -> None:
        self._replace(part, [b""] * len(self._codes[part]))

    def forget(self, slots: np.ndarray) -> None:
        """Free the codes at `slots` (distinct)."""
        self._code_bytes -= _memory(self._codes[slots].tolist())
        self._codes[slots] = b""


def _memory(codes: list[bytes]) -> int:
    """What `codes` take (b"", never written, is one shared object: nothing)."""
    return sum(code_memory(len(code)) for code in codes if code)


def _split_codes(arrays) -> list[bytes]:
    """The codes of a saved chunk, one per slot (b"" where none was written)."""
    data = arrays["frame_codes"].tobytes()
    ends = np.cumsum(arrays["frame_code_lengths"]).tolist()
    return [data[start:end] for start, end in zip([0, *ends[:-1]], ends)]


def raw_frames(arrays, frame_shape: tuple, frame_dtype) -> np.ndarray:
    """A saved chunk's frames as they are: its raw array, or its codes decoded (unwritten slots zero)."""
    if "frame_codes" not in arrays:
        return arrays["frames"]
    codec = make_codec(str(arrays["frame_codec"]), _frame_bytes(frame_shape, frame_dtype))
    return decode_codes(codec, _split_codes(arrays), frame_shape, frame_dtype)


def make_frame_store(capacity: int, frame_shape: tuple, frame_dtype, compression: str) -> RawFrames | CompressedFrames:
    if compression == "none":
        return RawFrames(capacity, frame_shape, frame_dtype)
    return CompressedFrames(capacity, frame_shape, frame_dtype, compression)


def frame_store_bytes(capacity: int, frame_shape: tuple, frame_dtype, compression: str) -> int:
    """What `make_frame_store` allocates up front."""
    store = RawFrames if compression == "none" else CompressedFrames
    return store.bytes_needed(capacity, frame_shape, frame_dtype)
