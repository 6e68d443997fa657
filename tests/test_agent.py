import numpy as np
import pytest

from tfdqn import config as config_lib
from tfdqn.agent.agent import act_uses_xla, make_agent


def _atari_agent(**compute):
    config = config_lib.build_config([config_lib.CONFIG_DIR / "atari.yaml"],
                                     {f"compute.{key}": value for key, value in compute.items()})
    return make_agent(config, (4, 84, 84), np.uint8, 4)


@pytest.mark.parametrize("act_jit_compile, mixed_precision, act_on_cpu, expected", [
    (True, False, True, True), (True, True, True, False), (True, True, False, True), (False, False, False, False)])
def test_act_uses_xla_except_for_bfloat16_on_a_cpu(act_jit_compile, mixed_precision, act_on_cpu, expected):
    compute = config_lib.ComputeConfig(act_jit_compile=act_jit_compile, mixed_precision=mixed_precision)
    assert act_uses_xla(compute, act_on_cpu) is expected


def test_bfloat16_agent_acts_greedily_and_updates_with_float32_weights():
    agent = _atari_agent(mixed_precision=True)
    rng = np.random.default_rng(0)
    observation = rng.integers(0, 256, (6, 4, 84, 84), dtype=np.uint8)
    q_values = agent.online(observation, training=False)
    assert q_values.dtype == "float32" and agent.online.layers[3].compute_dtype == "bfloat16"
    np.testing.assert_array_equal(agent.actor.act_with_epsilon(observation, 0.0).numpy(),
                                  np.argmax(q_values.numpy(), axis=-1))
    batch = (observation, rng.integers(0, 4, 6).astype(np.int32), np.ones(6, np.float32),
             np.ones(6, np.float32), observation, np.ones(6, np.float32))
    before = [w.numpy().copy() for w in agent.online.trainable_weights]
    assert np.isfinite(agent.learner.update(*batch)["td_loss"].numpy())
    assert all(w.dtype == "float32" for w in agent.online.trainable_weights)
    assert any(not np.array_equal(b, w.numpy()) for b, w in zip(before, agent.online.trainable_weights))


def test_the_precision_policy_is_set_for_every_agent():
    """Each layer takes the config's policy, not Keras's global one: a float32 agent built after a bfloat16
    one computes in float32."""
    _atari_agent(mixed_precision=True)
    agent = _atari_agent()
    assert agent.online.layers[3].compute_dtype == "float32"
