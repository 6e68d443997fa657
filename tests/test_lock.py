"""One writer per run folder: the lock's rules with a real second process, then real training processes."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, run_module
from tfdqn.errors import UserError
from tfdqn.run.lock import LOCK_NAME, RunLock, refuse_if_held
from tfdqn.run.markers import complete_steps

HOLD = ("import sys, time; from tfdqn.run.lock import RunLock; RunLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); time.sleep(300)")


def _holder(folder) -> subprocess.Popen:
    """Another process that holds `folder`'s lock until it is killed."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "held\n"
    return process


def _kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()


def test_the_lock_file_holds_the_pid_and_goes_with_the_lock(tmp_path):
    with RunLock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path):
    holder = _holder(tmp_path)
    try:
        for attempt in (RunLock(tmp_path).acquire, lambda: refuse_if_held(tmp_path)):
            with pytest.raises(UserError, match=f"^run folder {tmp_path} is being written by process {holder.pid}; "):
                attempt()
    finally:
        _kill(holder)


def test_the_lock_of_a_killed_process_is_taken_over_with_a_warning(tmp_path, capsys):
    holder = _holder(tmp_path)
    _kill(holder)
    assert (tmp_path / LOCK_NAME).read_text() == f"{holder.pid}\n"  # kill -9 leaves the file, not the lock
    refuse_if_held(tmp_path)
    with RunLock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    assert capsys.readouterr().err == (f"warning: run folder {tmp_path} was locked by process {holder.pid}, which is "
                                       f"no longer running; lock taken over\n")
    assert not (tmp_path / LOCK_NAME).exists()


def test_checking_a_folder_creates_nothing(tmp_path):
    refuse_if_held(tmp_path)
    assert list(tmp_path.iterdir()) == []


def _wait_for_checkpoint(run_dir, process, timeout=120) -> None:
    deadline = time.time() + timeout
    while not complete_steps(run_dir / "checkpoints"):
        assert process.poll() is None, process.communicate()
        assert time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_second_training_process_is_refused_and_a_killed_ones_run_is_taken_over(tmp_path):
    # no learning (neither process reaches learning_starts: no update compiled while the first is waited on, killed
    # or resumed), no periodic evaluation and one final evaluation episode: the lock is what is tested, not the run
    args = ["--env", "CartPole", "--total-steps", "100000", "--checkpoint-every", "500", "--quiet",
            "--set", "run.learning_starts=50000",
            "--set", "run.eval_every=0", "--set", "run.final_eval_episodes=1",
            "--logdir", str(tmp_path), "--run-name", "r"]
    first = subprocess.Popen([sys.executable, "-m", "tfdqn.train", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    run_dir = tmp_path / "r"
    try:
        _wait_for_checkpoint(run_dir, first)
        for second in (args, ["--resume", str(run_dir)]):  # the same --run-name, and --resume of a live run
            result = run_module("tfdqn.train", *second, timeout=60)
            assert (result.returncode, result.stdout) == (2, "")
            assert result.stderr == (f"python -m tfdqn.train: error: run folder {run_dir} is being written by "
                                     f"process {first.pid}; allowed: a folder no running process writes (another "
                                     f"--run-name, or --resume once process {first.pid} has ended)\n")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    extended = complete_steps(run_dir / "checkpoints")[0] + 300
    resumed = run_module("tfdqn.train", "--resume", str(run_dir), "--total-steps", str(extended), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr == (f"warning: run folder {run_dir} was locked by process {first.pid}, which is no longer "
                              f"running; lock taken over\n")
    assert not (run_dir / LOCK_NAME).exists()  # released at the end
