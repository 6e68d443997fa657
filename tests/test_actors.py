"""Actors in their own processes (and as Ray actors) feeding one learner: real processes, real signals."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest

from tests.conftest import REPO, SMALL_CARTPOLE, TINY, cmdline, train_in_process
from tfdqn.config import DQNConfig
from tfdqn.telemetry.tensorboard import read_scalars

PROCESS_ACTORS = ["--actors", "process", "--set", "actors.count=2"]


class Learner:
    """`python -m tfdqn.train` as a real process whose output is read while it runs, and its actors."""

    def __init__(self, *args, env: dict | None = None):
        self.process = subprocess.Popen([sys.executable, "-m", "tfdqn.train", *args], cwd=REPO, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env={**(env or os.environ), "TF_CPP_MIN_LOG_LEVEL": "2"})
        self.out, self.err = [], []
        self._readers = [threading.Thread(target=lambda s=stream, lines=lines: lines.extend(s), daemon=True)
                         for stream, lines in ((self.process.stdout, self.out), (self.process.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    def actors(self) -> list[psutil.Process]:
        """The learner's actor processes (multiprocessing's spawned children, not its resource tracker)."""
        try:
            children = psutil.Process(self.process.pid).children()
        except psutil.NoSuchProcess:
            return []
        return [c for c in children if _is_actor(c)]

    def wait_for(self, condition, timeout=120, what="condition"):
        deadline = time.time() + timeout
        while not (value := condition()):
            assert self.process.poll() is None, f"learner ended ({self.process.returncode}) before {what}: {self.err}"
            assert time.time() < deadline, f"no {what} within {timeout} s; stdout: {self.out}"
            time.sleep(0.05)
        return value

    def wait_for_actors(self, count=2):
        def all_started():
            actors = self.actors()
            return actors if len(actors) == count else None

        return self.wait_for(all_started, what=f"{count} actors")

    def exit_code(self, timeout=60) -> int:
        """Its exit code, once it and everything holding its output (its actors) have ended."""
        code = self.process.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=timeout)
        return code


def _is_actor(process: psutil.Process) -> bool:
    return "spawn_main" in " ".join(cmdline(process))


def _gone(processes, timeout=15) -> bool:
    """Every process ended (a zombie awaiting its parent's wait counts as ended)."""
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    return all(p.status() == psutil.STATUS_ZOMBIE for p in alive if p.is_running())


def test_a_worker_sends_chunks_that_continue_each_other_with_final_frames_where_episodes_end():
    from tfdqn.actors.worker import ActorWorker

    config = DQNConfig.for_env("CartPole", {"actors.envs_per_actor": 2, "actors.chunk_steps": 60})
    worker = ActorWorker(config, index=1, seed=7)
    try:
        first = worker.collect(None, 0, env_steps=0)
        weights = [np.zeros_like(w) for w in worker._network.get_weights()]
        second = worker.collect(weights, 700, env_steps=10_000)
        third = worker.collect(None, 900, env_steps=10_500)
    finally:
        worker.close()
    assert first.actor == 1 and first.frame.shape == (60, 2, 4) and first.action.shape == (60, 2)
    # Each chunk says which weights it acted with (kept until new ones come) and where its epsilon clock started.
    assert [(c.weights_updates, c.start_env_steps) for c in (first, second, third)] == [(0, 0), (700, 10_000),
                                                                                           (700, 10_500)]
    np.testing.assert_array_equal(second.frame[0], first.next_frame)  # no frame lost between chunks
    for chunk in (first, second):
        ended = np.argwhere(chunk.terminated | chunk.truncated)
        np.testing.assert_array_equal(chunk.ended, ended)
        assert len(chunk.final_frame) == len(ended) and chunk.busy_seconds > 0
        assert {(t, m) for t, m, _, _ in chunk.games} <= {tuple(e) for e in ended}
    assert len(first.ended) > 0  # a random CartPole policy ends an episode within 60 steps
    # With all-zero weights every Q-value ties, so argmax picks action 0 except where epsilon explores;
    # at env step 10,000 the schedule is at its end (0.04 in cartpole.yaml).
    assert (second.action == 0).mean() > 0.8


def test_a_compressing_worker_sends_its_frames_as_codes_of_the_same_frames():
    """With replay.compression the actor codes each frame itself: the same play, a fraction of the bytes."""
    import pickle

    from tfdqn.actors.worker import ActorWorker
    from tfdqn.replay.frame_codec import EncodedFrames, decode_frames

    chunks = {}
    for codec in ("none", "zstd"):
        config = DQNConfig.for_env("Breakout", {"actors.envs_per_actor": 2, "actors.chunk_steps": 100,
                                                "replay.compression": codec, "env.max_episode_frames": 200})
        worker = ActorWorker(config, index=0, seed=3)
        try:
            chunks[codec] = worker.collect(None, 0, env_steps=0)
        finally:
            worker.close()
    raw, coded = chunks["none"], chunks["zstd"]
    assert isinstance(coded.frame, EncodedFrames) and coded.frame.shape == (100, 2)
    assert len(raw.ended) > 0  # episodes of 50 agent steps end inside the chunk
    np.testing.assert_array_equal(decode_frames(coded.frame, (84, 84), np.uint8), raw.frame)
    np.testing.assert_array_equal(decode_frames(coded.final_frame, (84, 84), np.uint8), raw.final_frame)
    np.testing.assert_array_equal(coded.next_frame, raw.next_frame)  # raw: the learner keeps them as they are
    assert len(pickle.dumps(coded)) < len(pickle.dumps(raw)) / 5


def test_apex_exploration_gives_each_actor_its_own_fixed_epsilon():
    from tfdqn.actors.worker import actor_exploration

    config = DQNConfig.for_env("CartPole", {"actors.exploration": "apex", "actors.count": 8})
    epsilons = [actor_exploration(config, i) for i in range(8)]
    assert epsilons[0].epsilon_start == epsilons[0].epsilon_end == pytest.approx(0.4)
    assert epsilons[7].epsilon_end == pytest.approx(0.4 ** 8)
    assert all(a.epsilon_end > b.epsilon_end for a, b in zip(epsilons, epsilons[1:]))
    schedule = DQNConfig.for_env("CartPole", {"actors.count": 8})
    assert actor_exploration(schedule, 3) == schedule.exploration


@pytest.mark.slow
def test_each_actor_writes_its_own_replay_streams_and_leaves_the_env_step_counter_to_the_loop():
    from tfdqn.actors.collector import RemoteCollector
    from tfdqn.actors.process import ProcessActors
    from tfdqn.agent.agent import make_agent
    from tfdqn.envs.make import make_env
    from tfdqn.replay.ring import ReplayRing
    from tfdqn.telemetry.phase_timer import PhaseTimer

    config = DQNConfig.for_env("CartPole", {"actors.kind": "process", "actors.envs_per_actor": 2,
                                            "actors.chunk_steps": 8, "compute.act_jit_compile": False})  # no compile each
    spec = make_env(config.env, seed=0)[1]
    agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)
    replay = ReplayRing(20_000, spec.frame_shape, spec.frame_dtype, num_streams=config.num_streams)
    collector = RemoteCollector(ProcessActors(config), config, spec, agent.counters, agent.online,
                                replay.cut_episodes, PhaseTimer())
    try:
        seen = []
        while len(set(seen)) < 2 or len(seen) < 64:  # whichever actor starts first may send many chunks first
            step = collector.collect()
            replay.add(step.frame, step.action, step.reward, step.terminated, step.truncated, step.final_frame,
                       step.streams)
            assert agent.counters.read() == (2 * len(seen), 0)  # the collector never moves it
            agent.counters.env_steps.assign_add(len(step.action))  # as the loop does
            seen.append(tuple(int(s) for s in step.streams))
    finally:
        collector.close()
    assert set(seen) == {(0, 1), (2, 3)}  # actor i writes streams 2i and 2i + 1
    assert agent.counters.read() == (2 * len(seen), 0) and len(replay) >= 2 * len(seen) - 4
    state = collector.state()
    assert state.frames.shape == (4, 4) and state.env is None


