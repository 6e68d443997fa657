"""A SIGTERM to the learner's whole process group (systemd's KillMode, Slurm's scancel, `kill -TERM -PGID`)
reaches its actors too: the stop must win over the actors' deaths, whatever order they arrive in."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import REPO, SMALL_CARTPOLE, wait_for_checkpoints


def _session_processes(sid: int) -> list[psutil.Process]:
    """Every live process (zombies aside) of session `sid`: the learner, its actors, Ray's processes."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == sid and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["process", "ray"])
def test_a_sigterm_to_the_whole_group_stops_the_run_with_its_checkpoint_and_no_restart(tmp_path, kind):
    if kind == "ray":
        pytest.importorskip("ray")
    # Envs that wait 20 ms a step keep the learner waiting for chunks, where it meets the dead actors.
    command = [sys.executable, "-m", "tfdqn.train", *SMALL_CARTPOLE, "--actors", kind, "--set", "actors.count=2",
               "--set", "actors.cpus_per_actor=0.5", "--set", "env.step_delay_ms=20", "--total-steps", "1e6", "--checkpoint-every", "100",
               "--learning-starts", "100", "--quiet", "--logdir", str(tmp_path), "--run-name", "a"]
    learner = subprocess.Popen(command, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, start_new_session=True)
    sid = learner.pid  # a session leader's id is its session's and its group's
    try:
        wait_for_checkpoints(learner, tmp_path / "a" / "checkpoints", count=2)
        time.sleep(2.0)  # the learner waits for the actors' next chunks
        os.killpg(sid, signal.SIGTERM)
        output, _ = learner.communicate(timeout=120)
    finally:
        if learner.poll() is None:
            os.killpg(sid, signal.SIGKILL)
    deadline = time.monotonic() + 15  # an empty session stays empty: nothing is left to start a process
    while _session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [" ".join(p.cmdline()[:3]) for p in _session_processes(sid)]
    assert learner.returncode == 143, output
    assert "restarting" not in output, output
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["stopped_by"] == "SIGTERM" and summary["actors"]["restarts"] == 0
    assert (tmp_path / "a" / "checkpoints" / f"ckpt-{summary['env_steps']}.complete").exists()
    assert not left, left


NO_XLA = {"compute.act_jit_compile": False}  # the actors these tests start act without an XLA compile each


def _collector(config, stop_requested):
    from tfdqn.actors.collector import RemoteCollector
    from tfdqn.actors.process import ProcessActors
    from tfdqn.agent.agent import make_agent
    from tfdqn.envs.make import make_env
    from tfdqn.telemetry.phase_timer import PhaseTimer

    spec = make_env(config.env, seed=0)[1]
    agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)
    actors = ProcessActors(config)
    collector = RemoteCollector(actors, config, spec, agent.counters, agent.online, lambda frames, streams: None,
                                PhaseTimer(), should_stop=stop_requested)
    return collector, actors, agent


@pytest.mark.slow
def test_a_stop_request_wins_over_actors_that_died_with_it():
    """The deaths come first here, as they may when a group signal kills the actors before the learner
    looks at its stop request: no restart, no failure, the collection just stops."""
    from tfdqn.config import DQNConfig
    from tfdqn.run.collectors import CollectionStopped

    config = DQNConfig.for_env("CartPole", {"actors.kind": "process", "actors.chunk_steps": 8, **NO_XLA})
    stop = []
    collector, actors, _ = _collector(config, lambda: bool(stop))
    try:
        collector.collect()  # every actor started and answered once
        pids = [actors.whereabouts(i)["pid"] for i in range(config.actors.count)]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        psutil.wait_procs([psutil.Process(pid) for pid in pids], timeout=10)
        stop.append(signal.SIGTERM)
        with pytest.raises(CollectionStopped):
            for _ in range(100):
                collector.collect()
        assert collector.restarts == 0
    finally:
        collector.close()


@pytest.mark.slow
def test_stuck_actors_ignore_sigterm_and_are_closed_together_within_one_deadline():
    """Each env step waits ten minutes: the actors never read their closed pipes. Closing two of them
    takes one deadline, not one each (two deadlines would be 2 x STOP_SECONDS, past the bound)."""
    from tfdqn.actors.process import STOP_SECONDS
    from tfdqn.config import DQNConfig

    config = DQNConfig.for_env("CartPole", {"actors.kind": "process", "actors.count": 2, "env.step_delay_ms": 600_000,
                                            **NO_XLA})
    collector, actors, _ = _collector(config, lambda: False)
    collector._start(list(range(2)))
    processes = [psutil.Process(actors.whereabouts(i)["pid"]) for i in range(2)]
    _wait_until_stepping(processes)
    for process in processes:
        process.send_signal(signal.SIGTERM)  # as a group signal would: they ignore it
    time.sleep(1.0)
    assert all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes)
    started = time.monotonic()
    collector.close()
    assert time.monotonic() - started < STOP_SECONDS + 3
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes)


def _wait_until_stepping(processes, timeout: float = 180) -> None:
    """Until every process has started (TensorFlow's import costs seconds of CPU) and then sits still
    for two seconds: stuck in its first env step."""
    deadline, quiet = time.time() + timeout, 0
    used = [sum(p.cpu_times()[:2]) for p in processes]
    while quiet < 2:
        assert time.time() < deadline, "the actors never reached their first env step"
        time.sleep(1.0)
        now = [sum(p.cpu_times()[:2]) for p in processes]
        still = all(n - u < 0.02 and n > 1.0 for n, u in zip(now, used))
        quiet, used = quiet + 1 if still else 0, now


@pytest.mark.slow
def test_actors_stuck_in_an_env_step_end_when_the_learner_is_killed(tmp_path):
    from tests.test_actors import Learner, _gone

    learner = Learner(*SMALL_CARTPOLE, "--actors", "process", "--set", "actors.count=2", "--total-steps", "1e6",
                      "--quiet", "--set", "env.step_delay_ms=600000", "--logdir", str(tmp_path), "--run-name", "a")
    actors = learner.wait_for_actors()
    _wait_until_stepping(actors)
    learner.process.kill()
    assert learner.exit_code() == -signal.SIGKILL
    assert _gone(actors, timeout=5)  # each looks for a new parent every half second
