"""Builds the networks, actor and learner from one config, identically for training, evaluation and tools.

Nothing here touches process-global state: each layer gets its dtype policy and its initializer seeds
from the config (`make_network`), so an agent built inside a user's program (a notebook, a Ray Tune
trial) leaves Keras's global policy and Python's, NumPy's and TensorFlow's global seeds as they were."""

import functools
from typing import NamedTuple

import keras
import tensorflow as tf

from tfdqn.agent.actor import Actor
from tfdqn.agent.counters import Counters
from tfdqn.agent.heads import head_spec
from tfdqn.agent.learner import Learner
from tfdqn.agent.network_fit import check_augmentation
from tfdqn.agent.networks import make_network
from tfdqn.agent.observation_encoder import legal_actions
from tfdqn.config import ComputeConfig, DQNConfig, ExplorationConfig
from tfdqn.envs.seeds import derive_seed
from tfdqn.telemetry.flops import forward_flops

CPU = "/CPU:0"


class ActingCopy:
    """A CPU copy of the online network for `compute.act_device: cpu`, so acting never reads the
    learner's (GPU) variables from a CPU graph.

    `sync()` copies online into the copy in one graph call, only when the learner made updates since
    the last copy (decided in the graph, so calling it every loop round costs a graph call and no copy
    when nothing changed); `sync(force=True)` copies whatever the counter says (after weights were
    written into online by other means than an update)."""

    def __init__(self, online: keras.Model, network: keras.Model, updates: tf.Variable):
        self.online, self.network = online, network
        self._updates = updates
        with tf.device(CPU):
            self._copied_at = tf.Variable(-1, dtype=tf.int64, trainable=False, name="acting_copy_updates")
        self._sync = tf.function(self._copy_if_updated, input_signature=[], autograph=False)
        self.sync()

    def _copy(self) -> tf.Tensor:
        for copy, source in zip(self.network.weights, self.online.weights):  # noise streams stay each its own
            copy.assign(source)
        self._copied_at.assign(self._updates)
        return tf.constant(True)

    def _copy_if_updated(self) -> tf.Tensor:
        return tf.cond(tf.not_equal(self._copied_at, self._updates), self._copy, lambda: tf.constant(False))

    def sync(self, force: bool = False) -> bool:
        """Copy online into the acting network if it changed; returns whether it copied."""
        if force:
            self._copied_at.assign(-1)
        return bool(self._sync())


class Agent(NamedTuple):
    online: keras.Model
    target: keras.Model
    actor: Actor
    learner: Learner
    counters: Counters
    acting_copy: ActingCopy | None = None  # act_device cpu: the network the actor reads

    def checkpointables(self) -> dict:
        """Every TensorFlow object a checkpoint holds, listed once (names kept stable across versions)."""
        return {"online": self.online, "target": self.target, "optimizer": self.learner.optimizer,
                "updates": self.counters.updates, "env_steps": self.counters.env_steps,
                "run_seconds": self.counters.run_seconds,
                "actor_rng": self.actor.generator, "learner_rng": self.learner.generator}

    def sync_acting_copy(self, force: bool = False) -> bool:
        """With act_device cpu: bring the actor's CPU copy up to the online network (`ActingCopy.sync`);
        with act_device auto the actor reads online itself, and this does nothing. Returns whether it copied."""
        return self.acting_copy.sync(force) if self.acting_copy is not None else False


def act_uses_xla(compute: ComputeConfig, act_on_cpu: bool) -> bool:
    """`compute.act_jit_compile`, except for bfloat16 on a CPU: XLA's CPU backend has no fast bfloat16
    convolution, where oneDNN's bfloat16 kernels run without it (docs/experiments/performance.md has the timings)."""
    return compute.act_jit_compile and not (compute.mixed_precision and act_on_cpu)


# Noise streams of noisy layers (`derive_seed(seed, NOISE, copy)`): online, target and the acting copy each
# draw their own.
NOISE, ONLINE, TARGET, ACTING = 7, 0, 1, 2


def build_network(config: DQNConfig, observation_shape: tuple, observation_dtype, num_actions: int,
                  seed: int, on_cpu: bool = False, copy: int = ONLINE, layout=None) -> keras.Model:
    """The config's network, in bfloat16 under `compute.mixed_precision` (bfloat16 keeps float32's
    exponent range, so the update needs no loss scaling), its initial weights drawn from `seed` and its
    noise (noisy layers) from `copy`'s stream of it; with `on_cpu` its variables live on the CPU."""
    policy = "mixed_bfloat16" if config.compute.mixed_precision else "float32"
    head = head_spec(config.network, config.learner, noise_seed=derive_seed(seed, NOISE, copy), acts=copy == ONLINE)
    with tf.device(CPU if on_cpu else None):
        return make_network(config.network.kind, observation_shape, observation_dtype, num_actions,
                            config.network.hidden_sizes, dtype_policy=policy, seed=seed, head=head,
                            conv_padding=config.network.conv_padding, layout=layout)


