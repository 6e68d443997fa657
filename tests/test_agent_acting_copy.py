"""`compute.act_device: cpu`: the actor acts with its own CPU copy of the online network, brought up to
date by `Agent.sync_acting_copy`; with `auto` it reads the online network itself."""

import pathlib

import numpy as np

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent

DATA = pathlib.Path(__file__).parent / "data"


def _agent(act_device: str):
    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"], {"compute.act_device": act_device})
    return make_agent(config, (4,), np.float32, 2)


def _update(agent, rng) -> None:
    observation = rng.normal(size=(32, 4)).astype(np.float32)
    agent.learner.update(observation, rng.integers(0, 2, 32).astype(np.int32), rng.normal(size=32).astype(np.float32),
                         np.ones(32, np.float32), rng.normal(size=(32, 4)).astype(np.float32), np.ones(32, np.float32))


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights()))


def test_after_a_sync_the_cpu_actor_picks_the_online_networks_greedy_actions():
    agent = _agent("cpu")
    copy = agent.acting_copy.network
    assert copy is not agent.online and all("CPU" in v.value.device for v in copy.variables)
    rng = np.random.default_rng(0)
    for _ in range(20):
        _update(agent, rng)
    observation = rng.normal(size=(256, 4)).astype(np.float32)
    online_greedy = np.argmax(agent.online(observation).numpy(), axis=-1)
    assert not _same(copy, agent.online)  # acting did not read online: the copy waits for a sync
    assert agent.sync_acting_copy() is True
    assert _same(copy, agent.online)
    np.testing.assert_array_equal(agent.actor.act_with_epsilon(observation, 0.0).numpy(), online_greedy)
    assert agent.sync_acting_copy() is False  # no update since: nothing copied
    assert agent.sync_acting_copy(force=True) is True
    _update(agent, rng)
    assert agent.sync_acting_copy() is True and _same(copy, agent.online)
    assert agent.acting_copy._sync.experimental_get_tracing_count() == 1
    assert agent.actor.act_function.experimental_get_tracing_count() == 1


def test_with_act_device_auto_the_actor_reads_the_online_network():
    agent = _agent("auto")
    assert agent.acting_copy is None and agent.sync_acting_copy() is False
    rng = np.random.default_rng(1)
    _update(agent, rng)
    observation = rng.normal(size=(256, 4)).astype(np.float32)
    np.testing.assert_array_equal(agent.actor.act_with_epsilon(observation, 0.0).numpy(),
                                  np.argmax(agent.online(observation).numpy(), axis=-1))


def test_a_short_run_acting_on_the_cpu_trains_and_its_copy_is_online_after_a_sync(tmp_path):
    from tfdqn.run.build import build_run
    from tfdqn.run.loop import run_loop

    config = config_lib.build_config([DATA / "cartpole_5000.yaml"], {
        "compute.act_device": "cpu", "run.total_steps": 1200, "run.learning_starts": 300, "run.eval_every": 0,
        "run.checkpoint_every": 0, "run.training_interval": 2, "replay.capacity": 2000})
    with build_run(config, tmp_path / "run") as run:
        assert run.agent.actor._network is run.agent.acting_copy.network
        assert run_loop(run) == 1200
        assert run.agent.counters.read() == (1200, (1200 - 300) // 2)
        run.agent.sync_acting_copy()
        assert _same(run.agent.acting_copy.network, run.agent.online)
    assert (tmp_path / "run" / "episodes.csv").read_text().count("\n") > 10  # it played whole episodes