@pytest.mark.slow
def test_process_actors_feed_the_learner_at_the_configured_ratio_and_leave_no_process(tmp_path):
    learner = Learner(*TINY, *PROCESS_ACTORS, "--total-steps", "1500", "--training-interval", "2",
                      "--set", "actors.envs_per_actor=2", "--set", "replay.audit=true", "--logdir", str(tmp_path),
                      "--run-name", "a")
    actors = learner.wait_for_actors()
    assert learner.exit_code(timeout=180) == 0, learner.err
    assert _gone(actors, timeout=5)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    per_actor = summary["actors"].pop("per_actor")
    assert summary["actors"] == {"kind": "process", "count": 2, "envs_per_actor": 2, "restarts": 0, "lost_chunks": 0}
    assert sum(actor["env_steps"] for actor in per_actor) == 1500 and all(a["env_steps"] > 0 for a in per_actor)
    assert all(len(actor["lives"]) == 1 and "node" not in actor["lives"][0] for actor in per_actor)
    assert summary["env_steps"] == 1500 and summary["updates"] == (1500 - 500) // 2  # the ratio, exactly
    assert summary["replay_audit_checked"] == summary["updates"] * 64  # every batch found as the actors wrote it
    assert summary["phase_shares"]["act"] == summary["phase_shares"]["env_step"] == 0  # done by the actors
    assert summary["episodes"] > 0 and summary["final_eval_episodes"] == 2
    assert read_scalars(tmp_path / "a", "perf/share_wait") and not read_scalars(tmp_path / "a", "perf/share_act")


