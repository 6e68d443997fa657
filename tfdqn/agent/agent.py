"""Builds the networks, actor and learner from one config, identically for training, evaluation and tools."""

from typing import NamedTuple

import keras
import tensorflow as tf

from tfdqn.agent.actor import Actor
from tfdqn.agent.counters import Counters
from tfdqn.config import ComputeConfig, DQNConfig, ExplorationConfig
from tfdqn.agent.learner import Learner
from tfdqn.agent.networks import make_network


class Agent(NamedTuple):
    online: keras.Model
    target: keras.Model
    actor: Actor
    learner: Learner
    counters: Counters

    def checkpointables(self) -> dict:
        """Every TensorFlow object a checkpoint holds, listed once (names kept stable across versions)."""
        return {"online": self.online, "target": self.target, "optimizer": self.learner.optimizer,
                "updates": self.counters.updates, "env_steps": self.counters.env_steps,
                "actor_rng": self.actor.generator}


def act_uses_xla(compute: ComputeConfig, act_on_cpu: bool) -> bool:
    """`compute.act_jit_compile`, except for bfloat16 on a CPU: XLA's CPU backend has no fast bfloat16
    convolution, and a batch-1 act took 8 ms with it against 0.9 ms without (oneDNN's bfloat16 kernels)."""
    return compute.act_jit_compile and not (compute.mixed_precision and act_on_cpu)


def _network_builder(config: DQNConfig, observation_shape: tuple, observation_dtype, num_actions: int):
    """Sets the process-global precision policy (bfloat16 keeps float32's exponent range, so the update
    needs no loss scaling on CPU or GPU) and returns a maker of the config's network."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if config.compute.mixed_precision else "float32")
    return lambda: make_network(config.network.kind, observation_shape, observation_dtype, num_actions,
                                config.network.hidden_sizes)


def make_acting_copy(config: DQNConfig, exploration: ExplorationConfig, observation_shape: tuple,
                     observation_dtype, num_actions: int, seed: int) -> tuple[keras.Model, Actor]:
    """A CPU copy of the network and its own in-graph act, for an actor process: the weights come from
    the learner (`set_weights`); the env step counter is the actor's own, set from the learner's."""
    keras.utils.set_random_seed(seed)
    network = _network_builder(config, observation_shape, observation_dtype, num_actions)()
    actor = Actor(network, num_actions, exploration, observation_shape, observation_dtype, seed=seed,
                  jit_compile=act_uses_xla(config.compute, act_on_cpu=True), device="/CPU:0")
    return network, actor


def make_agent(config: DQNConfig, observation_shape: tuple, observation_dtype, num_actions: int) -> Agent:
    """Same seed, same initial weights: Keras initializers draw from the seed set here."""
    keras.utils.set_random_seed(config.run.seed)
    build = _network_builder(config, observation_shape, observation_dtype, num_actions)
    online, target = build(), build()
    compute = config.compute
    act_on_cpu = compute.act_device == "cpu" or not tf.config.list_physical_devices("GPU")
    counters = Counters()
    actor = Actor(online, num_actions, config.exploration, observation_shape, observation_dtype,
                  seed=config.run.seed, jit_compile=act_uses_xla(compute, act_on_cpu),
                  device="/CPU:0" if compute.act_device == "cpu" else None, env_steps=counters.env_steps)
    learner = Learner(online, target, config.learner, observation_shape, observation_dtype,
                      counters=counters, jit_compile=compute.update_jit_compile)
    # Trace the update now, without running it (the actor traced act already): tracing takes about
    # a second, and charged to the first update it would distort the phase timings of short runs.
    learner.update_many.trace()
    return Agent(online, target, actor, learner, counters)
