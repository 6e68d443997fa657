"""Builds the networks, actor and learner from one config, identically for training, evaluation and tools."""

from typing import NamedTuple

import keras

from tfdqn.actor import Actor
from tfdqn.config import DQNConfig
from tfdqn.learner import Learner
from tfdqn.networks import make_network


class Agent(NamedTuple):
    online: keras.Model
    target: keras.Model
    actor: Actor
    learner: Learner


def make_agent(config: DQNConfig, observation_shape: tuple, observation_dtype, num_actions: int) -> Agent:
    """Same seed, same initial weights: Keras initializers draw from the seed set here."""
    keras.utils.set_random_seed(config.run.seed)
    build = lambda: make_network(config.network.kind, observation_shape, observation_dtype,  # noqa: E731
                                 num_actions, config.network.hidden_sizes)
    online, target = build(), build()
    actor = Actor(online, num_actions, config.exploration, observation_shape, observation_dtype,
                  seed=config.run.seed)
    learner = Learner(online, target, config.learner, observation_shape, observation_dtype,
                      env_steps=actor.env_steps)
    # Trace each graph now, without running it: tracing takes about a second, and charged to the first
    # act or update it would distort the phase timings of short runs.
    for function in (actor.act, actor.act_with_epsilon, learner.update):
        function.get_concrete_function()
    return Agent(online, target, actor, learner)
