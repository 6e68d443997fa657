"""A run's custom-scalars tab as a user sees it: TensorBoard served by a subprocess, opened in Debian's
headless Chromium through Playwright. One place for the browser tests (TensorBoard's tab, the documentation
site) and tools/screenshot_tensorboard.py.

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
PANEL = "#categories-container"  # the scrolling panel that holds the charts


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
def serve(logdir: pathlib.Path, timeout: float):
    """TensorBoard on `logdir` at a free local port, until the block ends; yields its URL."""
    port = _free_port()
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
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
                        raise UserError(f"TensorBoard did not serve {logdir} within {timeout:g} s: {last}")
                    time.sleep(0.2)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


# Per chart card, in one round trip: its title, the series its "Matches" list names and the stroke colours of
# the lines it draws (inside the shadow roots of the chart's own elements)
_READ_CARDS = """cards => cards.map(card => {
    const all = (root, selector) => [...root.querySelectorAll(selector),
        ...[...root.querySelectorAll('*')].filter(e => e.shadowRoot).flatMap(e => all(e.shadowRoot, selector))];
    return [card.title,
            all(card.shadowRoot, '.match-list-entry').map(e => e.lastChild.textContent.trim()).sort(),
            all(card.shadowRoot, 'path.line').filter(p => p.getAttribute('d')).map(p => getComputedStyle(p).stroke)];
})"""


def charts(page) -> dict:
    """Chart title -> (the series it lists under "Matches", each `tag (run)`; the set of stroke colours of the
    lines it draws) on the open custom-scalars tab."""
    return {title: (tuple(series), frozenset(strokes))
            for title, series, strokes in page.locator(CARD).evaluate_all(_READ_CARDS)}


def _drawn(snapshot: dict) -> bool:
    """Whether some chart lists series and each chart that does draws lines."""
    listed = [colours for series, colours in snapshot.values() if series]
    return bool(listed) and all(listed)


def _wait_until_drawn(page, deadline: float) -> None:
    """Until the tab's requests are done and its charts unchanged over the last second (series load one by one,
    and a chart whose tag the run never wrote stays empty)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):  # then the charts as they are: the caller checks them
        page.wait_for_load_state("networkidle", timeout=max(1.0, deadline - time.monotonic()) * 1000)
    previous = None
    while time.monotonic() < deadline:
        snapshot = charts(page)
        if _drawn(snapshot) and snapshot == previous:
            return
        previous = snapshot
        time.sleep(1.0)


def show_whole_tab(page, timeout: float = 10.0) -> None:
    """Make the window as tall as the tab's charts, which scroll inside a panel: a screenshot shows them all."""
    extra = page.locator(PANEL).evaluate("panel => panel.scrollHeight - panel.clientHeight")
    if extra > 0:
        size = page.viewport_size
        page.set_viewport_size({"width": size["width"], "height": size["height"] + extra})
        _wait_until_drawn(page, time.monotonic() + timeout)


@contextlib.contextmanager
def custom_scalars_page(logdir: pathlib.Path, timeout: float = 30.0, size: tuple[int, int] = (1920, 1080)):
    """The custom-scalars tab of `logdir` (a run folder, or a folder of them) in headless Chromium, its charts
    drawn (or `timeout` spent: the caller checks `charts`); TensorBoard and the browser are closed when the
    block ends. 1920 pixels wide, the tab shows four charts a row."""
    deadline = time.monotonic() + timeout
    with serve(logdir, timeout) as url, chromium_page(size) as page:
        page.goto(f"{url}/#custom_scalars")
        _wait_until_drawn(page, deadline)
        yield page


@contextlib.contextmanager
def chromium_page(size: tuple[int, int] = (1920, 1080)):
    """A page of `size` pixels in Debian's headless Chromium through Playwright (`missing()` says what this machine
    lacks for it); the browser closes when the block ends. The documentation site's test opens its pages here."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            yield browser.new_page(viewport={"width": size[0], "height": size[1]})
        finally:
            browser.close()