@pytest.mark.slow
def test_a_killed_actor_is_restarted_once_and_a_second_kill_stops_the_run_in_one_line(tmp_path):
    learner = Learner(*SMALL_CARTPOLE, *PROCESS_ACTORS, "--total-steps", "1e6", "--quiet",
                      "--set", "env.step_delay_ms=1", "--logdir", str(tmp_path), "--run-name", "a")
    first, other = learner.wait_for_actors()
    learner.wait_for(lambda: any("replay:" in line for line in learner.out), what="the replay line")
    time.sleep(1.0)  # the actors step
    first.kill()
    restarted = learner.wait_for(lambda: next((line for line in learner.out if "restarting it" in line), None),
                                 what="the restart line")
    assert re.search(rf"actor \d \(pid {first.pid}\) was killed by SIGKILL; restarting it with seed \d+", restarted)
    index = re.search(r"actor (\d)", restarted).group(1)
    replacement = learner.wait_for(
        lambda: next((p for p in learner.actors() if p.pid not in (first.pid, other.pid)), None), what="a new actor")
    time.sleep(1.0)
    replacement.kill()
    killed_at = time.time()
    assert learner.exit_code(timeout=30) == 1
    assert time.time() - killed_at < 10
    lines = [line for line in learner.err if line.strip()]
    assert len(lines) == 1 and re.fullmatch(
        rf"python -m tfdqn.train: error: actor {index} \(pid {replacement.pid}\) was killed by SIGKILL after its one restart; "
        r"last checkpoint: .*\n", lines[0]), lines
    assert _gone([other], timeout=10)


@pytest.mark.slow
def test_a_learner_stopped_by_ctrl_c_checkpoints_and_stops_every_actor(tmp_path):
    """SIGINT, Ctrl-C's signal, to the learner (actors ignore it); SIGTERM: the stuck actors' test below, and to the
    whole process group in tests/test_actors_signals.py."""
    learner = Learner(*SMALL_CARTPOLE, *PROCESS_ACTORS, "--total-steps", "1e6", "--quiet",
                      "--logdir", str(tmp_path), "--run-name", "a")
    actors = learner.wait_for_actors()
    learner.wait_for(lambda: any("replay:" in line for line in learner.out), what="the replay line")
    time.sleep(2.0)
    learner.process.send_signal(signal.SIGINT)
    assert learner.exit_code() == 130, learner.err
    assert _gone(actors, timeout=5)
    assert list((tmp_path / "a" / "checkpoints").glob("ckpt-*.complete"))


