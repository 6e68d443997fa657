"""The run's update timed before its loop (`run.pace`): the probe leaves every value a checkpoint holds as it was."""

import numpy as np
import pytest
import tensorflow as tf

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent
from tfdqn.run.pace import Pace, fused_updates, measure_update_seconds


def _checkpointed(agent, path) -> dict:
    """Every value the agent's checkpoint holds, read back from a file written now."""
    written = tf.train.Checkpoint(**agent.checkpointables()).write(str(path))
    reader = tf.train.load_checkpoint(written)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.mark.parametrize("noise_refresh", ["call", "update"])
def test_timing_the_update_leaves_networks_noise_optimizer_counters_and_streams_as_they_were(tmp_path, noise_refresh):
    # Noisy nets (their noise streams, and the acting noise they hold with noise_refresh update), IQN with
    # Munchausen (the learner's fraction stream) and Adam (its slots and step): every kind of state an update writes.
    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"], {
        "network.noise_refresh": noise_refresh,
        "learner.loss": "implicit_quantile", "learner.munchausen": True, "learner.n_step": 1, "network.noisy": True,
        "network.dueling": True, "network.hidden_sizes": [16, 16], "learner.num_tau_samples": 4,
        "learner.num_tau_prime_samples": 4, "learner.num_quantile_samples": 4})
    agent = make_agent(config, (4,), np.float32, 2)
    before = _checkpointed(agent, tmp_path / "before")
    fused = fused_updates(config.run, config.num_streams)
    assert fused == 64  # CartPole's rounds: 256 env steps at one update each, fused 64 to a call
    seconds = measure_update_seconds(agent, config.replay.batch_size, fused, act_rows=8, acts=8)
    assert seconds > 0
    after = _checkpointed(agent, tmp_path / "after")
    assert before.keys() == after.keys() and "learner_rng/_state_var/.ATTRIBUTES/VARIABLE_VALUE" in before
    assert any("noise_state" in name for name in before) and any(name.startswith("optimizer/") for name in before)
    assert any("acting_noise" in name for name in before) == (noise_refresh == "update")
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert int(agent.learner.first_nonfinite_update.numpy()) == 0
    # The comparison can fail: one act call and one update call left in place change what the checkpoint holds.
    # Both of the probe's shapes (8 rows; 64 fused updates of a batch), so XLA compiles nothing new.
    agent.actor.act(np.zeros((8, 4), np.float32))
    agent.learner.update_many(*[tf.zeros([fused, config.replay.batch_size, *spec.shape[2:]], spec.dtype)
                                for spec in agent.learner.update_many_function.input_signature])
    moved = _checkpointed(agent, tmp_path / "moved")
    changed = {name.split("/")[0] for name in before if not np.array_equal(moved[name], before[name])}
    assert {"actor_rng", "learner_rng", "online", "target", "optimizer", "updates"} <= changed, changed


# cartpole.yaml evaluates 10 games every 2,000 env steps, and 10 of each of two networks at the end
NOT_TIMED = " (and 2 periodic evaluations of 10 games and the final evaluation's 20 games, not timed yet)"


def _pace(update_seconds: float | None) -> Pace:
    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"], {
        "run.learning_starts": 1000, "run.total_steps": 3000, "run.training_interval": 0.125})
    return Pace(config.run, update_seconds, overlapped=False)


def test_a_warm_up_over_before_the_line_is_due_has_it_said_as_learning_begins_from_the_warm_ups_rate():
    # 1,000 warm-up steps in 2 s (500/s), under the 3 s of rate the line waits for. Learning at eight 1 ms
    # updates per env step: 2 ms of acting and 8 of updates per env step, so 100/s and 20 s for 2,000 steps.
    pace = _pace(0.001)
    for now, env_steps in [(0.0, 0), (1.0, 500)]:
        pace.observe(now, env_steps)
        assert not pace.due_line(env_steps)
    pace.observe(2.0, 1000)
    assert pace.due_line(1000) and pace.seconds_left(1000) == 20
    assert pace.line(1000) == ("time left: about 20 s for 2,000 env steps of learning at about 100/s, from the "
                               "warm-up's 500/s: 8 updates of 1.0 ms per env step" + NOT_TIMED)
    pace.observe(3.0, 1100)
    assert not pace.due_line(1100)


def test_a_run_without_updates_says_its_learning_at_the_warm_ups_rate():
    pace = _pace(None)
    for now, env_steps in [(0.0, 0), (1.0, 500), (2.0, 1000)]:
        pace.observe(now, env_steps)
    assert pace.line(1000) == ("time left: about 4 s for 2,000 env steps of learning at about 500/s, from the "
                               "warm-up's 500/s" + NOT_TIMED)


def test_a_warm_up_long_enough_says_the_line_once_during_it_and_not_again_as_learning_begins():
    # 200/s: 5 ms of acting and 8 of updates per env step, so 77/s; 2 s of warm-up and 26 s of learning left.
    pace = _pace(0.001)
    for now, env_steps in [(0.0, 0), (1.0, 200), (2.0, 400), (3.0, 600)]:
        pace.observe(now, env_steps)
    assert pace.due_line(600)
    assert pace.line(600) == ("time left: about 28 s for 2,400 env steps: 400 of warm-up at 200/s, then 2,000 "
                              "learning at about 77/s: 8 updates of 1.0 ms per env step" + NOT_TIMED)
    pace.observe(5.0, 1000)
    assert not pace.due_line(1000)


def test_evaluations_count_in_the_time_left_once_one_is_timed_and_their_time_stays_out_of_the_rate():
    pace = _pace(0.001)
    for now, env_steps in [(0.0, 0), (1.0, 500), (2.0, 1000)]:
        pace.observe(now, env_steps)
    pace.line(1000)  # said before any evaluation played
    pace.observe(5.0, 1300)  # learning at 100/s
    pace.evaluated(4.0, 10)  # then 10 games in 4 s
    pace.observe(10.0, 1400)  # 1 s after it: still 100/s, the evaluation left out
    # 1,600 env steps at 100/s, and 40 games to come (two periodic evaluations of 10, the final 20) at 0.4 s each
    assert pace.seconds_left(1400) == pytest.approx(16 + 16)
    assert pace.due_line(1400)  # said again, now with the evaluations timed
    assert pace.line(1400) == ("time left: about 32 s for 1,600 env steps at 100/s (with 2 periodic evaluations of "
                               "10 games and the final evaluation's 20 games: 16 s at 0.4 s a game)")
    assert not pace.due_line(1500)

