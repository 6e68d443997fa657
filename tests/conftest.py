"""Shared test helpers: quiet TensorFlow on one op thread per worker, the real command lines run as
subprocesses (or, for a training run a test only reads back, in the test's own process), and no process a test
started left running after it."""

import contextlib
import io
import os
import pathlib
import subprocess
import sys
import time

import psutil
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# `-n auto` runs a worker per core: TensorFlow in each worker and in the runs it starts then runs an op on one
# thread, where two threads each would oversubscribe the cores (the suite is CPU-bound)
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
REPO = pathlib.Path(__file__).resolve().parent.parent
HELPERS = ("resource_tracker", "forkserver")  # multiprocessing's, kept for the worker's life


@pytest.fixture(autouse=True)
def no_process_left():
    """Kills what a test started and left running (a failed test's learner, its actors and its Ray): on 2 cores
    it would slow every test after it. Processes started by wider fixtures (a cluster) were there before."""
    before = {child.pid for child in psutil.Process().children()}
    yield
    left = [child for child in psutil.Process().children() if child.pid not in before
            and not any(helper in " ".join(cmdline(child)) for helper in HELPERS)]
    trees = [process for child in left for process in (*descendants(child.pid), child)]
    for process in trees:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(trees, timeout=30)


def descendants(pid: int) -> list[psutil.Process]:
    """Its children, theirs, and so on; [] where it has ended."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def cmdline(process: psutil.Process) -> list[str]:
    """Its command line; [] where it has ended."""
    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


def run_module(module: str, *args: str, timeout: float = 300, env: dict | None = None,
               **kwargs) -> subprocess.CompletedProcess:
    """`python -m <module> args...` from the repository root (in `env`, default this process's), capturing text output."""
    env = {**(os.environ if env is None else env), "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env, **kwargs)


def main_in_process(main, *args: str) -> subprocess.CompletedProcess:
    """A command line's `main(args)` in this process, its output captured as `run_module` captures a subprocess's
    (a parser's refusal, SystemExit, is its exit code): a command the test only reads back costs no interpreter
    or TensorFlow start-up of its own (seconds of CPU each). Runs a test signals, kills or times stay subprocesses."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code
    return subprocess.CompletedProcess([main.__module__, *args], code, out.getvalue(), err.getvalue())


def train_in_process(*args: str) -> subprocess.CompletedProcess:
    """`python -m tfdqn.train args...` as `run_module` runs it, but in this process (`main_in_process`)."""
    from tfdqn.train import main

    return main_in_process(main, *args)


def checkpoint_steps(checkpoints) -> list[int]:
    """The env steps of the complete checkpoints in `checkpoints`, a run's folder of them."""
    return [int(p.name[len("ckpt-"):-len(".complete")]) for p in checkpoints.glob("ckpt-*.complete")]


def wait_for_checkpoints(process: subprocess.Popen, checkpoints, count: int, timeout: float = 300,
                         after: int = -1) -> None:
    """Until `checkpoints` (a run's folder of them) holds `count` complete ones of env steps past `after`, while
    `process` runs."""
    deadline = time.time() + timeout
    while len([step for step in checkpoint_steps(checkpoints) if step > after]) < count:
        assert process.poll() is None, (f"the learner ended ({process.returncode}) before {count} checkpoints: "
                                        f"{process.communicate()[1] if process.stderr else ''}")
        assert time.time() < deadline, f"no {count} checkpoints within {timeout} s"
        time.sleep(0.1)


@pytest.fixture
def run_cmd():
    return run_module


def tensorboard_tags(run_dir) -> set:
    from tfdqn.telemetry.tensorboard import read_events

    tags = read_events(run_dir).Tags()
    return set(tags["tensors"]) | set(tags["scalars"])


# CartPole with the structure the tests check pinned (tests/data/cartpole_small.yaml).
SMALL_CONFIG = ["--config", str(REPO / "tests" / "data" / "cartpole_small.yaml")]
SMALL_CARTPOLE = ["--env", "CartPole", *SMALL_CONFIG]
TINY_RUN = ["--total-steps", "1500", "--learning-starts", "500", "--checkpoint-every", "1000",
            "--set", "run.log_every=500", "--set", "run.final_eval_episodes=2", "--quiet"]
TINY = [*SMALL_CARTPOLE, *TINY_RUN]


@pytest.fixture(scope="session")
def cartpole_run(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("runs")
    result = train_in_process(*TINY, "--seed", "3", "--logdir", str(logdir), "--run-name", "a")
    assert result.returncode == 0, result.stderr
    return logdir / "a", result


# A short Breakout run with learning (a Nature CNN's weights past their initial ones), for the exports' tests.
BREAKOUT_SHORT = {"run.total_steps": 300, "run.learning_starts": 100, "replay.capacity": 1000, "run.log_every": 300,
                  "run.final_eval_episodes": 1, "env.max_episode_frames": 2000}


@pytest.fixture(scope="session")
def breakout_run(tmp_path_factory):
    import tfdqn

    run_dir = tmp_path_factory.mktemp("breakout") / "run"
    tfdqn.train(tfdqn.DQNConfig.for_env("Breakout", BREAKOUT_SHORT), run_dir, quiet=True)
    return run_dir
