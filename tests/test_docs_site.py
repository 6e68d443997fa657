"""The documentation site as CI and a person meet it: `mkdocs build --strict` passes (a broken link, a page missing
from the nav's files or a docstring reference mkdocstrings cannot resolve fails it), README stays a front door of
at most 2,000 words that gives the test command .ci/run runs, and the built site, served over HTTP, shows its
navigation, code blocks and tables in headless Chromium.

TFDQN_REFRESH_SITE_SCREENSHOT=1 makes the browser test write the home page's screenshot to docs/site-home.png,
the one README shows."""

import contextlib
import functools
import http.server
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading

import pytest
import yaml

from tools import tensorboard_view

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SCREENSHOT = ROOT / "docs" / "site-home.png"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built once for the module: (the finished `mkdocs build --strict`, its output folder)."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    return built, out


def nav_titles() -> list[str]:
    """The titles of mkdocs.yml's top-level navigation, in order."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    return [title for entry in nav for title in entry]


def test_the_site_builds_with_warnings_as_errors(site):
    built, out = site
    warnings = [line for line in built.stderr.splitlines() if not line.startswith("INFO")]
    assert built.returncode == 0, "\n".join(warnings[-30:])
    assert (out / "index.html").is_file() and (out / "api" / "index.html").is_file()
    api = (out / "api" / "index.html").read_text()
    assert "load_policy" in api and "train" in api  # mkdocstrings rendered the Python API's docstrings


def test_readme_is_a_short_front_door_with_ci_s_test_command():
    text = README.read_text()
    assert len(text.split()) <= 2000, f"README.md has {len(text.split())} words"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip()]
    assert ci[-1] == "python -m pytest -n auto" and ci[-1] in text
    assert text.count("<!-- results:start -->") == 1 and text.count("<!-- results:end -->") == 1


def test_readme_links_into_the_repository_resolve():
    targets = re.findall(r"\]\(((?!https?:|#)[^)#\s]+)", README.read_text())
    assert any(target.startswith("docs/") for target in targets)
    assert [target for target in targets if not (ROOT / target).exists()] == []


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name): no line per request
        pass


@contextlib.contextmanager
def served(folder: pathlib.Path):
    """`folder` over HTTP on a free port of 127.0.0.1, from a thread, until the block ends; yields the URL."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join()


def test_a_person_sees_the_navigation_code_and_tables(site, tmp_path):
    reason = tensorboard_view.missing()
    if reason:
        pytest.skip(reason)
    built, out = site
    assert built.returncode == 0, built.stderr[-2000:]
    with served(out) as url, tensorboard_view.chromium_page((1280, 900)) as page:
        page.goto(f"{url}/", wait_until="load")
        assert page.title().startswith("tfdqn")
        nav = page.locator("nav.md-nav--primary .md-nav__link .md-ellipsis")
        shown = [text.strip() for text in nav.all_inner_texts()]
        assert [title for title in nav_titles() if title not in shown] == [], shown
        assert page.locator("article pre code").first.inner_text().startswith("python -m pip install")
        assert page.locator("article table tbody tr").count() >= 5
        page.screenshot(path=str(tmp_path / "site-home.png"))
        if os.environ.get("TFDQN_REFRESH_SITE_SCREENSHOT") == "1":
            shutil.copyfile(tmp_path / "site-home.png", SCREENSHOT)

        page.click("nav.md-nav--primary a:has-text('Configuration reference')")
        page.wait_for_load_state("load")
        assert page.url.rstrip("/").endswith("/reference/configuration")
        assert page.locator("article h1").first.inner_text().startswith("Configuration reference")
        assert page.locator("article table tbody tr").count() >= 10
        assert page.locator("article code").count() >= 10
    assert (tmp_path / "site-home.png").stat().st_size > 10_000
    assert SCREENSHOT.is_file(), "README's screenshot is missing: run with TFDQN_REFRESH_SITE_SCREENSHOT=1"


def test_the_architecture_page_names_every_folder_and_root_module_of_the_package():
    """The page's layout table is the package as it is: a folder or root module added, moved or removed without the
    page saying so fails here."""
    text = (ROOT / "docs" / "guide" / "architecture.md").read_text()
    package = ROOT / "tfdqn"
    parts = [f"tfdqn/{path.name}/" for path in package.iterdir() if path.is_dir() and path.name != "__pycache__"]
    parts += [f"tfdqn/{path.name}" for path in package.glob("*.py")]
    assert [part for part in sorted(parts) if f"`{part}`" not in text] == []
    named = set(re.findall(r"`(tfdqn/[\w/]+(?:\.py|/))`", text))
    assert [name for name in sorted(named) if not (ROOT / name).exists()] == []
