"""MP4 recording of an episode's rendered frames, written through `tfdqn.atomic.atomic_path`.

H.264 in yuv420p (PyAV's bundled libx264) because that is what browsers and players decode; each frame
is one agent step, shown at the env's real frame rate with a caption of the return so far and the step.
"""

from __future__ import annotations

import contextlib
import fractions
import pathlib

import av
import cv2
import numpy as np

from tfdqn.atomic import atomic_path
from tfdqn.config import EnvConfig
from tfdqn.envs.names import is_atari_id, resolve_env_id
from tfdqn.errors import UserError

ATARI_HZ = 60  # emulator frames per second of the (NTSC) Atari 2600
DEFAULT_FPS = 30  # an env that states no render_fps
MIN_WIDTH = 400  # narrower screens (Atari's 160 pixels) are scaled up so that the caption fits and reads
CAPTION_HEIGHT = 32  # even, so the frame height stays as even as the screen's
FONT, FONT_SCALE, WHITE = cv2.FONT_HERSHEY_SIMPLEX, 0.7, (255, 255, 255)


def video_fps(env, config: EnvConfig) -> fractions.Fraction:
    """Frames per second that replay the game at its real speed, one video frame per agent step: Atari
    steps `frame_skip` emulator frames at 60 Hz; other envs state their rate in `metadata["render_fps"]`."""
    if is_atari_id(resolve_env_id(config.id)):
        return fractions.Fraction(ATARI_HZ, config.frame_skip)
    # A float rate (29.97) becomes a small fraction, which the MP4 time base holds exactly.
    return fractions.Fraction(env.metadata.get("render_fps", DEFAULT_FPS)).limit_denominator(1001)


def captioned(screen: np.ndarray, text: str) -> np.ndarray:
    """`screen` scaled up by a whole factor to at least MIN_WIDTH (nearest neighbour keeps pixel art
    sharp), over a black strip holding `text`, padded to even sides (yuv420p halves both)."""
    scale = -(-MIN_WIDTH // screen.shape[1])
    if scale > 1:
        screen = cv2.resize(screen, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
    height, width = screen.shape[:2]
    frame = np.zeros((height + CAPTION_HEIGHT + height % 2, width + width % 2, 3), np.uint8)
    frame[:height, :width] = screen
    cv2.putText(frame, text, (8, height + 22), FONT, FONT_SCALE, WHITE, 1, cv2.LINE_AA)
    return frame


class VideoRecorder:
    """Writes the frames of the first episode it sees (one per env step); the file appears at `path`
    only when `close()` finishes it. A failed write, or leaving a `with` block by an exception,
    leaves no file, partial or temporary."""

    def __init__(self, path: pathlib.Path, fps: fractions.Fraction | int):
        self.path = pathlib.Path(path)
        self._fps = fractions.Fraction(fps)
        self._file = None  # the atomic_path context, entered at the first frame
        self._container = self._stream = None
        self._done = False
        self._steps = 0
        self.frames = 0

    def on_step(self, env, info: dict) -> None:
        """`run_episodes`' hook: `capture` with the game's return so far, as counted by gymnasium's
        RecordEpisodeStatistics, which every `make_env` env has."""
        self.capture(env, info, env.get_wrapper_attr("episode_returns"))

    def capture(self, env, info: dict, episode_return: float) -> None:
        """Add the screen after a step of the first episode, captioned with `episode_return` so far."""
        if self._done:
            return
        self._done = "episode" in info
        self._steps += 1
        rgb = env.render()
        if rgb is None:
            return
        try:
            text = f"return {float(episode_return):.10g}  step {self._steps}"
            frame = captioned(np.asarray(rgb, dtype=np.uint8), text)
            if self._container is None:
                self._open(*frame.shape[:2])
            self._container.mux(self._stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        except BaseException as error:
            self._discard(error)
            raise
        self.frames += 1

    def _open(self, height: int, width: int) -> None:
        self._file = contextlib.ExitStack()
        tmp = self._file.enter_context(atomic_path(self.path))
        # faststart puts the index first, so a browser can start playing before the whole file arrives.
        self._container = av.open(str(tmp), "w", format="mp4", options={"movflags": "faststart"})
        self._stream = self._container.add_stream("libx264", rate=self._fps)
        self._stream.width, self._stream.height, self._stream.pix_fmt = width, height, "yuv420p"
        try:
            self._container.start_encoding()  # creates the file now, rather than at the encoder's first packet
        except OSError as error:
            raise UserError(f"--video {str(self.path)!r} cannot be written ({error.strerror}); "
                            f"allowed: a writable .mp4 path") from None

    def _discard(self, error: BaseException) -> None:
        """Drop the encoder and delete what it wrote so far."""
        if self._container is not None:
            self._container.close()
        if self._file is not None:
            self._file.__exit__(type(error), error, error.__traceback__)
        self._container = self._stream = self._file = None

    def close(self) -> None:
        """Finish the file and move it into place (nothing is written if no frame came)."""
        if self._container is None:
            return
        try:
            self._container.mux(self._stream.encode(None))  # the frames the encoder still holds
            self._container.close()
        except BaseException as error:
            self._discard(error)
            raise
        self._file.close()
        self._container = self._stream = self._file = None

    def __enter__(self) -> "VideoRecorder":
        return self

    def __exit__(self, exc_type, error, traceback) -> None:
        if error is None:
            self.close()
        else:
            self._discard(error)
