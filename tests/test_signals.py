"""Graceful stop: StopRequest in this process, and in child processes sent real signals."""

import signal
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO, TINY
from tfdqn.run.signals import StopRequest, exit_code

# A run in small: wait for a stop request, report it, then a "checkpoint" that takes long.
CHILD = textwrap.dedent("""
    import sys, time
    from tfdqn.run.signals import StopRequest, exit_code
    with StopRequest() as stop:
        print("ready", flush=True)
        while not stop.requested:
            time.sleep(0.01)
        print("stopping", stop.signal_name, flush=True)
        time.sleep(float(sys.argv[1]))
    print("finished", flush=True)
    sys.exit(exit_code(stop.signal_name))
""")


def _start_child(checkpoint_seconds: float) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(checkpoint_seconds)], cwd=REPO, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout.readline() == "ready\n"
    return child


def _stop(child: subprocess.Popen, signum: int) -> None:
    child.send_signal(signum)
    assert child.stdout.readline() == f"stopping {signal.Signals(signum).name}\n"


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_one_signal_lets_the_run_finish_and_exit_with_its_code(signum, code):
    child = _start_child(0.2)
    _stop(child, signum)
    out, err = child.communicate(timeout=30)
    assert (child.returncode, out, err) == (code, "finished\n", "")


def test_a_second_sigint_exits_at_once_with_130():
    child = _start_child(60)
    _stop(child, signal.SIGINT)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=10)  # long before the 60 s "checkpoint" ends
    assert (child.returncode, out, err) == (130, "", "")


def test_a_sigterm_while_stopping_neither_exits_nor_renames_the_stop():
    child = _start_child(0.5)
    _stop(child, signal.SIGINT)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    assert (child.returncode, out, err) == (130, "finished\n", "")


def test_the_first_signal_sets_the_request_in_this_process():
    with StopRequest() as stop:
        assert not stop.requested and stop.signal_name is None
        signal.raise_signal(signal.SIGTERM)
        assert stop.requested and stop.signal_number == signal.SIGTERM and stop.signal_name == "SIGTERM"
        signal.raise_signal(signal.SIGTERM)  # a repeated SIGTERM is not a second Ctrl-C
        assert stop.signal_name == "SIGTERM"


def test_the_previous_handlers_come_back_on_exit():
    def mine(signum, frame):
        pass

    before_int = signal.getsignal(signal.SIGINT)
    previous_term = signal.signal(signal.SIGTERM, mine)
    try:
        with StopRequest():
            installed = signal.getsignal(signal.SIGINT)
            assert installed == signal.getsignal(signal.SIGTERM) and installed not in (before_int, mine)
        assert signal.getsignal(signal.SIGINT) is before_int and signal.getsignal(signal.SIGTERM) is mine
        with pytest.raises(RuntimeError):  # restored also when the run fails
            with StopRequest():
                raise RuntimeError("the loop failed")
        assert signal.getsignal(signal.SIGINT) is before_int and signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous_term)


def test_exit_code_follows_the_shell_convention():
    assert exit_code("SIGINT") == 130 and exit_code("SIGTERM") == 143
    assert exit_code("SIGINT") == 128 + int(signal.SIGINT)
    with pytest.raises(KeyError):
        exit_code("SIGNOPE")


def test_ctrl_c_during_start_up_ends_the_command_in_one_line_with_130(tmp_path):
    """Before the run's stop handler exists (here: while TensorFlow imports), SIGINT is the CLI's to report."""
    # SIGINT at its default in the child, as a terminal's Ctrl-C finds it: a test runner's worker may ignore
    # SIGINT, the child would inherit that, and Python then installs no KeyboardInterrupt handler
    child = subprocess.Popen([sys.executable, "-m", "tfdqn.train", *TINY, "--logdir", str(tmp_path)], cwd=REPO,
                             text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert child.stdout.readline().startswith("run folder: ")
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert (child.returncode, err) == (130, "python -m tfdqn.train: interrupted by SIGINT\n")


def test_a_run_started_off_the_main_thread_trains_and_leaves_the_signal_handlers_alone(tmp_path):
    """A notebook's worker thread or a Ray Tune trainable: no signal handler can be installed there (Python
    raises ValueError), so the run leaves the process's handlers alone; `request` stops as a signal would."""
    import threading

    from tfdqn import config as config_lib
    from tfdqn.run import loop

    config = config_lib.build_config([REPO / "tests" / "data" / "cartpole_5000.yaml"], {
        "run.total_steps": 300, "run.learning_starts": 100, "run.final_eval_episodes": 1})
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    summaries = {}
    thread = threading.Thread(target=lambda: summaries.update(done=loop.train(config, tmp_path / "a", quiet=True)))
    thread.start()
    thread.join(120)
    assert summaries["done"]["env_steps"] == 300 and "stopped_by" not in summaries["done"]
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers

    stop = StopRequest()
    stop.request(signal.SIGTERM)
    assert stop.requested and stop.signal_name == "SIGTERM"
