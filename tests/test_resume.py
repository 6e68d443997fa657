"""Stop, kill, fault and resume real `python -m tfdqn.train` processes."""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO, SMALL_CARTPOLE, SMALL_CONFIG, TINY, run_module, train_in_process
from tests.test_checkpoint import files_and_hashes


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "tfdqn.train", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


def _wait_for(path, process, timeout=120, pattern=None):
    """Wait until `path` exists (or, with `pattern`, holds a file matching it) while `process` runs."""
    deadline = time.time() + timeout
    while not (any(path.glob(pattern)) if pattern and path.is_dir() else path.exists() and not pattern):
        assert process.poll() is None, process.communicate()
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("settings", [[], ["--set", "replay.device=accelerator", "--num-envs", "3"],
                                      ["--preset", "rainbow", "--training-interval", "8"],
                                      ["--preset", "rainbow", "--training-interval", "8", "--set",
                                       "replay.device=accelerator", "--set", "network.noise_refresh=call"]],
                         ids=["host-replay", "device-replay-3-envs", "rainbow-host", "rainbow-device-per-call-noise"])
def test_sigkill_then_resume_finishes_and_repeats_the_uninterrupted_run(cartpole_run, tmp_path, settings):
    """(A prefetched run with compressed frames, whose checkpoints hold the batches drawn ahead, is held to the same
    through five SIGKILLs in tests/test_replay_audit.py.)"""
    same_run = not settings  # the session's cartpole_run is the uninterrupted host-replay, one-env run
    # the other modes train a shorter run of their own: killed after its checkpoint at 600 of 900 env steps
    total, kill_after = (1500, 1000) if same_run else (900, 600)
    shorter = [] if same_run else ["--total-steps", "900", "--learning-starts", "300", "--checkpoint-every", "600"]
    args = [*TINY, "--seed", "3", *settings, *shorter, "--logdir", str(tmp_path)]
    if not same_run:
        assert train_in_process(*args, "--run-name", "whole").returncode == 0
    uninterrupted = cartpole_run[0] if same_run else tmp_path / "whole"
    process = _start(*args, "--run-name", "killed")
    run_dir = tmp_path / "killed"
    _wait_for(run_dir / "checkpoints", process, pattern=f"ckpt-{kill_after // 100}*.complete")  # 600 with 3 envs too
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    result = train_in_process("--resume", str(run_dir), "--quiet")  # a fresh process resumes in test_replay_audit
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == total and summary["resumed_from_env_steps"] >= kill_after
    assert (run_dir / "episodes.csv").read_text() == (uninterrupted / "episodes.csv").read_text()
    assert summary["final_eval_returns"] == json.loads((uninterrupted / "summary.json").read_text())["final_eval_returns"]
    resumed_weights, whole_weights = (variables(d / "checkpoints" / f"ckpt-{total}") for d in (run_dir, uninterrupted))
    assert resumed_weights.keys() == whole_weights.keys()
    assert [name for name in whole_weights if not np.array_equal(resumed_weights[name], whole_weights[name])] == []


def test_the_faults_guides_exactness_table_names_tests_that_exist():
    """docs/guide/faults.md's "Which runs repeat exactly": each name in its last column is an id of the SIGKILL test
    above, a test of this file, or a test file that exists (the table named ids that had been renamed)."""
    text = (REPO / "docs" / "guide" / "faults.md").read_text()
    table = text.split("## Which runs repeat exactly", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    (mark,) = [m for m in test_sigkill_then_resume_finishes_and_repeats_the_uninterrupted_run.pytestmark
               if m.name == "parametrize"]
    named = [name for row in rows for name in re.findall(r"`([^`]+)`", row[-1])]
    assert len(rows) >= 10 and len(named) >= 8, rows
    for name in named:
        if name.endswith(".py"):
            assert (REPO / name).is_file(), name
        elif name.startswith("test_"):
            assert [f for f in globals() if f.startswith(name.rstrip("."))], name
        else:
            assert name in mark.kwargs["ids"], name


def variables(prefix) -> dict:
    """Every variable a TensorFlow checkpoint holds (networks, optimizer, counters, RNG) by name, but the run
    clock's seconds, which a stop adds to."""
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if not name.startswith(("run_seconds/", "_CHECKPOINTABLE_OBJECT_GRAPH"))}


