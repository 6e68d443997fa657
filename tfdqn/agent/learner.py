"""The DQN update compiled into one graph: augmentation, next action, the head's loss weighted by the
replay's importance weights, optimizer step, target sync; priorities come back for prioritized replay."""

import keras
import tensorflow as tf

from tfdqn.agent import noisy
from tfdqn.agent.augmentation import augment
from tfdqn.agent.counters import Counters
from tfdqn.agent.flat_call import FlatCall
from tfdqn.agent.fused_adam import FusedAdam
from tfdqn.agent.heads import distribution_model, q_values_of
from tfdqn.agent.implicit_quantile import fraction_model
from tfdqn.agent.legal_actions import masked_q
from tfdqn.agent.objectives import make_objective
from tfdqn.config import LearnerConfig


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

    `update(observation, action, reward, bootstrap, next_observation, weight)` (a replay `Batch`) runs one
    gradient step and, when the counter reaches a multiple of `target_update_period`, copies online into
    target, all in the graph. It returns tensors (the loss, mean max Q, and each sample's priority signal);
    Python reads them only when it logs or writes priorities. Noisy layers draw fresh noise on every
    network call (online and target, each from its own stream); augmentation draws from `generator`."""

    def __init__(self, online: keras.Model, target: keras.Model, config: LearnerConfig,
                 observation_shape: tuple, observation_dtype, counters: Counters | None = None,
                 jit_compile: bool = False, seed: int = 0, legal=None):
        self.online = online
        self._holding_noise = noisy.holding_layers(online)
        self._legal = legal  # frames -> [B, actions] bool: the next state's legal actions (None: all are)
        self.target = target
        self._implicit = config.loss == "implicit_quantile"  # IQN: the loss reads quantiles at sampled fractions
        reads = fraction_model if self._implicit else distribution_model
        self._online_distribution, self._target_distribution = reads(online), reads(target)
        self._config = config
        self._objective = make_objective(config)
        self.generator = tf.random.Generator.from_seed(seed)  # augmentation's and IQN's draws (checkpointed)
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
        batch = [observation, vector(tf.int32), vector(tf.float32), vector(tf.float32), observation, vector(tf.float32)]
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
        # Held acting noise drawn anew without an update: the warm-up's redraws (run.drivers.WarmupNoise).
        self.redraw_acting_noise = tf.function(self._redraw_acting_noise, input_signature=[], autograph=False)

    @property
    def holds_acting_noise(self) -> bool:
        """Whether online's noisy layers hold their acting noise between updates (`network.noise_refresh: update`)."""
        return bool(self._holding_noise)

    def _redraw_acting_noise(self) -> tf.Tensor:
        for layer in self._holding_noise:
            layer.redraw_acting_noise()
        return tf.constant(bool(self._holding_noise))

    def _sync_target(self) -> tf.Tensor:
        """Copy online's weights into target (eagerly at construction, as a `tf.cond` branch inside `update`,
        whose branches must return a value: the stateful assigns run because the branch holds them). Only
        weights: each network keeps its own noise stream."""
        for target_var, online_var in zip(self.target.weights, self.online.weights):
            target_var.assign(online_var)
        return tf.constant(True)

    def _record_nonfinite(self) -> tf.Tensor:
        self.first_nonfinite_update.assign(self.updates)
        self.first_nonfinite_env_step.assign(self._env_steps)
        return tf.constant(True)

    def _repeat_update(self, k, batch_size, update_for) -> dict:
        """k updates in a graph loop, update i by `update_for(i)`; returns the last one's loss and Q and
        every update's priority signals [k, batch_size]."""
        def body(i, _loss, _q, priorities):
            metrics = update_for(i)
            return i + 1, metrics["td_loss"], metrics["q_values"], priorities.write(i, metrics["priority"])
        start = (tf.constant(0), tf.constant(0.0), tf.constant(0.0),
                 tf.TensorArray(tf.float32, size=k, element_shape=[batch_size]))
        _, loss, q, priorities = tf.while_loop(lambda i, *_: i < k, body, start)
        return {"td_loss": loss, "q_values": q, "priority": priorities.stack()}

    def _update_many(self, observation, action, reward, bootstrap, next_observation, weight):
        """k = len(action) updates, batch i (stacked on the leading axis) on update i."""
        batches = (observation, action, reward, bootstrap, next_observation, weight)
        return self._repeat_update(tf.shape(action)[0], action.shape[1],
                                   lambda i: self._update(*[column[i] for column in batches]))

    def make_replay_update(self, sample, batch_size: int, write_priorities=None) -> tf.types.experimental.GenericFunction:
        """`update_from_replay(k)`: k updates whose batches `sample()` draws inside the same graph (a
        replay held in tf.Variables), so no Python runs between them; `write_priorities(slots, priority)`,
        where given, writes each update's priorities before the next one samples. `sample()` returns a
        batch and its slots. Traced once for every k."""
        def one_update(_):
            *batch, slots = sample()
            metrics = self._update(*batch)
            if write_priorities is not None:
                with tf.control_dependencies([write_priorities(slots, metrics["priority"])]):
                    metrics = {name: tf.identity(value) for name, value in metrics.items()}
            return metrics

        def update_from_replay(k):
            return self._repeat_update(k, batch_size, one_update)
        # Never XLA: it has no kernel for the gathers from the replay's variables (ResourceGatherNd).
        return tf.function(update_from_replay, input_signature=[tf.TensorSpec([], tf.int32)], autograph=False)

    def _next_action(self, next_observation, target_q_next) -> tf.Tensor:
        """a' = argmax of the expected Q of online (double DQN, van Hasselt et al. 2016) or of target
        (`target_q_next`), over the legal actions where the env gives a mask; C51 and QR-DQN then take a''s
        distribution. With double DQN, IQN's online Q is its own, at the K midpoints."""
        q_next = self.online(next_observation, training=True) if self._config.double_dqn else target_q_next
        if self._legal is not None:  # the max (or double DQN's argmax) over the next state's legal actions
            q_next = masked_q(q_next, self._legal(next_observation))
        return tf.argmax(q_next, axis=-1, output_type=tf.int32)

    def _distribution(self, model, observation, fractions: int) -> tuple:
        """(What the loss reads of `model` at `observation`, the fractions it was read at): for IQN the quantiles at
        `fractions` fractions per sample drawn uniformly from `generator` (Dabney, Ostrovski et al. 2018), else the
        head's output and None."""
        if not self._implicit:
            return model(observation, training=True), None
        drawn = self.generator.uniform([tf.shape(observation)[0], fractions], dtype=tf.float32)
        return model([observation, drawn], training=True), drawn

    def _target_reads(self, observation, next_observation) -> dict:
        """What the objective reads of the target network: its output at s' (`target_next`) and the next action,
        or for Munchausen's soft target the target at s and both states' legal actions where the env gives masks.

        IQN evaluates s' at N' fractions drawn per sample. Where the target network also chooses at s' (the next
        action without double DQN, Munchausen's policy), it chooses by the mean of K more fractions drawn apart
        from those N', as Dopamine's implicit_quantile_agent.py and munchausen_rl's m_iqn.py do: choosing by the
        same draws that then evaluate picks each sample's luckiest draws and biases the target upwards. Both
        sets are drawn together, so the body runs once; M-IQN reads s at K fractions, as m_iqn.py does."""
        c = self._config
        munchausen = self._objective.reads_target_now
        apart = c.num_quantile_samples if self._implicit and (munchausen or not c.double_dqn) else 0
        read, _ = self._distribution(self._target_distribution, next_observation, c.num_tau_prime_samples + apart)
        target_next = read[..., :c.num_tau_prime_samples] if apart else read
        chooser_q = q_values_of(self.target, read[..., c.num_tau_prime_samples:] if apart else read)
        if not munchausen:
            return {"target_next": target_next, "next_action": self._next_action(next_observation, chooser_q)}
        now_fractions = c.num_quantile_samples if self._implicit else None
        target_now, _ = self._distribution(self._target_distribution, observation, now_fractions)
        legal = {} if self._legal is None else {"legal_now": self._legal(observation),
                                                "legal_next": self._legal(next_observation)}
        return {"target_next": target_next, "next_action": None, "target_now": target_now, "q_next": chooser_q,
                **legal}

    def _update(self, observation, action, reward, bootstrap, next_observation, weight):
        c = self._config
        if c.augment_pad > 0 or c.augment_intensity > 0:
            observation, next_observation = augment(observation, next_observation, self.generator, c.augment_pad,
                                                    c.augment_intensity)
        reads = self._target_reads(observation, next_observation)
        with tf.GradientTape() as tape:
            online, fractions = self._distribution(self._online_distribution, observation, c.num_tau_samples)
            if fractions is not None:
                reads["fractions"] = fractions
            per_sample, priority = self._objective(online, action, reward, c.gamma * bootstrap, **reads)
            loss = tf.reduce_mean(weight * per_sample)
        variables = self.online.trainable_variables
        self.optimizer.apply(tape.gradient(loss, variables), variables)
        self._redraw_acting_noise()  # network.noise_refresh: update: new acting noise after every update
        self.updates.assign_add(1)
        first_nonfinite = tf.logical_and(tf.logical_not(tf.math.is_finite(loss)),
                                         tf.equal(self.first_nonfinite_update, 0))
        tf.cond(first_nonfinite, self._record_nonfinite, lambda: tf.constant(False))
        tf.cond(tf.equal((self.updates + c.target_update_phase) % c.target_update_period, 0), self._sync_target,
                lambda: tf.constant(False))
        return {"td_loss": loss, "q_values": tf.reduce_mean(tf.reduce_max(q_values_of(self.online, online), axis=-1)),
                "priority": tf.stop_gradient(priority)}
