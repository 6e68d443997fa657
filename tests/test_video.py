"""VideoRecorder: real H.264 MP4 files read back with PyAV; nothing partial is ever left behind."""

import dataclasses
import http.server
import json
import os
import pathlib
import queue
import signal
import subprocess
import threading

import av
import numpy as np
import pytest

from tfdqn.config import EnvConfig
from tfdqn.envs.make import make_env
from tfdqn.errors import UserError
from tfdqn.policy.video import CAPTION_HEIGHT, VideoRecorder, captioned, video_fps

RED, GREEN, BLUE = (220, 0, 0), (0, 220, 0), (0, 0, 220)
CHROMIUM = pathlib.Path("/usr/bin/chromium")


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


@dataclasses.dataclass
class Video:
    codec: str
    pix_fmt: str
    fps: object  # the stream's average frame rate, a Fraction
    frames: int  # as the container states it
    duration: float  # seconds, as the container states it
    images: list  # every frame decoded, RGB


def _read(path) -> Video:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        images = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
        return Video(stream.codec_context.name, stream.codec_context.pix_fmt, stream.average_rate, stream.frames,
                     container.duration / av.time_base, images)


def _assert_plays_at(video: Video, fps: int, frames: int) -> None:
    """H.264 in yuv420p at exactly `fps`, lasting `frames` frames' time (within one frame)."""
    assert (video.codec, video.pix_fmt, video.fps) == ("h264", "yuv420p", fps)
    assert video.frames == len(video.images) == frames
    assert video.duration == pytest.approx(frames / fps, abs=1 / fps)


def _assert_caption(image: np.ndarray, height: int, text: str) -> None:
    """The strip under the screen's `height` rows says `text`: the codec only blurs the letters' edges,
    while one wrong digit turns some 50 pixels from black to white or back."""
    strip = image[height:height + CAPTION_HEIGHT].astype(int)
    expected = captioned(np.zeros((height, image.shape[1], 3), np.uint8), text)[height:height + CAPTION_HEIGHT]
    assert (strip > 128).sum() > 100  # white letters on black
    assert (np.abs(strip - expected) > 128).sum() <= 10


def _play_episode(env, recorder, max_steps=1000) -> tuple[int, dict]:
    """Random actions for one whole game, as tfdqn.run.evaluation plays it; the steps taken and the last info."""
    env.reset()
    steps, info = 0, {}
    while "episode" not in info and steps < max_steps:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        steps += 1
        recorder.on_step(env, info)
        if terminated or truncated:
            env.reset()  # a lost life (training envs) or the game's end
    return steps, info


def test_the_frame_rate_is_the_games_own():
    cartpole, _ = make_env(EnvConfig(id="CartPole"), seed=0)
    breakout, _ = make_env(EnvConfig(id="Breakout"), seed=0)
    assert video_fps(cartpole, EnvConfig(id="CartPole")) == 50  # its metadata["render_fps"]
    assert video_fps(breakout, EnvConfig(id="Breakout")) == 15  # 60 Hz over frame skip 4
    assert video_fps(breakout, EnvConfig(id="Breakout", frame_skip=3)) == 20
    cartpole.close()
    breakout.close()


def test_writes_the_first_episode_and_nothing_after_it(tmp_path):
    path = tmp_path / "episode.mp4"
    screen, recorder = Screen([RED, GREEN, BLUE]), VideoRecorder(path, fps=30)
    for step in range(12):  # the episode ends at the sixth step; the rest belongs to the next episode
        recorder.capture(screen, {"episode": {"r": 6.0}} if step == 5 else {}, episode_return=step + 1)
    assert recorder.frames == 6 and screen.rendered == 6
    assert not path.exists()  # nothing at the real name until the file is complete
    recorder.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episode.mp4"]
    video = _read(path)
    _assert_plays_at(video, 30, 6)
    # 64x48 is scaled up 7x (nearest neighbour) to be at least 400 wide, with the caption strip under it.
    assert all(image.shape == (336 + CAPTION_HEIGHT, 448, 3) for image in video.images)
    for step, (image, color) in enumerate(zip(video.images, [RED, GREEN, BLUE] * 2), start=1):
        np.testing.assert_allclose(image[:336].reshape(-1, 3).mean(axis=0), color, atol=12)  # RGB in, RGB out
        _assert_caption(image, 336, f"return {step}  step {step}")


def test_odd_sides_are_padded_to_even_ones(tmp_path):
    with VideoRecorder(tmp_path / "odd.mp4", fps=50) as recorder:
        for _ in range(3):
            recorder.capture(Screen([GREEN], height=201, width=401), {}, episode_return=0.5)
    image = _read(tmp_path / "odd.mp4").images[0]
    assert image.shape == (202 + CAPTION_HEIGHT, 402, 3)  # yuv420p needs even sides: one black row and column
    _assert_caption(image, 201, "return 0.5  step 1")


@pytest.mark.slow
def test_evaluate_records_cartpole_at_50_fps(cartpole_run, run_cmd, tmp_path):
    path = tmp_path / "cartpole.mp4"
    result = run_cmd("tfdqn.evaluate", str(cartpole_run[0]), "--episodes", "2", "--video", str(path))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    steps = int(report["returns"][0])  # CartPole: +1 a step, so the first game's return is its length
    assert report["video"] == str(path) and report["video_frames"] == steps
    video = _read(path)
    _assert_plays_at(video, 50, steps)
    last = video.images[-1]
    assert last.shape == (400 + CAPTION_HEIGHT, 600, 3)  # CartPole's 600x400 as it is, the caption under it
    assert last[:20].mean() > 240  # the screen is kept: CartPole's white sky
    _assert_caption(last, 400, f"return {steps}  step {steps}")