@pytest.mark.slow
def test_a_learner_waiting_on_stuck_actors_still_stops_on_sigterm(tmp_path):
    learner = Learner(*SMALL_CARTPOLE, *PROCESS_ACTORS, "--total-steps", "1e6", "--quiet",
                      "--set", "env.step_delay_ms=600000", "--logdir", str(tmp_path), "--run-name", "a")
    actors = learner.wait_for_actors()  # each of their env steps waits 10 minutes: no chunk ever comes
    learner.wait_for(lambda: any("replay:" in line for line in learner.out), what="the replay line")
    time.sleep(2.0)
    learner.process.send_signal(signal.SIGTERM)
    stopped_at = time.time()
    assert learner.exit_code(timeout=60) == 143, learner.err
    assert time.time() - stopped_at < 20  # the wait looks at the stop request every second; stuck actors are terminated
    assert _gone(actors, timeout=5)
    assert any("stopped by SIGTERM" in line for line in learner.err)
    assert list((tmp_path / "a" / "checkpoints").glob("ckpt-*.complete"))


@pytest.mark.slow
def test_after_the_learner_is_killed_its_actors_exit_and_the_run_resumes_from_its_checkpoint(tmp_path):
    learner = Learner(*TINY, *PROCESS_ACTORS, "--total-steps", "1500", "--checkpoint-every", "1000",
                      "--set", "replay.audit=true", "--logdir", str(tmp_path), "--run-name", "a")
    actors = learner.wait_for_actors()
    checkpoints = tmp_path / "a" / "checkpoints"
    learner.wait_for(lambda: list(checkpoints.glob("ckpt-*.complete")), what="a checkpoint")
    learner.process.kill()
    assert learner.exit_code() == -signal.SIGKILL
    assert _gone(actors, timeout=15)  # they notice the closed pipe
    result = train_in_process("--resume", str(tmp_path / "a"), "--quiet")  # only read back: no learner of its own
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["env_steps"] == 1500 and summary["resumed_from_env_steps"] >= 1000
    assert summary["actors"]["kind"] == "process" and summary["actors"]["restarts"] == 0
    assert summary["replay_audit_checked"] > 0  # the batches after the resume, each as the actors wrote it


def test_a_run_given_an_address_where_no_cluster_answers_stops_at_once_in_one_line_and_starts_no_ray(tmp_path):
    """An address where nothing listens, and one that is no host:port (`auto` would join whatever Ray another test
    runs on this machine: Ray's rule). Ray itself would wait minutes on the first; the run stops before it imports
    Ray or TensorFlow."""
    pytest.importorskip("ray")
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_TMPDIR": str(tmp_path / "tmp")}
    train = "import sys; from tfdqn.train import main\ntry: sys.exit(main(sys.argv[1:]))\nfinally: print(sorted(" \
            "{'ray', 'tensorflow'} & set(sys.modules)))"  # what it imported before it stopped
    for given, reason in ((address, "ConnectionRefusedError: "), ("head-node", "not host:port")):
        result = subprocess.run([sys.executable, "-c", train, "--env", "CartPole", "--actors", "ray", "--ray-address",
                                 given, "--logdir", str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True,
                                env=env, timeout=60)
        assert (result.returncode, result.stderr.count("\n"), result.stdout) == (2, 1, "[]\n"), result
        assert result.stderr.startswith(f"python -m tfdqn.train: error: actors.ray_address {given!r}: no Ray cluster "
                                        f"answers there ({reason}")
        assert not list(tmp_path.glob("runs/*")) and not list(tmp_path.glob("tmp/ray/session_*"))  # no run, no Ray


def test_actor_settings_are_checked_in_one_line(run_cmd, tmp_path):
    result = run_cmd("tfdqn.train", "--env", "CartPole", "--actors", "threads", "--logdir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr == "python -m tfdqn.train: error: config key actors.kind = 'threads' is out of range; allowed: inline, process, ray\n"
    result = run_cmd("tfdqn.train", "--env", "CartPole", "--ray-address", "auto", "--logdir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr == ("python -m tfdqn.train: error: --ray-address 'auto' needs actors.kind = 'ray', not 'inline'; "
                             "allowed: --actors ray\n")
    result = run_cmd("tfdqn.train", "--env", "CartPole", "--actors", "process", "--deterministic", "--logdir", str(tmp_path))
    assert result.returncode == 2 and "compute.deterministic = True with actors.kind = 'process'" in result.stderr
    assert not any(tmp_path.iterdir())
