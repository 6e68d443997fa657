"""VideoRecorder: real MP4 files decoded back with OpenCV; nothing partial is ever left behind."""

import cv2
import numpy as np
import pytest

from tfdqn.config import EnvConfig
from tfdqn.envs.make import make_env
from tfdqn.errors import UserError
from tfdqn.video import VideoRecorder

RED, GREEN, BLUE = (220, 0, 0), (0, 220, 0), (0, 0, 220)


class Screen:
    """An env as far as the recorder sees it: `render()` gives solid RGB frames, then fails if told to."""

    def __init__(self, colors, height=48, width=64, fail_at=None):
        self.colors, self.shape, self.fail_at, self.rendered = colors, (height, width, 3), fail_at, 0

    def render(self):
        if self.rendered == self.fail_at:
            raise RuntimeError("the emulator died")
        color = self.colors[self.rendered % len(self.colors)]
        self.rendered += 1
        return np.full(self.shape, color, np.uint8)


def _decode(path) -> list[np.ndarray]:
    """Every frame of the video as RGB, read by OpenCV."""
    capture = cv2.VideoCapture(str(path))
    assert capture.isOpened()
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    capture.release()
    return frames


def test_writes_the_first_episode_and_nothing_after_it(tmp_path):
    path = tmp_path / "episode.mp4"
    screen, recorder = Screen([RED, GREEN, BLUE]), VideoRecorder(path, fps=30)
    for step in range(12):  # the episode ends at the sixth step; the rest belongs to the next episode
        recorder.capture(screen, {"episode": {"r": 1.0}} if step == 5 else {})
    assert recorder.frames == 6 and screen.rendered == 6
    assert not path.exists()  # nothing at the real name until the file is complete
    recorder.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episode.mp4"]
    capture = cv2.VideoCapture(str(path))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 6 and capture.get(cv2.CAP_PROP_FPS) == pytest.approx(30)
    assert (int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))) == (64, 48)
    frames = _decode(path)
    assert len(frames) == 6 and all(frame.shape == (48, 64, 3) for frame in frames)
    for frame, color in zip(frames, [RED, GREEN, BLUE] * 2):  # RGB in, RGB out: no channel swap
        np.testing.assert_allclose(frame.reshape(-1, 3).mean(axis=0), color, atol=12)


def test_records_a_real_breakout_screen(tmp_path):
    env, _ = make_env(EnvConfig(id="Breakout"), seed=0, evaluation=True, render=True)
    env.action_space.seed(0)
    path = tmp_path / "breakout.mp4"
    with VideoRecorder(path) as recorder:
        env.reset()
        steps, info = 0, {}
        while "episode" not in info and steps < 5000:  # one whole game, as tfdqn.run.evaluation plays it
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            steps += 1
            recorder.capture(env, info)
            screen = env.render()
            if terminated or truncated:
                env.reset()  # a lost life (training envs) or the game's end
    env.close()
    assert "episode" in info and recorder.frames == steps > 10
    frames = _decode(path)
    assert len(frames) == steps and frames[0].shape == (210, 160, 3)
    # The last frame is the screen the game ended on (the video codec is lossy, so close, not equal).
    assert np.abs(frames[-1].astype(int) - screen).mean() < 8


def test_no_frames_write_no_file(tmp_path):
    class Blank:
        def render(self):
            return None

    recorder = VideoRecorder(tmp_path / "none.mp4")
    recorder.capture(Blank(), {"episode": {}})
    recorder.close()
    assert recorder.frames == 0 and list(tmp_path.iterdir()) == []


def test_an_unwritable_path_is_a_one_line_user_error_and_writes_nothing(tmp_path):
    recorder = VideoRecorder(tmp_path / "no-such-folder" / "out.mp4")
    with pytest.raises(UserError) as caught:
        recorder.capture(Screen([RED]), {})
    assert "\n" not in str(caught.value) and "cannot be written" in str(caught.value)
    recorder.close()
    assert list(tmp_path.iterdir()) == []


def test_a_render_failure_mid_episode_leaves_no_file(tmp_path):
    path = tmp_path / "out.mp4"
    with pytest.raises(RuntimeError, match="emulator died"):
        with VideoRecorder(path) as recorder:
            screen = Screen([RED, GREEN], fail_at=4)
            for _ in range(10):
                recorder.capture(screen, {})
    assert recorder.frames == 4 and list(tmp_path.iterdir()) == []


def test_a_frame_the_encoder_cannot_take_discards_the_file(tmp_path):
    class Strange(Screen):
        def render(self):
            frame = super().render()
            return frame if self.rendered < 3 else frame[..., :2]  # two channels: not RGB

    recorder, screen = VideoRecorder(tmp_path / "out.mp4"), Strange([BLUE])
    with pytest.raises(cv2.error):
        for _ in range(5):
            recorder.capture(screen, {})
    assert recorder.frames == 2 and list(tmp_path.iterdir()) == []
    recorder.close()  # nothing left to finish
    assert list(tmp_path.iterdir()) == []