@pytest.mark.slow
def test_the_shipped_cartpole_config_stopped_and_resumed_repeats_the_uninterrupted_run(tmp_path):
    """`--env CartPole` as shipped (3-step returns, 8 envs, rounds of 256 XLA updates, periodic
    evaluation): SIGKILLed after its checkpoint at 2,048 and resumed, it repeats the uninterrupted run's
    games, periodic evaluations and final network."""
    args = ["--env", "CartPole", "--total-steps", "3072", "--checkpoint-every", "2048", "--quiet",
            "--set", "run.eval_every=1024", "--set", "run.eval_episodes=2", "--set", "run.final_eval_episodes=2",
            "--logdir", str(tmp_path)]
    assert train_in_process(*args, "--run-name", "whole").returncode == 0
    process = _start(*args, "--run-name", "killed")
    run_dir = tmp_path / "killed"
    _wait_for(run_dir / "checkpoints", process, timeout=240, pattern="ckpt-2048.complete")
    process.send_signal(signal.SIGKILL)
    process.wait()
    result = train_in_process("--resume", str(run_dir), "--quiet")
    assert result.returncode == 0, result.stderr
    whole, resumed = (json.loads((tmp_path / name / "summary.json").read_text()) for name in ("whole", "killed"))
    assert resumed["resumed_from_env_steps"] == 2048 and resumed["env_steps"] == whole["env_steps"] == 3072
    assert (run_dir / "episodes.csv").read_text() == (tmp_path / "whole" / "episodes.csv").read_text()
    for key in ("final_network", "final_eval_returns", "last_network_eval_return_mean"):
        assert resumed[key] == whole[key], key


@pytest.mark.slow
def test_resume_extends_total_steps(finished_run, tmp_path):
    run_dir = _finished_run(finished_run, tmp_path)
    result = train_in_process("--resume", str(run_dir), "--total-steps", "900", "--quiet")
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["env_steps"], summary["resumed_from_env_steps"], summary["updates"]) == (900, 600, 700)


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_checkpoints_and_exits_cleanly_within_seconds(tmp_path, signum, code):
    process = _start(*SMALL_CARTPOLE, "--total-steps", "100000", "--checkpoint-every", "500", "--quiet",
                     "--logdir", str(tmp_path), "--run-name", "s")
    _wait_for(tmp_path / "s" / "checkpoints" / "ckpt-500.complete", process)
    sent = time.time()
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert time.time() - sent < 10 and process.returncode == code
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["stopped_by"] == signal.Signals(signum).name
    assert (tmp_path / "s" / "checkpoints" / f"ckpt-{summary['env_steps']}.complete").exists()
    assert f"--resume {tmp_path / 's'}" in stderr and "Traceback" not in stderr


@pytest.mark.slow
def test_a_second_sigint_exits_at_once(tmp_path):
    process = _start(*SMALL_CARTPOLE, "--total-steps", "100000", "--checkpoint-every", "500", "--quiet",
                     "--logdir", str(tmp_path), "--run-name", "s")
    _wait_for(tmp_path / "s" / "checkpoints" / "ckpt-500.complete", process)
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=10)
    assert process.returncode == 130


@pytest.mark.slow
def test_nan_loss_halts_with_the_env_step_and_keeps_the_last_good_checkpoint(tmp_path):
    result = run_module("tfdqn.train", "--env", "tests.faulty_envs:NanRewardAfter-v0", *SMALL_CONFIG, "--total-steps", "4000",
                        "--learning-starts", "200", "--checkpoint-every", "1000", "--set", "run.log_every=100",
                        "--quiet", "--logdir", str(tmp_path), "--run-name", "nan")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "NaN or Inf at update" in lines[0], result.stderr
    step = int(re.search(r"env step (\d+)\)", lines[0]).group(1))
    assert 1201 <= step <= 1300  # rewards turn NaN after step 1200; the log every 100 steps catches it
    checkpoints = tmp_path / "nan" / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("*.complete")) == ["ckpt-1000.complete"]
    evaluation = run_module("tfdqn.evaluate", str(tmp_path / "nan"), "--episodes", "1")
    assert evaluation.returncode == 0, evaluation.stderr  # the kept checkpoint loads


@pytest.mark.slow
def test_disk_full_while_checkpointing_keeps_the_previous_checkpoint(tmp_path):
    mount = tmp_path / "small_disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        # A 256-256 network's checkpoint (about 1 MB of weights and Adam slots) fills the 3 MB disk within a few.
        result = run_module("tfdqn.train", *SMALL_CARTPOLE, "--total-steps", "5000", "--checkpoint-every", "500",
                            "--learning-starts", "200",
                            "--set", "network.hidden_sizes=[256,256]", "--quiet", "--logdir", str(mount),
                            "--run-name", "full")
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "could not be written" in lines[0] and "is intact" in lines[0], result.stderr
        assert "No space left on device" in lines[0]
        checkpoints = mount / "full" / "checkpoints"
        kept = sorted(p.name for p in checkpoints.glob("*.complete"))
        assert kept and not list(checkpoints.glob("*.tmp"))
        evaluation = run_module("tfdqn.evaluate", str(mount / "full"), "--episodes", "1")
        assert evaluation.returncode == 0, evaluation.stderr
    finally:
        subprocess.run(["umount", str(mount)])


