"""The actors guide's 2 x 4 CartPole example (docs/guide/actors.md): how old the actors' weights and epsilon clock
are when the learner takes their chunks, as logged, against the bound RemoteCollector's docstring states; and
that the actors of each kind feed the learner at its configured ratio."""

import json
import math

import numpy as np
import pytest

from tests.conftest import run_module
from tfdqn.config import DQNConfig
from tfdqn.telemetry.tensorboard import read_scalars

README_ACTORS = ["--actors", "process", "--set", "actors.count=2", "--set", "actors.envs_per_actor=4"]
TOTAL_STEPS, STEADY_AFTER = 6000, 2000  # env steps of the run, and after which its windows are steady (learning
#                                         starts at 1024; the windows of 3000 on log the full lag)


def policy_lag_bound(config: DQNConfig) -> float:
    """weight_sync_period + one round of chunks (one per actor) in updates, rounded up to whole update rounds."""
    actors, run = config.actors, config.run
    round_env_steps = actors.count * actors.chunk_steps * actors.envs_per_actor
    return actors.weight_sync_period + math.ceil(round_env_steps / run.env_steps_per_round) * run.env_steps_per_round / run.training_interval


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["process", "ray"])
def test_readme_actors_act_within_the_documented_lag(tmp_path, kind):
    if kind == "ray":
        pytest.importorskip("ray")
    actors = ["--actors", kind, *README_ACTORS[2:], "--set", "actors.cpus_per_actor=0.5"]
    result = run_module("tfdqn.train", "--env", "CartPole", *actors, "--total-steps", str(TOTAL_STEPS),
                        "--set", "run.log_every=1000", "--set", "run.final_eval_episodes=1",
                        "--set", "run.eval_episodes=1", "--quiet",
                        "--logdir", str(tmp_path), "--run-name", "a", timeout=600)
    assert result.returncode == 0, result.stderr
    config = DQNConfig.for_env("CartPole", {"actors.kind": "process", "actors.count": 2, "actors.envs_per_actor": 4})
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    per_actor = summary["actors"].pop("per_actor")
    assert summary["actors"] == {"kind": kind, "count": 2, "envs_per_actor": 4, "restarts": 0, "lost_chunks": 0}
    assert sum(actor["env_steps"] for actor in per_actor) == summary["env_steps"] == TOTAL_STEPS
    for actor in per_actor:  # one life each; a CartPole frame is 4 float32
        (life,) = actor["lives"]
        assert life["pid"] > 0 and actor["bytes_sent"] >= 16 * actor["env_steps"]
    # the configured ratio: one update per env step after learning starts (in rounds of 256)
    assert abs(summary["updates"] / (TOTAL_STEPS - config.run.learning_starts) - 1) <= 0.05, summary["updates"]
    policy = [lag for step, lag in read_scalars(tmp_path / "a", "perf/policy_lag_updates") if step > STEADY_AFTER]
    epsilon = [lag for step, lag in read_scalars(tmp_path / "a", "perf/epsilon_lag_steps") if step > STEADY_AFTER]
    assert len(policy) >= 4 and len(epsilon) == len(policy)  # one per summary window once the actors run steadily
    # Each window logs its chunks' mean lag (about 2 chunks per window here), which the bound holds on
    # average whatever the actors' relative speed; the window's first chunks were asked for before it,
    # which can add one round of chunks over those the windows took.
    bound, chunk_env_steps = policy_lag_bound(config), config.actors.chunk_steps * config.actors.envs_per_actor
    round_updates = bound - config.actors.weight_sync_period
    chunks_taken = (TOTAL_STEPS - STEADY_AFTER) / chunk_env_steps
    assert bound == 100 + 1024 and min(policy) >= 0 and np.mean(policy) <= bound + round_updates / chunks_taken, policy
    # The epsilon clock starts where the learner takes the chunk: at most a chunk off, not a round behind.
    assert abs(np.mean(epsilon)) <= chunk_env_steps, epsilon


@pytest.mark.slow
def test_weights_are_read_after_settling_the_learner_and_sent_with_their_update_count():
    """A background learner may be mid-update: the collector settles it before every weight read, once
    per `weight_sync_period`, and each chunk names the update count of the weights it acted with."""
    from tfdqn.actors.collector import RemoteCollector
    from tfdqn.actors.process import ProcessActors
    from tfdqn.agent.agent import make_agent
    from tfdqn.envs.make import make_env
    from tfdqn.telemetry.phase_timer import PhaseTimer

    config = DQNConfig.for_env("CartPole", {"actors.kind": "process", "actors.chunk_steps": 4,
                                            "actors.weight_sync_period": 100})
    spec = make_env(config.env, seed=0)[1]
    agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)
    settled_at = []
    collector = RemoteCollector(ProcessActors(config), config, spec, agent.counters, agent.online,
                                lambda frames, streams: None, PhaseTimer(),
                                settle=lambda: settled_at.append(agent.counters.read()[1]))
    try:
        for step in range(40):
            collector.collect()
            agent.counters.env_steps.assign_add(1)
            agent.counters.updates.assign_add(30)  # as a learner would: a new weight version every few steps
        lags = collector.metrics()
    finally:
        collector.close()
    assert settled_at[0] == 0 and len(set(u // 100 for u in settled_at)) == len(settled_at) > 5
    assert 0 <= lags["perf/policy_lag_updates"] <= 100 + 30 * 2 * 4  # the sync period plus one round of chunks
    assert collector.metrics() == {}  # nothing taken since
