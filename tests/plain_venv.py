"""Virtual environments holding tfdqn's wheel, built from this working tree and installed as a user installs it.

Installing TensorFlow and the rest anew would take minutes and a network, so the packages come from this
interpreter's site-packages: `with_system_packages` sees all of them (the test extra's too); `plain` links in
only the distributions `pip install tfdqn` brings (its requirements, followed through theirs, no extras), so
matplotlib, rliable, Ray, Optuna and wandb are truly absent there."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

from packaging.requirements import Requirement

from tests.conftest import REPO



def copy_source(destination: pathlib.Path) -> None:
    """The files git would commit (tracked, and untracked but not ignored): no build outputs, no runs."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, destination / name)


def requirement_closure(name: str, extras: frozenset = frozenset()) -> set[str]:
    """The distributions `pip install name[extras]` installs, read from the installed distributions' metadata."""
    seen, todo = set(), [(name, extras)]
    while todo:
        current, wanted = todo.pop()
        key = current.lower().replace("_", "-")
        if (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        for text in importlib.metadata.distribution(current).requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or any(requirement.marker.evaluate({"extra": extra})
                                                 for extra in (wanted or {""})):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return {key for key, _ in seen} - {name}


def _link_distribution(name: str, site: pathlib.Path) -> None:
    """Symlink a distribution's top-level files and folders (its packages, modules and metadata) into `site`."""
    distribution = importlib.metadata.distribution(name)
    tops = {pathlib.PurePath(file).parts[0] for file in distribution.files or [] if not str(file).startswith("..")}
    root = pathlib.Path(distribution.locate_file(""))
    for top in tops:
        if (root / top).exists() and not (site / top).exists():
            (site / top).symlink_to(root / top)


def build_distributions(source: pathlib.Path, out: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The sdist and the wheel of a release, built as `python -m build` builds them (the wheel from the sdist),
    offline from this interpreter's setuptools, and held to `twine check --strict`; (sdist, wheel)."""
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return sdist, wheel


def _install_tfdqn(venv: pathlib.Path, source: pathlib.Path) -> str:
    """Installs the wheel built from `source`, as a user installs a release."""
    _, wheel = build_distributions(source, venv.parent / f"{venv.name}-dist")
    python = str(venv / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    return python


def with_system_packages(root: pathlib.Path) -> pathlib.Path:
    """A venv seeing this interpreter's packages, with tfdqn's wheel built from a copy of the tree; its folder."""
    source, venv = root / "source", root / "venv"
    copy_source(source)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    _install_tfdqn(venv, source)
    return venv


def plain(root: pathlib.Path) -> pathlib.Path:
    """A venv holding what `pip install tfdqn` installs and nothing else, with tfdqn built from the tree."""
    source, venv = root / "source", root / "plain-venv"
    copy_source(source)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = pathlib.Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    for name in sorted(requirement_closure("tfdqn") | {"pip"}):  # pip installs the wheel there
        _link_distribution(name, site)
    _install_tfdqn(venv, source)
    return venv


def environment(venv: pathlib.Path) -> dict:
    """A user's shell with the venv activated: its bin first, no PYTHONPATH, no test-only settings."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL")}
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