@pytest.mark.slow
def test_a_crashing_env_is_reported_in_one_line_with_the_checkpoint_kept(tmp_path):
    result = run_module("tfdqn.train", "--env", "tests.faulty_envs:CrashAfter-v0", *SMALL_CONFIG, "--total-steps", "2000",
                        "--learning-starts", "200", "--checkpoint-every", "500", "--quiet",
                        "--logdir", str(tmp_path), "--run-name", "crash")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "failed at env step 701: RuntimeError: simulator lost its connection" in lines[0]
    assert "last checkpoint: env step 500" in lines[0]
    resumed = train_in_process("--resume", str(tmp_path / "crash"), "--quiet")
    assert resumed.returncode == 1 and "resumed from env step 500" in resumed.stdout


def test_resume_of_a_run_without_a_complete_checkpoint_is_refused(tmp_path):
    (tmp_path / "r" / "checkpoints").mkdir(parents=True)
    (tmp_path / "r" / "config.yaml").write_text("run:\n  seed: 1\n")
    (tmp_path / "r" / "checkpoints" / "ckpt-100.index").write_text("half written, no marker")
    result = run_module("tfdqn.train", "--resume", str(tmp_path / "r"), timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"python -m tfdqn.train: error: --resume {str(tmp_path / 'r')!r} holds no complete checkpoint; "
        f"allowed: a run folder that saved at least one checkpoint"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A run to env step 600 with checkpoints at 300 and 600, trained once for this file's tests; its folder."""
    logdir = tmp_path_factory.mktemp("finished")
    result = train_in_process(*SMALL_CARTPOLE, "--total-steps", "600", "--learning-starts", "200",
                              "--checkpoint-every", "300", "--set", "run.final_eval_episodes=1", "--quiet",
                              "--logdir", str(logdir), "--run-name", "r")
    assert result.returncode == 0, result.stderr
    return logdir / "r"


def _finished_run(finished_run, tmp_path):
    """A copy of `finished_run` of this test's own, `tmp_path`/r, to change and resume."""
    return pathlib.Path(shutil.copytree(finished_run, tmp_path / "r"))


GYM_CARTPOLE = "gymnasium.envs.classic_control.cartpole"
MOVED_CARTPOLE = "tfdqn_test_moved_cartpole_module".ljust(len(GYM_CARTPOLE), "x")  # same length: framing stays valid


@pytest.mark.slow
def test_a_checkpoint_naming_a_missing_module_is_refused_in_one_line_then_resumes_once_it_is_back(finished_run,
                                                                                                  tmp_path,
                                                                                                  monkeypatch):
    run_dir = _finished_run(finished_run, tmp_path)
    checkpoints = run_dir / "checkpoints"
    state = checkpoints / "state-600.pkl"  # what an upgrade that moved gymnasium's CartPole module looks like
    assert GYM_CARTPOLE.encode() in state.read_bytes()
    state.write_bytes(state.read_bytes().replace(GYM_CARTPOLE.encode(), MOVED_CARTPOLE.encode()))
    before = files_and_hashes(checkpoints)
    refused = run_module("tfdqn.train", "--resume", str(run_dir), "--total-steps", "900", "--quiet")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{MOVED_CARTPOLE}.CartPoleEnv" in lines[0], refused.stderr
    assert f"env step 600 in {checkpoints}" in lines[0] and "allowed: the versions that wrote it (" in lines[0]
    assert files_and_hashes(checkpoints) == before
    (tmp_path / f"{MOVED_CARTPOLE}.py").write_text(f"from {GYM_CARTPOLE} import *  # noqa: F403\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    resumed = run_module("tfdqn.train", "--resume", str(run_dir), "--total-steps", "900", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["resumed_from_env_steps"], summary["env_steps"]) == (600, 900)


@pytest.mark.slow
def test_resume_drops_a_torn_last_line_of_episodes_csv_and_appends_after_it(finished_run, tmp_path):
    run_dir = _finished_run(finished_run, tmp_path)
    episodes = run_dir / "episodes.csv"
    text = episodes.read_text()
    rows = text.splitlines()
    episodes.write_text(text[: len(text) - len(rows[-1]) + 1])  # the last row cut after its second character
    resumed = train_in_process("--resume", str(run_dir), "--total-steps", "900", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert f"warning: {episodes}: dropped 1 line(s) torn by a crash mid-write (first: {rows[-1][:2]!r})" \
        in resumed.stderr
    header, *now = episodes.read_text().splitlines()
    parsed = [(int(steps), float(episode_return), int(length)) for steps, episode_return, length in
              (row.split(",") for row in now)]
    assert header == rows[0] and now[: len(rows) - 2] == rows[1:-1]
    assert len(now) > len(rows) - 2 and all(steps > 600 for steps, _, _ in parsed[len(rows) - 2:])
    assert [steps for steps, _, _ in parsed] == sorted(steps for steps, _, _ in parsed)
