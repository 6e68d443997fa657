"""A non-editable install trains from any folder: the configs and data ship inside the package.

The venv sees the system's site-packages for TensorFlow and the other heavy dependencies (installing
them anew would take minutes and a network), but tfdqn itself is built from a copy of this working
tree and installed into the venv, where it shadows the editable install of the checkout."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _copy_source(destination) -> None:
    """The files git would commit (tracked, and untracked but not ignored): no build outputs, no runs."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, destination / name)


@pytest.mark.slow
def test_an_installed_copy_trains_cartpole_from_another_folder(tmp_path):
    source, venv, work = tmp_path / "source", tmp_path / "venv", tmp_path / "work"
    _copy_source(source)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # pip comes from the system's site-packages and installs into the venv it runs in; offline, no build isolation.
    install = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                              str(source)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    work.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    where = subprocess.run([python, "-c", "import tfdqn; print(tfdqn.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(venv)) and not where.startswith(str(REPO)), where
    # the package data tools/atari100k.py reads ships too: DrQ(epsilon)'s published runs
    code = "from tfdqn.atari100k_scores import drq_eps_mean; print(drq_eps_mean('Pong'))"
    pong = subprocess.run([python, "-c", code], cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert round(float(pong), 1) == -9.1
    result = subprocess.run([python, "-m", "tfdqn.train", "--env", "CartPole", "--total-steps", "3000"], cwd=work,
                            env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    (run_dir,) = (work / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_id"] == "CartPole-v1" and summary["env_steps"] == 3000
