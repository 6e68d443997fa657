"""MP4 recording of rendered RGB frames with OpenCV, written through `tfdqn.atomic.atomic_path`."""

import contextlib
import pathlib

import cv2
import numpy as np

from tfdqn.atomic import atomic_path
from tfdqn.errors import UserError


class VideoRecorder:
    """Writes the frames of the first episode it sees (one per env step); the file appears at `path`
    only when `close()` finishes it. A failed write, or leaving a `with` block by an exception,
    leaves no file, partial or temporary."""

    def __init__(self, path: pathlib.Path, fps: int = 30):
        self.path = pathlib.Path(path)
        self._fps = fps
        self._file = None  # the atomic_path context, entered at the first frame
        self._writer = None
        self._done = False
        self.frames = 0

    def capture(self, env, info: dict) -> None:
        if self._done:
            return
        self._done = "episode" in info
        rgb = env.render()
        if rgb is None:
            return
        try:
            if self._writer is None:
                self._open(*rgb.shape[:2])
            self._writer.write(cv2.cvtColor(np.asarray(rgb, dtype=np.uint8), cv2.COLOR_RGB2BGR))
        except BaseException as error:
            self._discard(error)
            raise
        self.frames += 1

    def _open(self, height: int, width: int) -> None:
        self._file = contextlib.ExitStack()
        # The temporary name keeps the .mp4 ending: OpenCV picks the container from it.
        tmp = self._file.enter_context(atomic_path(self.path, suffix=".part.mp4"))
        self._writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*"mp4v"), self._fps, (width, height))
        if not self._writer.isOpened():
            raise UserError(f"--video {str(self.path)!r} cannot be written; allowed: a writable .mp4 path")

    def _discard(self, error: BaseException) -> None:
        """Release the encoder and delete what it wrote so far."""
        if self._writer is not None:
            self._writer.release()
        if self._file is not None:
            self._file.__exit__(type(error), error, error.__traceback__)
        self._writer = self._file = None

    def close(self) -> None:
        """Finish the file and move it into place (nothing is written if no frame came)."""
        if self._writer is not None:
            self._writer.release()
            self._writer = None
            self._file.close()
            self._file = None

    def __enter__(self) -> "VideoRecorder":
        return self

    def __exit__(self, exc_type, error, traceback) -> None:
        if error is None:
            self.close()
        else:
            self._discard(error)
