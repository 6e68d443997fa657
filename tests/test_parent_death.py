"""A child started with `child_environment()` dies with its parent, set up by the child (no preexec_fn in the
parent, whose threads would make the fork unsafe): real processes, a real SIGKILL."""

import os
import signal
import subprocess
import sys
import time

from tests.conftest import REPO

CHILD = "from tfdqn.tuning.parent_death import die_with_parent; die_with_parent(); import time; time.sleep(120)"
PARENT = f"""
import subprocess, sys, threading, time
from tfdqn.tuning.parent_death import child_environment
threading.Thread(target=time.sleep, args=(120,), daemon=True).start()  # a heartbeat thread, as Optuna runs
child = subprocess.Popen([sys.executable, "-c", {CHILD!r}], env=child_environment())
print(child.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_child_dies_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=REPO, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    time.sleep(3)  # the child's interpreter starts and makes its request
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)


def test_a_child_whose_parent_is_already_gone_exits_at_once():
    """The parent named in the environment is not the child's parent (it died before the request): exit 1."""
    environment = {**os.environ, "TFDQN_DIE_WITH_PARENT": "1"}
    result = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, env=environment, timeout=60)
    assert result.returncode == 1
