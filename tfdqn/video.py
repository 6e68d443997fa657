"""MP4 recording of rendered RGB frames with OpenCV, written to a temporary name and renamed."""

import pathlib

import cv2
import numpy as np

from tfdqn.errors import UserError


class VideoRecorder:
    """Writes the frames of the first episode it sees (one per env step), then renames the file into place."""

    def __init__(self, path: pathlib.Path, fps: int = 30):
        self.path = pathlib.Path(path)
        self._tmp = self.path.with_name(self.path.stem + ".part.mp4")
        self._fps = fps
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
        if self._writer is None:
            height, width = rgb.shape[:2]
            self._writer = cv2.VideoWriter(str(self._tmp), cv2.VideoWriter_fourcc(*"mp4v"), self._fps, (width, height))
            if not self._writer.isOpened():
                raise UserError(f"--video {str(self.path)!r} cannot be written; allowed: a writable .mp4 path")
        self._writer.write(cv2.cvtColor(np.asarray(rgb, dtype=np.uint8), cv2.COLOR_RGB2BGR))
        self.frames += 1

    def close(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._tmp.replace(self.path)
