"""The JAX peer for tools/bench.py: the Nature-CNN act and double-DQN update as JAX DQN code writes them
(CleanRL's dqn_atari_jax: channels-last convolutions, `jax.jit` around the network, optax's Adam,
epsilon-greedy on the host). The whole act (forward pass and argmax) is one jitted call, the fastest
way jax offers to act, so a ratio against it says what tfdqn's act costs beyond the network itself.
Imported only when `--peer jax` asks for it, and by tests/test_peer_jax.py.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax


CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))  # (filters, kernel, stride): the Nature CNN, VALID padding
HIDDEN = 512


def init_params(key, num_actions: int, stack_size: int = 4, side: int = 84) -> dict:
    """Glorot-uniform kernels (HWIO and [in, out], the layout Keras stores) and zero biases."""
    params, channels = {}, stack_size
    for i, (filters, kernel, stride) in enumerate(CONVS):
        key, sub = jax.random.split(key)
        params[f"conv{i}"] = (jax.nn.initializers.glorot_uniform()(sub, (kernel, kernel, channels, filters)),
                              jnp.zeros(filters))
        channels, side = filters, (side - kernel) // stride + 1
    for name, (fan_in, fan_out) in (("dense0", (side * side * channels, HIDDEN)), ("dense1", (HIDDEN, num_actions))):
        key, sub = jax.random.split(key)
        params[name] = jax.nn.initializers.glorot_uniform()(sub, (fan_in, fan_out)), jnp.zeros(fan_out)
    return params


def q_values(params: dict, observation: jnp.ndarray) -> jnp.ndarray:
    """uint8 [batch, stack, 84, 84] -> Q [batch, actions], scaled to [0, 1] and moved to channels-last."""
    x = jnp.transpose(observation.astype(jnp.float32) / 255.0, (0, 2, 3, 1))
    for i, (_, _, stride) in enumerate(CONVS):
        kernel, bias = params[f"conv{i}"]
        x = jax.lax.conv_general_dilated(x, kernel, (stride, stride), "VALID",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        x = jax.nn.relu(x + bias)
    x = x.reshape(x.shape[0], -1)
    kernel, bias = params["dense0"]
    x = jax.nn.relu(x @ kernel + bias)
    kernel, bias = params["dense1"]
    return x @ kernel + bias


class JaxDQN:
    """Online and target params, optax's clipped Adam and a target-sync counter (tfdqn's Atari values)."""

    def __init__(self, num_actions: int, learning_rate: float, adam_epsilon: float, gamma: float,
                 max_grad_norm: float, target_update_period: int, seed: int = 0):
        self.params = init_params(jax.random.PRNGKey(seed), num_actions)
        self.target = self.params
        self.optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm),
                                     optax.adam(learning_rate, eps=adam_epsilon))
        self.opt_state = self.optimizer.init(self.params)
        self.num_actions, self.gamma, self.target_update_period = num_actions, gamma, target_update_period
        self.updates = 0
        self.rng = np.random.default_rng(seed)
        self._greedy = jax.jit(lambda params, observation: jnp.argmax(q_values(params, observation), axis=-1))
        self._step = jax.jit(self._train_step)

    def act(self, observation: np.ndarray, epsilon: float) -> np.ndarray:
        """Epsilon-greedy per row, the greedy actions from one jitted call, random numbers from NumPy."""
        greedy = np.asarray(self._greedy(self.params, observation))
        random = self.rng.integers(0, self.num_actions, len(observation))
        return np.where(self.rng.random(len(observation)) < epsilon, random, greedy)

    def _train_step(self, params, target, opt_state, observation, action, reward, discount, next_observation):
        best = jnp.argmax(q_values(params, next_observation), axis=-1)
        next_value = jnp.take_along_axis(q_values(target, next_observation), best[:, None], axis=1)[:, 0]
        td_target = jax.lax.stop_gradient(jnp.sign(reward) + self.gamma * discount * next_value)

        def loss_fn(p):
            q = jnp.take_along_axis(q_values(p, observation), action[:, None], axis=1)[:, 0]
            return optax.huber_loss(q, td_target, delta=1.0).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def update(self, observation, action, reward, discount, next_observation) -> float:
        """One double-DQN step: clipped reward, Huber loss, global-norm clip, periodic target copy."""
        self.params, self.opt_state, loss = self._step(self.params, self.target, self.opt_state, observation,
                                                       action, reward, discount, next_observation)
        self.updates += 1
        if self.updates % self.target_update_period == 0:
            self.target = self.params
        return float(loss)


def measure(seconds: float, batch_size: int = 32, num_actions: int = 4) -> dict:
    """Calls/s of the update at `batch_size` and of act at batch 1 and 8, each timed for about `seconds`."""
    from tools.bench_timing import calls_per_second, peer_inputs

    peer = JaxDQN(num_actions, learning_rate=1e-4, adam_epsilon=1.5e-4, gamma=0.99, max_grad_norm=10.0,
                  target_update_period=2000)
    batch, one, eight = peer_inputs(batch_size, num_actions)
    return {"version": jax.__version__, "optax": optax.__version__, "device": str(jax.devices()[0]),
            "updates_per_sec": calls_per_second(lambda: peer.update(*batch), seconds),
            "act_per_sec_b1": calls_per_second(lambda: peer.act(one, 0.05), seconds),
            "act_per_sec_b8": calls_per_second(lambda: peer.act(eight, 0.05), seconds)}


def main(argv: list[str] | None = None) -> int:
    from tools.bench_timing import peer_main

    return peer_main("python -m tools.peer_jax", __doc__, measure, argv)


if __name__ == "__main__":
    sys.exit(main())