def legal_actions_of(config: DQNConfig, layout):
    """frames -> legal actions, where the env gives a mask and `env.mask_actions` applies it; else None."""
    if layout is None or layout.mask is None or not config.env.mask_actions:
        return None
    return functools.partial(legal_actions, layout)


def _acts_on_cpu(compute: ComputeConfig) -> bool:
    return compute.act_device == "cpu" or not tf.config.list_physical_devices("GPU")


# A compiled act on a CPU of fewer FLOPs than this runs on one intra-op thread (`FlatCall`'s serial_rows):
# here the Nature CNN's act at batch 1 (18.7 MFLOP) ran 1.25 times as many calls a second on one thread, at
# batch 2 (37.4 MFLOP) 0.96 times, and the IMPALA network's at batch 1 (142 MFLOP) 0.81 times
# (docs/experiments/performance.md).
SERIAL_ACT_FLOPS = 25e6


def serial_rows(network: keras.Model, compiled_on_cpu: bool) -> int:
    """The most rows an act call may have and still run on one intra-op thread (0: none)."""
    return int(SERIAL_ACT_FLOPS // max(1, forward_flops(network, 1))) if compiled_on_cpu else 0


def _actor(config: DQNConfig, exploration: ExplorationConfig, network: keras.Model, observation_shape: tuple,
           observation_dtype, num_actions: int, seed: int, on_cpu: bool, env_steps=None, layout=None) -> Actor:
    act_on_cpu = on_cpu or _acts_on_cpu(config.compute)
    compiled = act_uses_xla(config.compute, act_on_cpu)
    return Actor(network, num_actions, exploration, observation_shape, observation_dtype, seed=seed,
                 jit_compile=compiled, device=CPU if on_cpu else None, env_steps=env_steps,
                 legal=legal_actions_of(config, layout), serial_rows=serial_rows(network, compiled and act_on_cpu))


def make_acting_copy(config: DQNConfig, exploration: ExplorationConfig, observation_shape: tuple,
                     observation_dtype, num_actions: int, seed: int, layout=None) -> tuple[keras.Model, Actor]:
    """A CPU copy of the network and its own in-graph act, for an actor process: the weights come from
    the learner (`set_weights`); the env step counter is the actor's own, set from the learner's."""
    network = build_network(config, observation_shape, observation_dtype, num_actions, seed, on_cpu=True, copy=ACTING,
                            layout=layout)
    return network, _actor(config, exploration, network, observation_shape, observation_dtype, num_actions, seed,
                           on_cpu=True, layout=layout)


def make_policy_actor(config: DQNConfig, observation_shape: tuple, observation_dtype,
                      num_actions: int, layout=None) -> tuple[keras.Model, Actor]:
    """The online network and the actor that `make_agent` would build, without target, optimizer or update
    graphs: all that acting from restored weights needs (tfdqn.evaluate). It acts where the run's actor
    did, so it picks the same actions."""
    on_cpu = config.compute.act_device == "cpu"
    network = build_network(config, observation_shape, observation_dtype, num_actions, config.run.seed, on_cpu,
                            layout=layout)
    return network, _actor(config, config.exploration, network, observation_shape, observation_dtype, num_actions,
                           config.run.seed, on_cpu, layout=layout)


def make_agent(config: DQNConfig, observation_shape: tuple, observation_dtype, num_actions: int,
               layout=None) -> Agent:
    """Same seed, same initial weights. With `compute.act_device: cpu` the actor acts with its own CPU
    copy of online (`Agent.sync_acting_copy` keeps it current); with auto it reads online itself.
    `layout`: the env's `ObservationLayout` where its frames are byte-encoded (`EnvSpec.layout`)."""
    seed = config.run.seed
    check_augmentation(config.learner, observation_shape, observation_dtype)
    online, target = (build_network(config, observation_shape, observation_dtype, num_actions, seed, copy=copy,
                                    layout=layout) for copy in (ONLINE, TARGET))
    counters = Counters()
    acting_copy = None
    if config.compute.act_device == "cpu":
        acting_copy = ActingCopy(online, build_network(config, observation_shape, observation_dtype, num_actions,
                                                       seed, on_cpu=True, copy=ACTING, layout=layout), counters.updates)
    actor = _actor(config, config.exploration, acting_copy.network if acting_copy else online, observation_shape,
                   observation_dtype, num_actions, seed, on_cpu=acting_copy is not None, env_steps=counters.env_steps,
                   layout=layout)
    learner = Learner(online, target, config.learner, observation_shape, observation_dtype,
                      counters=counters, jit_compile=config.compute.update_jit_compile, seed=seed,
                      legal=legal_actions_of(config, layout))
    # Trace the update now, without running it (the actor traced act already): charged to the first
    # update, tracing would distort the phase timings of short runs.
    learner.update_many.trace()
    return Agent(online, target, actor, learner, counters, acting_copy)
