"""The run configuration's schema: frozen dataclasses, one per section, whose fields carry their type, default and
a one-line doc with the unit; those docs are the command-line help and the configuration reference."""

from __future__ import annotations

import dataclasses
import fractions
import math
import typing
from typing import Callable, NamedTuple

from tfdqn.errors import UserError
from tfdqn.replay.frame_codec import CODECS


class EnvKwargs(tuple):
    """`env.kwargs`: the keyword arguments for `gymnasium.make`, as (name, value) pairs sorted by name, so the
    frozen config stays hashable; a mapping in YAML, config.yaml and the run hash. Values are YAML scalars or
    lists of them."""

    @classmethod
    def of(cls, mapping: dict) -> "EnvKwargs":
        return cls(sorted((name, _frozen(value)) for name, value in mapping.items()))

    def as_dict(self) -> dict:
        return {name: list(value) if isinstance(value, tuple) else value for name, value in self}


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value


class Allowed(NamedTuple):
    """What validation accepts for one key on its own, kept beside the field so that the configuration reference
    and the check cannot disagree: `text` is what the reference and the error message say, `accepts` the test
    validation.py applies, `choices` the strings of an enumerated key. Rules across keys live in validation.py."""

    text: str
    accepts: Callable[[object], bool]
    choices: tuple = ()


def one_of(*choices: str) -> Allowed:
    return Allowed(", ".join(choices), lambda value: value in choices, choices)


INT_AT_LEAST_1 = Allowed("an integer >= 1", lambda value: value >= 1)
INT_AT_LEAST_0 = Allowed("an integer >= 0", lambda value: value >= 0)
POSITIVE = Allowed("a number > 0", lambda value: value > 0)
NON_NEGATIVE = Allowed("a number >= 0", lambda value: value >= 0)
PROBABILITY = Allowed("a probability in [0, 1]", lambda value: 0.0 <= value <= 1.0)
UNIT_INTERVAL = Allowed("a number in [0, 1]", lambda value: 0.0 <= value <= 1.0)


def interval_fraction(training_interval: float) -> fractions.Fraction | None:
    """`training_interval` as an exact fraction of small integers (0.25 -> 1/4), so that updates owed are
    counted in integers whatever the interval; None where it is <= 0 or no such fraction is close."""
    if not training_interval > 0 or not math.isfinite(training_interval):
        return None
    fraction = fractions.Fraction(training_interval).limit_denominator(1000)
    return fraction if fraction > 0 and abs(float(fraction) - training_interval) <= 1e-9 * training_interval else None


INTERVAL = Allowed("a number > 0 that is a fraction with a denominator of at most 1000 (4, 1, 0.5, 0.25)",
                   lambda value: interval_fraction(value) is not None)
LAYER_SIZES = Allowed("one or more integers >= 1", lambda value: len(value) >= 1 and min(value) >= 1)


def _mask_source(value: str) -> bool:
    where, _, key = value.partition(":")
    return value in ("auto", "none") or (where in ("info", "observation") and bool(key))


