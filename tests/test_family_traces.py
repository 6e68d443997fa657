"""Every combination of head and loss: act, evaluation act, one update and fused updates each run on
one trace, whatever the batch size or the number of fused updates."""

import itertools

import numpy as np
import pytest

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent

COMBINATIONS = [*itertools.product(["huber", "categorical", "quantile"], [False, True], [False, True]),
                ("implicit_quantile", False, False), ("implicit_quantile", True, True)]

# XLA compiles act anew for each batch size, which costs CPU-seconds and traces nothing more: act_function and
# act_with_epsilon_function are traced once either way (as the update is, whose XLA these tests leave off too).
# Act runs under XLA where M-DQN runs as CartPole's config runs it (test_munchausen_runs_on_one_trace_per_function_
# with_each_head[huber-False-False-True]); the other tests act without it.
NO_ACT_XLA = {"compute.act_jit_compile": False}


def _batch(rng, leading, observation_shape, dtype):
    def observations():
        if dtype == np.uint8:
            return rng.integers(0, 256, (*leading, *observation_shape), dtype=np.uint8)
        return rng.normal(size=(*leading, *observation_shape)).astype(np.float32)
    return (observations(), rng.integers(0, 2, leading).astype(np.int32), rng.normal(size=leading).astype(np.float32),
            np.ones(leading, np.float32), observations(), rng.uniform(0.1, 1.0, leading).astype(np.float32))


def _check_traces(agent, observation_shape, dtype):
    rng = np.random.default_rng(0)
    for size in (3, 5):
        agent.actor.act(_batch(rng, (size,), observation_shape, dtype)[0])
        agent.actor.act_with_epsilon(_batch(rng, (size,), observation_shape, dtype)[0], 0.0)
        metrics = agent.learner.update(*_batch(rng, (size,), observation_shape, dtype))
        assert metrics["priority"].shape == (size,) and np.isfinite(metrics["td_loss"].numpy())
    for k in (1, 3):
        metrics = agent.learner.update_many(*_batch(rng, (k, 4), observation_shape, dtype))
        assert metrics["priority"].shape == (k, 4)
    for _ in range(2):
        agent.learner.redraw_acting_noise()  # the warm-up's redraw of held acting noise
    for function in (agent.actor.act_function, agent.actor.act_with_epsilon_function,
                     agent.learner.update_function, agent.learner.update_many_function,
                     agent.learner.redraw_acting_noise):
        assert function.experimental_get_tracing_count() == 1, function.python_function.__name__


@pytest.mark.parametrize("loss, dueling, noisy", COMBINATIONS,
                         ids=[f"{l}-{'dueling' if d else 'plain'}-{'noisy' if n else 'linear'}" for l, d, n in COMBINATIONS])
def test_every_head_and_loss_runs_on_one_trace_per_function(loss, dueling, noisy):
    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"], {
        "learner.loss": loss, "network.dueling": dueling, "network.noisy": noisy, "learner.num_atoms": 11,
        "learner.num_quantiles": 8, "network.hidden_sizes": [16, 16], "compute.update_jit_compile": False,
        "learner.num_tau_samples": 4, "learner.num_tau_prime_samples": 5, "learner.num_quantile_samples": 3,
        **NO_ACT_XLA})
    _check_traces(make_agent(config, (4,), np.float32, 2), (4,), np.float32)


def test_the_rainbow_update_with_augmentation_on_atari_frames_runs_on_one_trace():
    config = config_lib.resolve_config([], {"env.id": "Pong", "learner.augment_pad": 4,
                                            "learner.augment_intensity": 0.05, **NO_ACT_XLA}, preset="rainbow")
    _check_traces(make_agent(config, (4, 84, 84), np.uint8, 2), (4, 84, 84), np.uint8)


# M-DQN as CartPole's config runs it (its update and act under XLA), and the other heads with it as the rest of this
# file runs them (XLA's compiles of their larger updates take seconds each and trace nothing more)
@pytest.mark.parametrize("loss, dueling, noisy, xla", [("huber", False, False, True), ("huber", True, True, False),
                                                        ("implicit_quantile", True, False, False)])
def test_munchausen_runs_on_one_trace_per_function_with_each_head(loss, dueling, noisy, xla):
    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"], {
        "learner.munchausen": True, "learner.n_step": 1, "learner.loss": loss, "network.dueling": dueling,
        "network.noisy": noisy,
        "learner.num_tau_samples": 4, "learner.num_tau_prime_samples": 5, "learner.num_quantile_samples": 3,
        "network.hidden_sizes": [16, 16], "compute.update_jit_compile": xla, **({} if xla else NO_ACT_XLA)})
    _check_traces(make_agent(config, (4,), np.float32, 2), (4,), np.float32)


def test_the_iqn_update_with_augmentation_on_atari_frames_runs_on_one_trace():
    config = config_lib.resolve_config([], {"env.id": "Pong", "env.screen_size": 42, "learner.augment_pad": 4,
                                            "learner.num_tau_samples": 8, "learner.num_tau_prime_samples": 8,
                                            "learner.double_dqn": True, "network.dueling": True, **NO_ACT_XLA},
                                       preset="iqn")
    _check_traces(make_agent(config, (4, 42, 42), np.uint8, 2), (4, 42, 42), np.uint8)


def test_the_impala_network_with_munchausen_and_drq_augmentation_runs_on_one_trace_per_function():
    config = config_lib.resolve_config([], {"env.id": "Pong", "network.kind": "impala", "env.screen_size": 42,
                                            "learner.munchausen": True, "learner.n_step": 1, **NO_ACT_XLA},
                                       preset="drq_eps")
    _check_traces(make_agent(config, (4, 42, 42), np.uint8, 2), (4, 42, 42), np.uint8)
