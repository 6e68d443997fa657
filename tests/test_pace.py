"""The run's update timed before its loop (`run.pace`): the probe leaves every value a checkpoint holds as it was."""

import numpy as np
import tensorflow as tf

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent
from tfdqn.run.pace import fused_updates, measure_update_seconds


def _checkpointed(agent, path) -> dict:
    """Every value the agent's checkpoint holds, read back from a file written now."""
    written = tf.train.Checkpoint(**agent.checkpointables()).write(str(path))
    reader = tf.train.load_checkpoint(written)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_timing_the_update_leaves_networks_noise_optimizer_counters_and_streams_as_they_were(tmp_path):
    # Noisy nets (their noise streams), IQN with Munchausen (the learner's fraction stream) and Adam (its
    # slots and step): every kind of state an update writes.
    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"], {
        "learner.loss": "implicit_quantile", "learner.munchausen": True, "network.noisy": True,
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
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert int(agent.learner.first_nonfinite_update.numpy()) == 0
    # The comparison can fail: one act call and one update left in place change what the checkpoint holds.
    agent.actor.act(np.zeros((8, 4), np.float32))
    agent.learner.update_many(*[tf.zeros([1, 8, *spec.shape[2:]], spec.dtype)
                                for spec in agent.learner.update_many_function.input_signature])
    moved = _checkpointed(agent, tmp_path / "moved")
    changed = {name.split("/")[0] for name in before if not np.array_equal(moved[name], before[name])}
    assert {"actor_rng", "learner_rng", "online", "target", "optimizer", "updates"} <= changed, changed
