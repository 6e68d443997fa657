"""Epsilon-greedy action selection compiled into one graph: schedule, random numbers and choice."""

import keras
import tensorflow as tf

from tfdqn.config import ExplorationConfig
from tfdqn.agent.flat_call import FlatCall
from tfdqn.agent.counters import Counters
from tfdqn.agent.epsilon import linear_epsilon
from tfdqn.agent.legal_actions import masked_q, random_legal_action
from tfdqn.agent import noisy


class Actor:
    """Chooses actions for a batch of observations; only the actions come back to Python.

    `env_steps` is the run's env step counter (`Counters.env_steps`): each `act` call reads it for
    epsilon inside the graph, so the schedule never needs a value fed from Python. Acting never moves
    it: the loop advances it by the env steps each collect made (`run/loop.py`, its one writer).
    Training draws from `generator`; evaluation from `evaluation_generator`, so turning evaluation on
    or off leaves training's exploration stream unchanged."""

    def __init__(self, network: keras.Model, num_actions: int, exploration: ExplorationConfig,
                 observation_shape: tuple, observation_dtype, seed: int, jit_compile: bool = True,
                 device: str | None = None, env_steps: tf.Variable | None = None, legal=None, serial_rows: int = 0):
        self._network = network
        self._legal = legal  # frames -> [B, actions] bool, the legal actions (None: all are)
        self._num_actions = num_actions
        self._exploration = exploration
        self.env_steps = env_steps if env_steps is not None else Counters().env_steps
        self.generator = tf.random.Generator.from_seed(seed)
        self.evaluation_generator = tf.random.Generator.from_seed(seed)  # reseeded by each evaluation
        self._device = device  # None: wherever TensorFlow places the network (the learner's device)
        observation = tf.TensorSpec([None, *observation_shape], tf.as_dtype(observation_dtype))
        # Each graph has one concrete function, called with flat tensors (FlatCall): that skips the
        # argument binding of every call and makes a retrace impossible. The tf.functions stay
        # available for export.
        # No control flow on tensors here, so no AutoGraph conversion (it only costs tracing time).
        self.act_function = tf.function(self._act, input_signature=[observation], jit_compile=jit_compile,
                                        autograph=False)
        self.act_with_epsilon_function = tf.function(
            self._act_with_epsilon, jit_compile=jit_compile, autograph=False,
            input_signature=[observation, tf.TensorSpec([], tf.float32)])
        # Calls of up to `serial_rows` observations run on one intra-op thread (agent.serial_rows says why).
        self.act = FlatCall(self.act_function, serial_rows=serial_rows).trace()
        self.act_with_epsilon = FlatCall(self.act_with_epsilon_function, serial_rows=serial_rows)

    def epsilon(self) -> tf.Tensor:
        """The schedule's epsilon at the current env step (read by the logger)."""
        e = self._exploration
        return linear_epsilon(self.env_steps, e.epsilon_start, e.epsilon_end, e.epsilon_decay_steps,
                              e.epsilon_delay_steps)

    def _choose(self, observation: tf.Tensor, epsilon: tf.Tensor, generator: tf.random.Generator,
                training: bool) -> tf.Tensor:
        """Per row: a uniform random action with probability epsilon, else the argmax of Q, both among the
        legal actions where the env gives a mask. Noisy layers draw fresh noise while training and use their
        mean weights in evaluation (`training`)."""
        with tf.device(self._device):
            batch = tf.shape(observation)[0]
            with noisy.acting_noise():  # a network holding acting noise reads it (network.noise_refresh: update)
                q_values = self._network(observation, training=training)
            if self._legal is None:
                random = generator.uniform([batch], minval=0, maxval=self._num_actions, dtype=tf.int32)
            else:
                legal = self._legal(observation)
                q_values, random = masked_q(q_values, legal), random_legal_action(generator, legal)
            greedy = tf.argmax(q_values, axis=-1, output_type=tf.int32)
            explore = generator.uniform([batch]) < epsilon
            return tf.where(explore, random, greedy)

    def _act(self, observation: tf.Tensor) -> tf.Tensor:
        return self._choose(observation, self.epsilon(), self.generator, training=True)

    def _act_with_epsilon(self, observation: tf.Tensor, epsilon: tf.Tensor) -> tf.Tensor:
        """Evaluation: a fixed epsilon (0 is greedy) from the evaluation RNG; the training step counter
        and RNG are left alone."""
        return self._choose(observation, epsilon, self.evaluation_generator, training=False)