def test_records_a_real_breakout_game_at_15_fps(tmp_path):
    config = EnvConfig(id="Breakout", max_episode_frames=1200)  # a game of 300 agent steps at most
    env, _ = make_env(config, seed=2, evaluation=True, render=True)
    env.action_space.seed(2)
    path = tmp_path / "breakout.mp4"
    with VideoRecorder(path, video_fps(env, config)) as recorder:
        steps, info = _play_episode(env, recorder)
        screen = env.render()
    env.close()
    assert "episode" in info and recorder.frames == steps > 10
    video = _read(path)
    _assert_plays_at(video, 15, steps)
    last = video.images[-1]
    assert last.shape == (630 + CAPTION_HEIGHT, 480, 3)  # 210x160 scaled up 3x, then the caption
    # The game ended on this screen, scaled up pixel for pixel (the codec is lossy, so close, not equal).
    assert np.abs(last[:630].astype(int) - screen.repeat(3, axis=0).repeat(3, axis=1)).mean() < 8
    _assert_caption(last, 630, f"return {info['episode']['r']:g}  step {steps}")


def test_no_frames_write_no_file(tmp_path):
    class Blank:
        def render(self):
            return None

    recorder = VideoRecorder(tmp_path / "none.mp4", fps=30)
    recorder.capture(Blank(), {"episode": {}}, episode_return=0)
    recorder.close()
    assert recorder.frames == 0 and list(tmp_path.iterdir()) == []


def test_an_unwritable_path_is_a_one_line_user_error_and_writes_nothing(tmp_path):
    path = tmp_path / "no-such-folder" / "out.mp4"
    recorder = VideoRecorder(path, fps=30)
    with pytest.raises(UserError) as caught:
        recorder.capture(Screen([RED]), {}, episode_return=0)
    message = str(caught.value)
    assert "\n" not in message and f"--video {str(path)!r} cannot be written" in message
    recorder.close()
    assert list(tmp_path.iterdir()) == []


def test_a_render_failure_mid_episode_leaves_no_file(tmp_path):
    path = tmp_path / "out.mp4"
    with pytest.raises(RuntimeError, match="emulator died"):
        with VideoRecorder(path, fps=30) as recorder:
            screen = Screen([RED, GREEN], fail_at=4)
            for _ in range(10):
                recorder.capture(screen, {}, episode_return=0)
    assert recorder.frames == 4 and list(tmp_path.iterdir()) == []


def test_a_frame_that_is_not_rgb_discards_the_file(tmp_path):
    class Strange(Screen):
        def render(self):
            frame = super().render()
            return frame if self.rendered < 3 else frame[..., :2]  # two channels: not RGB

    recorder, screen = VideoRecorder(tmp_path / "out.mp4", fps=30), Strange([BLUE])
    with pytest.raises(ValueError):
        for _ in range(5):
            recorder.capture(screen, {}, episode_return=0)
    assert recorder.frames == 2 and list(tmp_path.iterdir()) == []
    recorder.close()  # nothing left to finish
    assert list(tmp_path.iterdir()) == []


PAGE = b"""<!doctype html><video muted></video><script>
const video = document.querySelector("video");
function send(result) { fetch("/result", {method: "POST", body: JSON.stringify(result)}); }
function pixel(x, y) {
  const canvas = document.createElement("canvas");
  [canvas.width, canvas.height] = [video.videoWidth, video.videoHeight];
  canvas.getContext("2d").drawImage(video, 0, 0);
  return Array.from(canvas.getContext("2d").getImageData(x, y, 1, 1).data.slice(0, 3));
}
video.onerror = () => send({error: video.error.code});
video.onloadedmetadata = () => { video.currentTime = video.duration; };
video.onseeked = () => send({duration: video.duration, width: video.videoWidth, height: video.videoHeight,
                             sky: pixel(4, 4), strip: pixel(4, video.videoHeight - 4)});
video.src = "/video.mp4";
</script>"""


def _serve(video: pathlib.Path, results: queue.Queue) -> http.server.ThreadingHTTPServer:
    """A localhost server of the page, the video and the page's POSTed result (the page's only way out)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body, kind = (video.read_bytes(), "video/mp4") if self.path == "/video.mp4" else (PAGE, "text/html")
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            results.put(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")
def test_chromium_plays_the_video(tmp_path):
    env, _ = make_env(EnvConfig(id="CartPole"), seed=0, render=True)
    env.action_space.seed(0)
    with VideoRecorder(tmp_path / "cartpole.mp4", video_fps(env, EnvConfig(id="CartPole"))) as recorder:
        _play_episode(env, recorder)
    env.close()
    results = queue.Queue()
    server = _serve(tmp_path / "cartpole.mp4", results)
    # These flags keep Chromium off the network it cannot reach here.
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    browser = subprocess.Popen([str(CHROMIUM), *flags, f"http://127.0.0.1:{server.server_port}/"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        result = results.get(timeout=60)
    finally:
        os.killpg(browser.pid, signal.SIGKILL)  # its own process group: the browser and its helpers
        browser.wait()
        server.shutdown()
    assert result["duration"] == pytest.approx(recorder.frames / 50, abs=1 / 50)
    assert (result["width"], result["height"]) == (600, 400 + CAPTION_HEIGHT)
    # The last frame decoded: CartPole's white sky above, the caption's black strip under it.
    assert min(result["sky"]) > 240 and max(result["strip"]) < 16
