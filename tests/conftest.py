"""Shared test helpers: quiet TensorFlow, and running the real command lines as subprocesses."""

import os
import pathlib
import subprocess
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = pathlib.Path(__file__).resolve().parent.parent


def run_module(module: str, *args: str, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """`python -m <module> args...` from the repository root, capturing text output."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env, **kwargs)


@pytest.fixture
def run_cmd():
    return run_module
