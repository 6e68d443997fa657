"""A run's custom-scalars tab as a user sees it: TensorBoard served by a subprocess, opened in Debian's
headless Chromium through Playwright. One place for the browser test and tools/screenshot_tensorboard.py.

Playwright's own browser download is not used (machines here cannot fetch it): `/usr/bin/chromium`
comes from `apt-get install chromium`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from tfdqn.errors import UserError

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync")
CARD = "tf-custom-scalar-multi-line-chart-card"  # one per chart of the layout; its `title` is the chart's


def missing() -> str | None:
    """What this machine lacks to open the tab (a one-line reason), or None."""
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is missing (pip install playwright)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serve(run_dir: pathlib.Path, timeout: float):
    """TensorBoard on `run_dir` at a free local port, until the block ends; yields its URL."""
    port = _free_port()
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(run_dir),
                                   "--host", "127.0.0.1", "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=log)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + timeout
            while True:
                try:
                    urllib.request.urlopen(f"{url}/data/plugins_listing", timeout=1).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        last = (log.read().decode(errors="replace").strip().splitlines() or ["no output"])[-1]
                        raise UserError(f"TensorBoard did not serve {run_dir} within {timeout:g} s: {last}")
                    time.sleep(0.2)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def chart_lines(page) -> dict:
    """Chart title -> lines drawn with points (SVG paths with a shape) on the open custom-scalars tab."""
    cards = page.locator(CARD)
    return {card.evaluate("card => card.title"):
            sum(1 for d in card.locator("path.line").evaluate_all("paths => paths.map(p => p.getAttribute('d'))") if d)
            for card in cards.all()}


def _wait_until_drawn(page, deadline: float) -> None:
    """Until every chart has lines and no count changed over the last second (series load one by one)."""
    previous = None
    while time.monotonic() < deadline:
        lines = chart_lines(page)
        if lines and all(lines.values()) and lines == previous:
            return
        previous = lines
        time.sleep(1.0)


@contextlib.contextmanager
def custom_scalars_page(run_dir: pathlib.Path, timeout: float = 30.0, size: tuple[int, int] = (1600, 1000)):
    """The custom-scalars tab of `run_dir` in headless Chromium, its charts drawn (or `timeout` spent: the
    caller checks `chart_lines`); TensorBoard and the browser are closed when the block ends."""
    from playwright.sync_api import sync_playwright

    deadline = time.monotonic() + timeout
    with serve(run_dir, timeout) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": size[0], "height": size[1]})
            page.goto(f"{url}/#custom_scalars")
            _wait_until_drawn(page, deadline)
            yield page
        finally:
            browser.close()
