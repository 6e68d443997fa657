"""The JAX peer that tools/bench.py measures tfdqn's act and update against is the same network and the same
double-DQN loss: given tfdqn's weights and batch it returns tfdqn's Q values and TD loss."""

import jax.numpy as jnp
import numpy as np

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_agent
from tools.peer_jax import CONVS, JaxDQN, q_values


def _tfdqn_agent():
    return make_agent(config_lib.resolve_config([], {"env.id": "Breakout"}, None), (4, 84, 84), np.uint8, 4)


def _params_of(network) -> dict:
    """tfdqn's Keras weights in the peer's layout (both keep HWIO kernels and [in, out] dense kernels)."""
    weights = [w.numpy() for w in network.weights]
    names = [f"conv{i}" for i in range(len(CONVS))] + ["dense0", "dense1"]
    return {name: (jnp.asarray(weights[2 * i]), jnp.asarray(weights[2 * i + 1])) for i, name in enumerate(names)}


def _peer(agent) -> JaxDQN:
    """The peer with the values tools/bench.py gives it (atari.yaml's), starting from tfdqn's weights."""
    peer = JaxDQN(4, learning_rate=1e-4, adam_epsilon=1.5e-4, gamma=0.99, max_grad_norm=10.0,
                  target_update_period=10**9)
    peer.params = peer.target = _params_of(agent.online)
    peer.opt_state = peer.optimizer.init(peer.params)
    return peer


def test_the_peer_computes_tfdqns_q_values_from_tfdqns_weights():
    agent = _tfdqn_agent()
    frames = np.random.default_rng(0).integers(0, 256, (5, 4, 84, 84), dtype=np.uint8)
    expected = agent.online(frames).numpy()
    np.testing.assert_allclose(np.asarray(q_values(_peer(agent).params, frames)), expected, rtol=1e-4, atol=1e-5)
    actions = _peer(agent).act(frames, epsilon=0.0)
    np.testing.assert_array_equal(actions, expected.argmax(axis=1))


def test_the_peers_update_has_tfdqns_double_dqn_loss_and_moves_the_weights():
    agent = _tfdqn_agent()
    agent.target.set_weights(agent.online.get_weights())
    rng = np.random.default_rng(1)
    frames = lambda: rng.integers(0, 256, (32, 4, 84, 84), dtype=np.uint8)  # noqa: E731
    batch = (frames(), rng.integers(0, 4, 32).astype(np.int32), rng.choice([-1.0, 0.0, 1.0], 32).astype(np.float32),
             (rng.random(32) < 0.9).astype(np.float32), frames())
    peer = _peer(agent)
    before = np.asarray(peer.params["dense0"][0]).copy()
    loss = peer.update(*batch)
    expected = agent.learner.update(*batch, np.ones(32, np.float32))["td_loss"].numpy()
    np.testing.assert_allclose(loss, expected, rtol=1e-4)
    assert peer.updates == 1 and not np.array_equal(np.asarray(peer.params["dense0"][0]), before)