def _field(default, doc: str, allowed: Allowed | None = None):
    """A dataclass field whose doc (unit included) is shown by `--help`, and what validation accepts for it."""
    metadata = {"doc": doc, "allowed": allowed}
    if isinstance(default, EnvKwargs):
        return dataclasses.field(default_factory=EnvKwargs, metadata=metadata)
    if isinstance(default, (list, tuple)):
        return dataclasses.field(default_factory=lambda: tuple(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """The environment: which one, its keyword arguments and legal actions, and for Atari games the
    preprocessing of Mnih et al. 2015 with the ALE v5 protocol of Machado et al. 2018."""

    id: str = _field("CartPole", "environment: short name (CartPole, Breakout, any ALE game) or gymnasium id")
    frame_stack: int = _field(1, "frames per observation (Atari: 4, Mnih et al. 2015)",
                              allowed=INT_AT_LEAST_1)
    noop_max: int = _field(30, "Atari: no-op start, a random number of NOOP emulator frames (not agent steps) "
                               "before each new game, uniform in 0..noop_max, with one env and with vector envs "
                               "alike; 0: none",
                           allowed=INT_AT_LEAST_0)
    frame_skip: int = _field(4, "Atari: emulator frames per agent step, max over the last two (Mnih et al. 2015)",
                             allowed=INT_AT_LEAST_1)
    screen_size: int = _field(84, "Atari: square grayscale frame side in pixels (Mnih et al. 2015)",
                              allowed=INT_AT_LEAST_1)
    terminal_on_life_loss: bool = _field(True, "Atari: a lost life ends the episode for learning only "
                                               "(Mnih et al. 2015)")
    fire_on_reset: bool = _field(True, "Atari: press FIRE to start each life in games that need it "
                                       "(OpenAI Baselines)")
    repeat_action_probability: float = _field(0.25, "Atari: sticky-action probability per emulator frame "
                                                    "(Machado et al. 2018)",
                                              allowed=PROBABILITY)
    max_episode_frames: int = _field(108_000, "Atari: emulator frames a game may run after its no-op start before "
                                              "it is truncated (108,000: 30 min at 60 Hz)",
                                     allowed=INT_AT_LEAST_1)
    max_episode_steps: int = _field(27_000, "non-Atari envs that register no time limit of their own: a game ends, "
                                            "truncated (its last state bootstraps), after this many steps, so no "
                                            "run or evaluation can hang on a policy that loops; 0: no cap",
                                    allowed=INT_AT_LEAST_0)
    step_delay_ms: float = _field(0.0, "milliseconds each env step waits without using the CPU, as a simulator "
                                       "behind a socket would (tools/bench_actors.py); 0: none",
                                  allowed=NON_NEGATIVE)
    kwargs: EnvKwargs = _field(EnvKwargs(), "keyword arguments for gymnasium.make: --set env.kwargs.NAME=VALUE "
                                            "(CarRacing-v3: env.kwargs.continuous=false) or a kwargs mapping in a "
                                            "config file's env section")
    action_mask: str = _field("auto", "where the legal-action mask comes from: auto (a Dict observation's action_mask "
                                      "entry, else info['action_mask'] where the env gives one), none, info:KEY or "
                                      "observation:KEY",
                              allowed=Allowed("auto, none, info:KEY or observation:KEY", _mask_source))
    mask_actions: bool = _field(True, "act and the target choose among legal actions only (env.action_mask); false: "
                                      "the mask is only read, to count illegal actions (charts/illegal_actions)")


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    """The replay memory: its size, where it lives, how its frames are stored and how batches are drawn."""

    capacity: int = _field(50_000, "replay size in transitions",
                           allowed=INT_AT_LEAST_1)
    batch_size: int = _field(64, "transitions per gradient update",
                             allowed=INT_AT_LEAST_1)
    device: str = _field("host", "where transitions live: host (NumPy ring; faster on CPU-only machines, "
                                 "docs/experiments/performance.md) or accelerator (tf.Variable storage, sampled "
                                 "inside the update graph)",
                         allowed=one_of("host", "accelerator"))
    compression: str = _field("none", "host replay: each frame's lossless codec, none, zstd or lz4 (the same run bit "
                                      "for bit; docs/experiments/replay.md)",
                              allowed=one_of(*CODECS))
    prefetch: bool = _field(False, "host replay: draw the next update's batches as this one's go to the update and "
                                   "assemble them (decode, stack, n-step sums) in a second thread while it runs; "
                                   "batches are then drawn one update early (docs/experiments/replay.md)")
    audit: bool = _field(False, "check every batch an update trains on against an independent record of every "
                                "transition written (tfdqn/replay/audit.py); a difference stops the run in one line "
                                "naming the slot. Slow (a Python loop per sampled transition): for tests and short "
                                "runs; it changes nothing the run trains on")
    memory_budget_gib: float = _field(0.0, "with compression: the most memory the replay may take, GiB (its records "
                                           "up front and the frames it holds); frames that compress worse cost "
                                           "transitions held, never memory. 0: the raw ring's size, or half the "
                                           "memory available at start if that is less",
                                      allowed=NON_NEGATIVE)
    sampler: str = _field("uniform", "how batches are drawn: uniform, or prioritized (proportional to priority^alpha "
                                     "with importance weights, Schaul et al. 2016)",
                          allowed=one_of("uniform", "prioritized"))
    priority_exponent: float = _field(0.6, "prioritized: alpha, how strongly priorities skew sampling (0: uniform; "
                                           "Schaul et al. 2016 use 0.6, Rainbow 0.5)",
                                      allowed=NON_NEGATIVE)
    importance_exponent: float = _field(0.4, "prioritized: beta at env step 0 of the importance weights "
                                             "(N P(i))^-beta / max (Schaul et al. 2016)",
                                        allowed=UNIT_INTERVAL)
    importance_exponent_end: float = _field(1.0, "prioritized: beta reached linearly at run.total_steps (1: full "
                                                 "correction, Schaul et al. 2016)",
                                            allowed=UNIT_INTERVAL)
    priority_epsilon: float = _field(1e-6, "prioritized: added to |TD error| (or the per-sample loss) so no "
                                           "transition's priority is 0",
                                     allowed=POSITIVE)


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The Q-network: its body (an MLP or a CNN) and its head (dueling, noisy)."""

    kind: str = _field("auto", "network: auto (for uint8 images nature_cnn from 36 pixels a side, small_cnn "
                               "below; else mlp), mlp, nature_cnn, small_cnn (for 42x42 frames) or impala "
                               "(Espeholt et al. 2018's residual network, as Dopamine's ImpalaDQNNetwork: 84x84 or "
                               "42x42 frames)",
                       allowed=one_of("auto", "mlp", "nature_cnn", "small_cnn", "impala"))
    hidden_sizes: tuple = _field((256, 256), "mlp: units per hidden layer",
                                 allowed=LAYER_SIZES)
    dueling: bool = _field(False, "dueling head: Q = V + A - mean(A), value and advantage streams (Wang et al. 2016)")
    noisy: bool = _field(False, "noisy linear layers after the body, factorised Gaussian noise (Fortunato et al. "
                                "2018; when acting draws it: noise_refresh); exploration epsilon then defaults to 0")
    noisy_sigma0: float = _field(0.5, "noisy: initial noise scale sigma0 / sqrt(inputs) (Fortunato et al. 2018: 0.5; "
                                      "data-efficient Rainbow, van Hasselt et al. 2019: 0.1)",
                                 allowed=POSITIVE)
    noise_refresh: str = _field("call", "noisy: when acting draws its noise: call (every act call, as Dopamine's "
                                        "agents) or update (once after every update, held in between, as Fortunato "
                                        "et al. 2018 section 3.1; the act call then draws nothing, and the warm-up "
                                        "redraws it every training_interval env steps); updates draw on every call "
                                        "either way. A rule makes it update where allowed (inline actors, act_device "
                                        "auto) unless set",
                                allowed=one_of("call", "update"))
    conv_padding: str = _field("valid", "nature_cnn: convolution padding, valid (Mnih et al. 2015: a 7x7x64 map from "
                                        "84x84 frames) or same (Dopamine's Atari-100k network: 11x11x64)",
                               allowed=one_of("valid", "same"))


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """The update: discount, optimizer, target network, and the loss of each member of the DQN family."""

    gamma: float = _field(0.99, "discount per agent step",
                          allowed=Allowed("a discount in [0, 1]", PROBABILITY.accepts))
    optimizer: str = _field("adam", "optimizer: adam or rmsprop",
                            allowed=one_of("adam", "rmsprop"))
    learning_rate: float = _field(1e-3, "optimizer step size",
                                  allowed=POSITIVE)
    learning_rate_end: float = _field(0.0, "step size reached by a linear decay over learning_rate_decay_updates",
                                      allowed=NON_NEGATIVE)
    learning_rate_decay_updates: int = _field(0, "gradient updates over which the step size falls linearly from "
                                                 "learning_rate to learning_rate_end, then stays; 0: constant",
                                              allowed=INT_AT_LEAST_0)
    adam_epsilon: float = _field(1e-7, "optimizer epsilon (numerical floor of the denominator)",
                                 allowed=POSITIVE)
    double_dqn: bool = _field(True, "select the next action with the online net, value it with the target net")
    huber_delta: float = _field(1.0, "TD error beyond which the loss grows linearly",
                                allowed=POSITIVE)
    max_grad_norm: float = _field(10.0, "global gradient-norm clip; 0 turns clipping off",
                                  allowed=NON_NEGATIVE)
    target_update_period: int = _field(500, "gradient updates between target-network copies",
                                       allowed=INT_AT_LEAST_1)
    target_update_phase: int = _field(0, "updates counted as made before the first, for the copy's period: a copy "
                                         "follows update u where (u + phase) is a multiple of the period (Dopamine "
                                         "counts its period in agent steps from step 0: learning_starts / "
                                         "training_interval)",
                                      allowed=INT_AT_LEAST_0)
    clip_rewards: bool = _field(False, "clip each reward to its sign for the loss, before n-step sums (logged "
                                       "returns stay raw; Mnih et al. 2015)")
    n_step: int = _field(1, "rewards summed before bootstrapping: gamma^j-weighted over up to n steps of the "
                            "episode (Hessel et al. 2018 use 3)",
                         allowed=INT_AT_LEAST_1)
    loss: str = _field("huber", "huber (DQN, Mnih et al. 2015), categorical (C51, Bellemare et al. 2017), "
                                "quantile (QR-DQN, Dabney et al. 2018) or implicit_quantile (IQN, Dabney et al. "
                                "2018)",
                       allowed=one_of("huber", "categorical", "quantile", "implicit_quantile"))
    num_atoms: int = _field(51, "categorical: atoms of the return distribution (Bellemare et al. 2017)",
                            allowed=Allowed("an integer >= 2", lambda value: value >= 2))
    v_min: float = _field(-10.0, "categorical: lowest atom, in return units (Bellemare et al. 2017)")
    v_max: float = _field(10.0, "categorical: highest atom, in return units (Bellemare et al. 2017)")
    num_quantiles: int = _field(200, "quantile: quantiles of the return distribution (Dabney et al. 2018)",
                                allowed=INT_AT_LEAST_1)
    num_tau_samples: int = _field(64, "implicit_quantile: N, fractions sampled for the online quantiles of each "
                                      "sample",
                                  allowed=INT_AT_LEAST_1)
    num_tau_prime_samples: int = _field(64, "implicit_quantile: N', fractions sampled for the target quantiles",
                                        allowed=INT_AT_LEAST_1)
    num_quantile_samples: int = _field(32, "implicit_quantile: K, fixed fractions (2k + 1) / 2K whose quantiles' "
                                           "mean is the Q that acting, evaluation and export read",
                                       allowed=INT_AT_LEAST_1)
    quantile_embedding_dim: int = _field(64, "implicit_quantile: cosines cos(pi i tau), i = 1..n, embedding each "
                                             "fraction",
                                         allowed=INT_AT_LEAST_1)
    augment_pad: int = _field(0, "image observations: random shift, replicate-pad this many pixels and crop back, "
                                 "drawn independently for observation and next observation (DrQ, Kostrikov et "
                                 "al. 2021: 4); 0: off",
                              allowed=INT_AT_LEAST_0)
    augment_intensity: float = _field(0.0, "image observations: intensity noise x * (1 + s * clip(N(0,1), -2, 2)) "
                                           "per sample (DrQ(epsilon), Agarwal et al. 2021: 0.05); 0: off",
                                      allowed=NON_NEGATIVE)
    munchausen: bool = _field(False, "Munchausen-DQN's target (Vieillard et al. 2020): the target network's "
                                     "soft value, plus alpha times the clipped tau * log-policy of the action taken; "
                                     "with loss huber (M-DQN) or implicit_quantile (M-IQN)")
    munchausen_tau: float = _field(0.03, "munchausen: softmax temperature tau of the target policy (the paper's Atari "
                                         "value)",
                                   allowed=POSITIVE)
    munchausen_alpha: float = _field(0.9, "munchausen: scale alpha of the log-policy term (the paper's Atari value)",
                                     allowed=NON_NEGATIVE)
    munchausen_clip: float = _field(-1.0, "munchausen: l0, the lowest the tau * log-policy term may go (the paper's "
                                          "Atari value; its code's default is -10)",
                                    allowed=Allowed("a number < 0", lambda value: value < 0))


@dataclasses.dataclass(frozen=True)
class ComputeConfig:
    """How the computation runs: XLA, devices, precision and determinism; the defaults were chosen by tools/bench.py
    on a 2-core CPU machine (docs/experiments/performance.md has the figures)."""

    act_jit_compile: bool = _field(True, "XLA-compile act: faster per call on CPU (docs/experiments/performance.md)")
    update_jit_compile: bool = _field(False, "XLA-compile the update (not the replay-fed one of replay.device="
                                             "accelerator, which XLA cannot compile): off here because oneDNN runs "
                                             "the Nature CNN faster on CPU; on in the classic-control configs")
    act_device: str = _field("auto", "where act runs: auto (beside the learner) or cpu (act on the CPU while "
                                     "the learner uses a GPU)",
                             allowed=one_of("auto", "cpu"))
    mixed_precision: bool = _field(False, "bfloat16 compute with float32 weights (act on a CPU then runs without "
                                          "XLA); off because CPUs without bf16 units run it slower")
    deterministic: bool = _field(False, "TensorFlow's deterministic kernels (enable_op_determinism), so a GPU run "
                                        "repeats bit for bit; off by default, as it slows GPU kernels")


@dataclasses.dataclass(frozen=True)
class ExplorationConfig:
    """Epsilon-greedy acting: the schedule in training and the epsilon of evaluation."""

    epsilon_start: float = _field(1.0, "random-action probability at env step 0",
                                  allowed=PROBABILITY)
    epsilon_end: float = _field(0.05, "random-action probability after the decay",
                                allowed=PROBABILITY)
    epsilon_decay_steps: int = _field(10_000, "env steps of linear decay from start to end",
                                      allowed=INT_AT_LEAST_0)
    epsilon_delay_steps: int = _field(0, "env steps epsilon holds at epsilon_start before its decay begins "
                                         "(Dopamine's warm-up: the first learning_starts steps)",
                                      allowed=INT_AT_LEAST_0)
    eval_epsilon: float = _field(0.0, "random-action probability during evaluation",
                                 allowed=PROBABILITY)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The run: its length, updates per env step, vector envs, and how often it logs, saves and evaluates."""

    total_steps: int = _field(50_000, "env steps to train for",
                              allowed=INT_AT_LEAST_1)
    learning_starts: int = _field(1_000, "env steps of acting before the first update",
                                  allowed=INT_AT_LEAST_0)
    training_interval: float = _field(1.0, "env steps per gradient update; below 1 several updates per env step "
                                         "(0.25: four)",
                                      allowed=INTERVAL)
    env_steps_per_round: int = _field(1, "env steps between update rounds: the updates owed by then run together "
                                  "in fused calls (SB3's train_freq); 1: after every vector step",
                                      allowed=INT_AT_LEAST_1)
    seed: int = _field(0, "seed of every random number generator in the run",
                       allowed=INT_AT_LEAST_0)
    log_every: int = _field(1_000, "env steps between TensorBoard summaries",
                            allowed=INT_AT_LEAST_1)
    checkpoint_every: int = _field(10_000, "env steps between checkpoints; 0 saves only at the end",
                                   allowed=INT_AT_LEAST_0)
    eval_every: int = _field(0, "env steps between periodic evaluations; 0 turns them off",
                             allowed=INT_AT_LEAST_0)
    target_return: float = _field(math.inf, "end the run at the first periodic evaluation whose mean return "
                                            "reaches this (and, with run.confirm_episodes, whose confirmation "
                                            "does too), then evaluate and export as at the end; inf: never",
                                  allowed=Allowed("a number, or inf", lambda value: not math.isnan(value)))
    eval_episodes: int = _field(5, "episodes per periodic evaluation",
                                allowed=INT_AT_LEAST_1)
    confirm_episodes: int = _field(0, "fresh games (seeds no evaluation used before) that a network whose periodic "
                                      "evaluation reaches run.target_return plays again: the hit counts only if "
                                      "their mean reaches it too, and that mean is what picks the best network; "
                                      "0: the periodic evaluation's hit counts at once", allowed=INT_AT_LEAST_0)
    final_eval_episodes: int = _field(10, "episodes of the evaluation at the end of the run",
                                      allowed=INT_AT_LEAST_1)
    num_envs: int = _field(1, "envs stepped together (one act call for all); env steps count across all envs",
                           allowed=INT_AT_LEAST_1)
    async_learner: bool = _field(False, "run the learner in its own thread while the envs step, holding "
                                        "updates at 1 / training_interval of env steps; not bit-reproducible")


@dataclasses.dataclass(frozen=True)
class ActorsConfig:
    """Where the envs step: in this process, or in actor processes or Ray actors that send their
    transitions to the learner."""

    kind: str = _field("inline", "where the envs step: inline (this process, run.num_envs envs), process "
                                 "(actor processes) or ray (Ray actors, on this machine or a cluster)",
                       allowed=one_of("inline", "process", "ray"))
    count: int = _field(2, "process/ray: actors, each with its own envs and a CPU copy of the network",
                        allowed=INT_AT_LEAST_1)
    envs_per_actor: int = _field(1, "process/ray: envs each actor steps together (one act call for all)",
                                 allowed=INT_AT_LEAST_1)
    weight_sync_period: int = _field(100, "process/ray: gradient updates between sending the weights to the actors",
                                     allowed=INT_AT_LEAST_1)
    chunk_steps: int = _field(128, "process/ray: vector steps an actor takes per batch of transitions it sends "
                                        "(fewer, larger messages: Ray adds a few ms per call on a loaded machine)",
                              allowed=INT_AT_LEAST_1)
    exploration: str = _field("schedule", "process/ray: schedule (the run's epsilon schedule) or apex (actor i "
                                          "of N keeps epsilon 0.4^(1 + 7 i / (N - 1)), Horgan et al. 2018)",
                              allowed=one_of("schedule", "apex"))
    ray_address: str = _field("", "ray: address of a running Ray cluster (auto: the one this machine joined, "
                                  "else any Ray running here); empty: start Ray of the run's own on 127.0.0.1")
    cpus_per_actor: float = _field(1.0, "ray: CPUs the Ray scheduler reserves per actor (spreads actors over a "
                                        "cluster)",
                                   allowed=POSITIVE)
    ray_placement_timeout: float = _field(300.0, "ray: seconds a started actor may wait for a node with "
                                                 "cpus_per_actor CPUs free (a cluster's autoscaler may be adding "
                                                 "one); then the run stops in one line, its checkpoint kept",
                                          allowed=POSITIVE)


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    """Experiment tracking beyond TensorBoard."""

    wandb: bool = _field(False, "send the config and every TensorBoard scalar to a Weights & Biases run (pip install "
                                "\"tfdqn[wandb]\"; WANDB_MODE=offline keeps it on disk); a resumed run goes on in it")
    wandb_project: str = _field("tfdqn", "the Weights & Biases project of the run",
                                allowed=Allowed("a project name", lambda value: bool(value.strip())))


@dataclasses.dataclass(frozen=True)
class DQNConfig:
    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    replay: ReplayConfig = dataclasses.field(default_factory=ReplayConfig)
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    learner: LearnerConfig = dataclasses.field(default_factory=LearnerConfig)
    exploration: ExplorationConfig = dataclasses.field(default_factory=ExplorationConfig)
    run: RunConfig = dataclasses.field(default_factory=RunConfig)
    compute: ComputeConfig = dataclasses.field(default_factory=ComputeConfig)
    actors: ActorsConfig = dataclasses.field(default_factory=ActorsConfig)
    tracking: TrackingConfig = dataclasses.field(default_factory=TrackingConfig)

    @property
    def num_streams(self) -> int:
        """Envs whose transitions reach the replay (streams of one shared ring, each episode linked
        within its stream): run.num_envs in this process, or every actor's envs."""
        if self.actors.kind == "inline":
            return self.run.num_envs
        return self.actors.count * self.actors.envs_per_actor

    @property
    def steps_per_collect(self) -> int:
        """Env steps one `collect` adds: a vector step of this process's envs, or of one actor's."""
        return self.run.num_envs if self.actors.kind == "inline" else self.actors.envs_per_actor

    @classmethod
    def for_env(cls, env, overrides: dict | None = None) -> DQNConfig:
        """The config `python -m tfdqn.train --env ENV --set KEY=VALUE ...` runs, for Python callers:
        `overrides` maps the keys of --set to values, e.g. {"run.total_steps": 3000}. `env` is a name or id as
        --env takes it, or a registered env made by `gymnasium.make` (or a function that makes one): its id
        and the keyword arguments it was made with beyond its registration's become env.id and env.kwargs,
        since every env of the run (vector envs, actors, evaluation, a resume) is made again from them."""
        settings = dict(overrides or {})
        if not isinstance(env, str):
            env_id, kwargs = _made_with(env)
            settings = {**{f"env.kwargs.{name}": value for name, value in kwargs.items()}, **settings}
            env = env_id
        from tfdqn.config.resolution import resolve_config  # resolution builds on this schema

        return resolve_config([], {**settings, "env.id": env})


def _made_with(env) -> tuple[str, dict]:
    """(id, keyword arguments beyond its registration's) of a gymnasium env, or of the env `env()` makes."""
    import gymnasium

    made = env() if callable(env) and not isinstance(env, gymnasium.Env) else env
    try:
        spec = getattr(made, "spec", None)
        if not isinstance(made, gymnasium.Env) or spec is None or spec.id not in gymnasium.registry:
            raise UserError(f"env {made!r} was not made by gymnasium.make from a registered id; allowed: an env id, or "
                            f"an env gymnasium.make made (gymnasium.register your env first)")
        registered = gymnasium.spec(spec.id).kwargs
        return spec.id, {name: value for name, value in spec.kwargs.items()
                         if name not in registered or registered[name] != value}
    finally:
        if made is not env:
            made.close()


def _key_fields() -> dict[str, dataclasses.Field]:
    """Every dotted key's dataclass field, in declaration order."""
    return {f"{section.name}.{f.name}": f for section in dataclasses.fields(DQNConfig)
            for f in dataclasses.fields(section_type(section.name))}


def field_docs() -> dict[str, str]:
    """Every dotted key with its doc, in declaration order, for `--help` and error messages."""
    return {key: f.metadata["doc"] for key, f in _key_fields().items()}


def field_allowed() -> dict[str, Allowed]:
    """Every dotted key that validation restricts on its own, with what it accepts, in declaration order: the one
    place validation.py and the configuration reference read it from."""
    return {key: f.metadata["allowed"] for key, f in _key_fields().items() if f.metadata["allowed"] is not None}


def section_type(name: str) -> type:
    """The dataclass of a section of DQNConfig (`env` -> EnvConfig)."""
    return typing.get_type_hints(DQNConfig)[name]


def field_type(key: str) -> type:
    """The type of a dotted config key's value (bool, int, float, str or tuple)."""
    return _field_type(*key.split("."))


def _field_type(section: str, name: str):
    return typing.get_type_hints(section_type(section))[name]
