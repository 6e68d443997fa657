"""The DQN update compiled into one graph: TD target, Huber loss, optimizer step, target sync."""

import keras
import tensorflow as tf

from tfdqn.config import LearnerConfig
from tfdqn.agent.counters import Counters
from tfdqn.agent.flat_call import FlatCall
from tfdqn.agent.fused_adam import FusedAdam


def td_target(r_t, bootstrap_t, q_target_t, gamma: float, q_online_t=None) -> tf.Tensor:
    """r + gamma * bootstrap * Q_target(s', a'), with a' = argmax of Q_target (DQN) or, when the
    online values are given, of Q_online (double DQN). `bootstrap` (the replay's `Batch.bootstrap`) is 0
    only on termination; with n-step returns it is gamma^(m-1) for the m rewards summed into `r`, so
    gamma * bootstrap discounts m steps."""
    if q_online_t is None:
        next_value = tf.reduce_max(q_target_t, axis=-1)
    else:
        best = tf.argmax(q_online_t, axis=-1, output_type=tf.int32)
        next_value = tf.gather(q_target_t, best, axis=-1, batch_dims=1)
    return tf.stop_gradient(r_t + gamma * bootstrap_t * next_value)


def learning_rate(config: LearnerConfig):
    """The constant step size, or a linear decay over the optimizer's own step count: computed in the
    graph, and resumed exactly, since that count is one of the optimizer's checkpointed variables."""
    if config.learning_rate_decay_updates == 0:
        return config.learning_rate
    return keras.optimizers.schedules.PolynomialDecay(config.learning_rate, config.learning_rate_decay_updates,
                                                      end_learning_rate=config.learning_rate_end, power=1.0)


def make_optimizer(config: LearnerConfig) -> keras.optimizers.Optimizer:
    clip = {"global_clipnorm": config.max_grad_norm} if config.max_grad_norm > 0 else {}
    if config.optimizer == "rmsprop":
        return keras.optimizers.RMSprop(learning_rate(config), rho=0.95, epsilon=config.adam_epsilon, **clip)
    return FusedAdam(learning_rate(config), epsilon=config.adam_epsilon, **clip)


class Learner:
    """Owns the online/target pair and the optimizer, and advances the run's update counter.

    `update(observation, action, reward, bootstrap, next_observation)` (a replay `Batch`) runs one
    gradient step and, when the counter reaches a multiple of `target_update_period`, copies online into
    target, all in the graph. It returns tensors; Python reads them only when it logs."""

    def __init__(self, online: keras.Model, target: keras.Model, config: LearnerConfig,
                 observation_shape: tuple, observation_dtype, counters: Counters | None = None,
                 jit_compile: bool = False):
        self.online = online
        self.target = target
        self._config = config
        counters = counters or Counters()
        self.updates = counters.updates
        # The first update whose loss was NaN or Inf (0: none yet) and the env step it ran at (read
        # from the actor's counter), recorded in the graph: watching for divergence copies nothing per update.
        self.first_nonfinite_update = tf.Variable(0, dtype=tf.int64, trainable=False, name="first_nonfinite_update")
        self.first_nonfinite_env_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="first_nonfinite_step")
        self._env_steps = counters.env_steps
        self.optimizer = make_optimizer(config)
        self.optimizer.build(online.trainable_variables)
        self._sync_target()
        self._jit_compile = jit_compile
        observation = tf.TensorSpec([None, *observation_shape], tf.as_dtype(observation_dtype))
        vector = lambda dtype: tf.TensorSpec([None], dtype)  # noqa: E731
        batch = [observation, vector(tf.int32), vector(tf.float32), vector(tf.float32), observation]
        # Both are called flat (FlatCall) through their one concrete function, traced on first use;
        # the tf.functions stay available for export. Control flow is written as tf.cond and
        # tf.while_loop, so no function is converted by AutoGraph, which recursed into Keras and
        # took most of the tracing time at start-up.
        self.update_function = tf.function(self._update, input_signature=batch, jit_compile=jit_compile,
                                           autograph=False)
        self.update = FlatCall(self.update_function)
        # k batches stacked on a leading axis: one call, one trace, whatever k the loop asks for.
        stacked = [tf.TensorSpec([None, *spec.shape], spec.dtype) for spec in batch]
        self.update_many_function = tf.function(self._update_many, input_signature=stacked, jit_compile=jit_compile,
                                                autograph=False)
        self.update_many = FlatCall(self.update_many_function)

    def _sync_target(self) -> tf.Tensor:
        """Copy online into target (eagerly at construction, as a `tf.cond` branch inside `update`,
        whose branches must return a value: the stateful assigns run because the branch holds them)."""
        for target_var, online_var in zip(self.target.variables, self.online.variables):
            target_var.assign(online_var)
        return tf.constant(True)

    def _record_nonfinite(self) -> tf.Tensor:
        self.first_nonfinite_update.assign(self.updates)
        self.first_nonfinite_env_step.assign(self._env_steps)
        return tf.constant(True)

    def _repeat_update(self, k, batch_for) -> dict:
        """k updates in a graph loop, update i on `batch_for(i)`; returns the last one's metrics."""
        def body(i, _loss, _q):
            metrics = self._update(*batch_for(i))
            return i + 1, metrics["td_loss"], metrics["q_values"]
        _, loss, q = tf.while_loop(lambda i, _loss, _q: i < k, body, (tf.constant(0), tf.constant(0.0), tf.constant(0.0)))
        return {"td_loss": loss, "q_values": q}

    def _update_many(self, observation, action, reward, bootstrap, next_observation):
        """k = len(action) updates, batch i (stacked on the leading axis) on update i."""
        batches = (observation, action, reward, bootstrap, next_observation)
        return self._repeat_update(tf.shape(action)[0], lambda i: [column[i] for column in batches])

    def make_replay_update(self, sample) -> tf.types.experimental.GenericFunction:
        """`update_from_replay(k)`: k updates whose batches `sample()` draws inside the same graph (a
        replay held in tf.Variables), so no Python runs between them. Traced once for every k."""
        def update_from_replay(k):
            return self._repeat_update(k, lambda _: sample())
        # Never XLA: it has no kernel for the gathers from the replay's variables (ResourceGatherNd).
        return tf.function(update_from_replay, input_signature=[tf.TensorSpec([], tf.int32)], autograph=False)

    def _update(self, observation, action, reward, bootstrap, next_observation):
        c = self._config
        r_t = tf.sign(reward) if c.clip_rewards else reward
        q_target_t = self.target(next_observation, training=False)
        q_online_t = self.online(next_observation, training=False) if c.double_dqn else None
        y = td_target(r_t, bootstrap, q_target_t, c.gamma, q_online_t)
        with tf.GradientTape() as tape:
            q_tm1 = self.online(observation, training=True)
            q_a = tf.gather(q_tm1, action, axis=-1, batch_dims=1)
            loss = tf.reduce_mean(keras.losses.huber(y[:, None], q_a[:, None], delta=c.huber_delta))
        variables = self.online.trainable_variables
        self.optimizer.apply(tape.gradient(loss, variables), variables)
        self.updates.assign_add(1)
        first_nonfinite = tf.logical_and(tf.logical_not(tf.math.is_finite(loss)),
                                         tf.equal(self.first_nonfinite_update, 0))
        tf.cond(first_nonfinite, self._record_nonfinite, lambda: tf.constant(False))
        tf.cond(tf.equal(self.updates % c.target_update_period, 0), self._sync_target, lambda: tf.constant(False))
        return {"td_loss": loss, "q_values": tf.reduce_mean(tf.reduce_max(q_tm1, axis=-1))}
