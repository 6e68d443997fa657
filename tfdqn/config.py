"""Typed, frozen run configuration: YAML files, `--set key=value` overrides, one validation pass.

Every field carries a one-line doc stating its unit; those docs are the command-line help.
"""

from __future__ import annotations

import dataclasses
import difflib
import fractions
import importlib.resources
import importlib.util
import math
import pathlib
import typing

import yaml

from tfdqn.atomic import atomic_write
from tfdqn.errors import UserError
from tfdqn.extras import require
from tfdqn.replay.frame_codec import CODECS

# The YAML configs ship inside the package, so a non-editable install finds them from any folder.
CONFIG_DIR = pathlib.Path(str(importlib.resources.files("tfdqn") / "configs"))


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


def _field(default, doc: str):
    """A dataclass field whose doc (unit included) is shown by `--help`."""
    if isinstance(default, EnvKwargs):
        return dataclasses.field(default_factory=EnvKwargs, metadata={"doc": doc})
    if isinstance(default, (list, tuple)):
        return dataclasses.field(default_factory=lambda: tuple(default), metadata={"doc": doc})
    return dataclasses.field(default=default, metadata={"doc": doc})


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    id: str = _field("CartPole", "environment: short name (CartPole, Breakout, any ALE game) or gymnasium id")
    frame_stack: int = _field(1, "frames per observation (Atari: 4, Mnih et al. 2015)")
    noop_max: int = _field(30, "Atari: no-op start, a random number of NOOP emulator frames (not agent steps) "
                               "before each new game, uniform in 0..noop_max, with one env and with vector envs "
                               "alike; 0: none")
    frame_skip: int = _field(4, "Atari: emulator frames per agent step, max over the last two (Mnih et al. 2015)")
    screen_size: int = _field(84, "Atari: square grayscale frame side in pixels (Mnih et al. 2015)")
    terminal_on_life_loss: bool = _field(True, "Atari: a lost life ends the episode for learning only (Mnih et al. 2015)")
    fire_on_reset: bool = _field(True, "Atari: press FIRE to start each life in games that need it (OpenAI Baselines)")
    repeat_action_probability: float = _field(0.25, "Atari: sticky-action probability per emulator frame (Machado et al. 2018)")
    max_episode_frames: int = _field(108_000, "Atari: emulator frames a game may run after its no-op start before "
                                              "it is truncated (108,000: 30 min at 60 Hz)")
    step_delay_ms: float = _field(0.0, "milliseconds each env step waits without using the CPU, as a simulator "
                                       "behind a socket would (tools/bench_actors.py); 0: none")
    kwargs: EnvKwargs = _field(EnvKwargs(), "keyword arguments for gymnasium.make: --set env.kwargs.NAME=VALUE "
                                            "(CarRacing-v3: env.kwargs.continuous=false) or a kwargs mapping in a "
                                            "config file's env section")
    action_mask: str = _field("auto", "where the legal-action mask comes from: auto (a Dict observation's action_mask "
                                      "entry, else info['action_mask'] where the env gives one), none, info:KEY or "
                                      "observation:KEY")
    mask_actions: bool = _field(True, "act and the target choose among legal actions only (env.action_mask); false: "
                                      "the mask is only read, to count illegal actions (charts/illegal_actions)")


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    capacity: int = _field(50_000, "replay size in transitions")
    batch_size: int = _field(64, "transitions per gradient update")
    device: str = _field("host", "where transitions live: host (NumPy ring; faster on CPU-only machines, "
                                 "docs/performance.md) or accelerator (tf.Variable storage, sampled inside the update graph)")
    compression: str = _field("none", "host replay: each frame's lossless codec, none, zstd or lz4 (the same run bit "
                                      "for bit; docs/replay.md)")
    prefetch: bool = _field(False, "host replay: draw the next update's batches as this one's go to the update and "
                                   "assemble them (decode, stack, n-step sums) in a second thread while it runs; "
                                   "batches are then drawn one update early (docs/replay.md)")
    memory_budget_gib: float = _field(0.0, "with compression: the most memory the replay may take, GiB (its records "
                                           "up front and the frames it holds); frames that compress worse cost "
                                           "transitions held, never memory. 0: the raw ring's size, or half the "
                                           "memory available at start if that is less")
    sampler: str = _field("uniform", "how batches are drawn: uniform, or prioritized (proportional to priority^alpha "
                                     "with importance weights, Schaul et al. 2016)")
    priority_exponent: float = _field(0.6, "prioritized: alpha, how strongly priorities skew sampling (0: uniform; "
                                           "Schaul et al. 2016 use 0.6, Rainbow 0.5)")
    importance_exponent: float = _field(0.4, "prioritized: beta at env step 0 of the importance weights "
                                             "(N P(i))^-beta / max (Schaul et al. 2016)")
    importance_exponent_end: float = _field(1.0, "prioritized: beta reached linearly at run.total_steps (1: full "
                                                 "correction, Schaul et al. 2016)")
    priority_epsilon: float = _field(1e-6, "prioritized: added to |TD error| (or the per-sample loss) so no "
                                           "transition's priority is 0")


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    kind: str = _field("auto", "network: auto (for uint8 images nature_cnn from 36 pixels a side, small_cnn below; else mlp), mlp, nature_cnn, "
                                    "small_cnn (for 42x42 frames) or impala (Espeholt et al. 2018's residual network, "
                                    "as Dopamine's ImpalaDQNNetwork: 84x84 or 42x42 frames)")
    hidden_sizes: tuple = _field((256, 256), "mlp: units per hidden layer")
    dueling: bool = _field(False, "dueling head: Q = V + A - mean(A), value and advantage streams (Wang et al. 2016)")
    noisy: bool = _field(False, "noisy linear layers after the body, factorised Gaussian noise (Fortunato et al. "
                                "2018; when acting draws it: noise_refresh); exploration epsilon then defaults to 0")
    noisy_sigma0: float = _field(0.5, "noisy: initial noise scale sigma0 / sqrt(inputs) (Fortunato et al. 2018: 0.5; "
                                      "data-efficient Rainbow, van Hasselt et al. 2019: 0.1)")
    noise_refresh: str = _field("call", "noisy: when acting draws its noise: call (every act call, as Dopamine's "
                                        "agents) or update (once after every update, held in between, as Fortunato "
                                        "et al. 2018 section 3.1; the act call then draws nothing, and the warm-up "
                                        "redraws it every training_interval env steps); updates draw on every call "
                                        "either way. A rule makes it update where allowed (inline actors, act_device "
                                        "auto) unless set")
    conv_padding: str = _field("valid", "nature_cnn: convolution padding, valid (Mnih et al. 2015: a 7x7x64 map from "
                                        "84x84 frames) or same (Dopamine's Atari-100k network: 11x11x64)")


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    gamma: float = _field(0.99, "discount per agent step")
    optimizer: str = _field("adam", "optimizer: adam or rmsprop")
    learning_rate: float = _field(1e-3, "optimizer step size")
    learning_rate_end: float = _field(0.0, "step size reached by a linear decay over learning_rate_decay_updates")
    learning_rate_decay_updates: int = _field(0, "gradient updates over which the step size falls linearly from "
                                                 "learning_rate to learning_rate_end, then stays; 0: constant")
    adam_epsilon: float = _field(1e-7, "optimizer epsilon (numerical floor of the denominator)")
    double_dqn: bool = _field(True, "select the next action with the online net, value it with the target net")
    huber_delta: float = _field(1.0, "TD error beyond which the loss grows linearly")
    max_grad_norm: float = _field(10.0, "global gradient-norm clip; 0 turns clipping off")
    target_update_period: int = _field(500, "gradient updates between target-network copies")
    target_update_phase: int = _field(0, "updates counted as made before the first, for the copy's period: a copy "
                                         "follows update u where (u + phase) is a multiple of the period (Dopamine "
                                         "counts its period in agent steps from step 0: learning_starts / "
                                         "training_interval)")
    clip_rewards: bool = _field(False, "clip each reward to its sign for the loss, before n-step sums (logged "
                                       "returns stay raw; Mnih et al. 2015)")
    n_step: int = _field(1, "rewards summed before bootstrapping: gamma^j-weighted over up to n steps of the "
                            "episode (Hessel et al. 2018 use 3)")
    loss: str = _field("huber", "huber (DQN, Mnih et al. 2015), categorical (C51, Bellemare et al. 2017), "
                                "quantile (QR-DQN, Dabney et al. 2018) or implicit_quantile (IQN, Dabney et al. "
                                "2018)")
    num_atoms: int = _field(51, "categorical: atoms of the return distribution (Bellemare et al. 2017)")
    v_min: float = _field(-10.0, "categorical: lowest atom, in return units (Bellemare et al. 2017)")
    v_max: float = _field(10.0, "categorical: highest atom, in return units (Bellemare et al. 2017)")
    num_quantiles: int = _field(200, "quantile: quantiles of the return distribution (Dabney et al. 2018)")
    num_tau_samples: int = _field(64, "implicit_quantile: N, fractions sampled for the online quantiles of each "
                                      "sample")
    num_tau_prime_samples: int = _field(64, "implicit_quantile: N', fractions sampled for the target quantiles")
    num_quantile_samples: int = _field(32, "implicit_quantile: K, fixed fractions (2k + 1) / 2K whose quantiles' "
                                           "mean is the Q that acting, evaluation and export read")
    quantile_embedding_dim: int = _field(64, "implicit_quantile: cosines cos(pi i tau), i = 1..n, embedding each "
                                             "fraction")
    augment_pad: int = _field(0, "image observations: random shift, replicate-pad this many pixels and crop back, "
                                 "drawn independently for observation and next observation (DrQ, Kostrikov et "
                                 "al. 2021: 4); 0: off")
    augment_intensity: float = _field(0.0, "image observations: intensity noise x * (1 + s * clip(N(0,1), -2, 2)) "
                                           "per sample (DrQ(epsilon), Agarwal et al. 2021: 0.05); 0: off")
    munchausen: bool = _field(False, "Munchausen-DQN's target (Vieillard et al. 2020): the target network's "
                                     "soft value, plus alpha times the clipped tau * log-policy of the action taken; "
                                     "with loss huber (M-DQN) or implicit_quantile (M-IQN)")
    munchausen_tau: float = _field(0.03, "munchausen: softmax temperature tau of the target policy (the paper's Atari "
                                         "value)")
    munchausen_alpha: float = _field(0.9, "munchausen: scale alpha of the log-policy term (the paper's Atari value)")
    munchausen_clip: float = _field(-1.0, "munchausen: l0, the lowest the tau * log-policy term may go (the paper's "
                                          "Atari value; its code's default is -10)")


@dataclasses.dataclass(frozen=True)
class ComputeConfig:
    # Defaults chosen by tools/bench.py on a 2-core CPU machine; docs/performance.md has the figures.
    act_jit_compile: bool = _field(True, "XLA-compile act: faster per call on CPU (docs/performance.md)")
    update_jit_compile: bool = _field(False, "XLA-compile the update (not the replay-fed one of replay.device="
                                             "accelerator, which XLA cannot compile): off here because oneDNN runs "
                                             "the Nature CNN faster on CPU; on in the classic-control configs")
    act_device: str = _field("auto", "where act runs: auto (beside the learner) or cpu (act on the CPU while "
                                     "the learner uses a GPU)")
    mixed_precision: bool = _field(False, "bfloat16 compute with float32 weights (act on a CPU then runs without "
                                          "XLA); off because CPUs without bf16 units run it slower")
    deterministic: bool = _field(False, "TensorFlow's deterministic kernels (enable_op_determinism), so a GPU run "
                                        "repeats bit for bit; off by default, as it slows GPU kernels")


@dataclasses.dataclass(frozen=True)
class ExplorationConfig:
    epsilon_start: float = _field(1.0, "random-action probability at env step 0")
    epsilon_end: float = _field(0.05, "random-action probability after the decay")
    epsilon_decay_steps: int = _field(10_000, "env steps of linear decay from start to end")
    epsilon_delay_steps: int = _field(0, "env steps epsilon holds at epsilon_start before its decay begins "
                                         "(Dopamine's warm-up: the first learning_starts steps)")
    eval_epsilon: float = _field(0.0, "random-action probability during evaluation")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    total_steps: int = _field(50_000, "env steps to train for")
    learning_starts: int = _field(1_000, "env steps of acting before the first update")
    training_interval: float = _field(1.0, "env steps per gradient update; below 1 several updates per env step "
                                         "(0.25: four)")
    env_steps_per_round: int = _field(1, "env steps between update rounds: the updates owed by then run together "
                                  "in fused calls (SB3's train_freq); 1: after every vector step")
    seed: int = _field(0, "seed of every random number generator in the run")
    log_every: int = _field(1_000, "env steps between TensorBoard summaries")
    checkpoint_every: int = _field(10_000, "env steps between checkpoints; 0 saves only at the end")
    eval_every: int = _field(0, "env steps between periodic evaluations; 0 turns them off")
    target_return: float = _field(math.inf, "end the run at the first periodic evaluation whose mean return "
                                            "reaches this, then evaluate and export as at the end; inf: never")
    eval_episodes: int = _field(5, "episodes per periodic evaluation")
    final_eval_episodes: int = _field(10, "episodes of the evaluation at the end of the run")
    num_envs: int = _field(1, "envs stepped together (one act call for all); env steps count across all envs")
    async_learner: bool = _field(False, "run the learner in its own thread while the envs step, holding "
                                        "updates at 1 / training_interval of env steps; not bit-reproducible")


@dataclasses.dataclass(frozen=True)
class ActorsConfig:
    kind: str = _field("inline", "where the envs step: inline (this process, run.num_envs envs), process "
                                 "(actor processes) or ray (Ray actors, on this machine or a cluster)")
    count: int = _field(2, "process/ray: actors, each with its own envs and a CPU copy of the network")
    envs_per_actor: int = _field(1, "process/ray: envs each actor steps together (one act call for all)")
    weight_sync_period: int = _field(100, "process/ray: gradient updates between sending the weights to the actors")
    chunk_steps: int = _field(128, "process/ray: vector steps an actor takes per batch of transitions it sends "
                                        "(fewer, larger messages: Ray adds a few ms per call on a loaded machine)")
    exploration: str = _field("schedule", "process/ray: schedule (the run's epsilon schedule) or apex (actor i "
                                          "of N keeps epsilon 0.4^(1 + 7 i / (N - 1)), Horgan et al. 2018)")
    ray_address: str = _field("", "ray: address of a running Ray cluster (auto: the one this machine joined); "
                                  "empty: start Ray on this machine")
    cpus_per_actor: float = _field(1.0, "ray: CPUs the Ray scheduler reserves per actor (spreads actors over a cluster)")


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    wandb: bool = _field(False, "send the config and every TensorBoard scalar to a Weights & Biases run (pip install "
                                "\"tfdqn[wandb]\"; WANDB_MODE=offline keeps it on disk); a resumed run goes on in it")
    wandb_project: str = _field("tfdqn", "the Weights & Biases project of the run")


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


def field_docs() -> dict[str, str]:
    """Every dotted key with its doc, in declaration order, for `--help` and error messages."""
    docs = {}
    for section in dataclasses.fields(DQNConfig):
        for f in dataclasses.fields(_section_type(section.name)):
            docs[f"{section.name}.{f.name}"] = f.metadata["doc"]
    return docs


def _section_type(name: str) -> type:
    return typing.get_type_hints(DQNConfig)[name]


def field_type(key: str) -> type:
    """The type of a dotted config key's value (bool, int, float, str or tuple)."""
    return _field_type(*key.split("."))


def _field_type(section: str, name: str):
    return typing.get_type_hints(_section_type(section))[name]


# What each field type accepts, with examples, for the one-line error of a config key or a numeric flag.
_KINDS = {bool: ("true or false", ""), int: ("an integer", " such as 50000, 5e4 or 50_000"),
          float: ("a number", " such as 0.001 or 1e-3"), str: ("a string", ""),
          tuple: ("a list of integers", " such as [256, 256]"),
          EnvKwargs: ("a mapping of names to YAML scalars or lists", " such as {continuous: false}")}


def not_a(expected: type, value) -> str:
    """`'ten' is not an integer; allowed: an integer such as ...`: the error of a value `convert` refused."""
    kind, examples = _KINDS[expected]
    return f"{value!r} is not {kind}; allowed: {kind}{examples}"


def convert(value, expected):
    """`value` (from YAML, `--set` or a flag) as the type `expected`, or None where it is not one of
    those: `1e5` and `50_000` are integers, as a YAML file or `--set` would give them."""
    if expected is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                number = float(value.replace("_", ""))
            except ValueError:
                number = None
            if number is not None and number.is_integer():
                return int(number)
    elif expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif expected is str:
        if isinstance(value, str):
            return value
    elif expected is EnvKwargs:
        if isinstance(value, dict) and all(isinstance(k, str) and k and _plain(v) for k, v in value.items()):
            return EnvKwargs.of(value)
    elif expected is tuple:
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
        if isinstance(value, str):
            try:
                return tuple(int(v) for v in value.strip("[]() ").split(",") if v.strip())
            except ValueError:
                pass
    return None


def _plain(value) -> bool:
    """A value env.kwargs may hold: a YAML scalar, or a list (or tuple) of them."""
    scalar = (type(None), bool, int, float, str)
    return isinstance(value, scalar) or (isinstance(value, (list, tuple)) and all(isinstance(v, scalar) for v in value))


def _coerce(key: str, value, expected):
    """Convert a YAML or `--set` value to the field's type, or name the value and what is allowed."""
    converted = convert(value, expected)
    if converted is None:
        raise UserError(f"config key {key} = {not_a(expected, value)}")
    return converted


def _unknown_key(key: str) -> UserError:
    """The closest key, else the keys of the section named (not all ~80 on one line), else the sections."""
    keys = list(field_docs())
    close = difflib.get_close_matches(key, keys, n=1)
    section = key.partition(".")[0]
    in_section = [k for k in keys if k.startswith(f"{section}.")]
    if close:
        hint = f"; did you mean {close[0]}?"
    elif in_section:
        hint = f"; allowed keys in {section}: {', '.join(k.partition('.')[2] for k in in_section)}"
    else:
        sections = ", ".join(dict.fromkeys(k.partition(".")[0] for k in keys))
        hint = f"; allowed: section.key with a section of {sections} (tfdqn train --help lists every key)"
    return UserError(f"unknown config key {key!r}{hint}")


# Keys renamed since a release: a saved run's config.yaml or an old command line still reads.
RENAMED = {"run.update_every": "run.env_steps_per_round"}


ENV_KWARG = "env.kwargs."  # --set env.kwargs.NAME=VALUE sets one keyword argument


def _apply(values: dict[str, dict], key: str, raw) -> None:
    if key.startswith(ENV_KWARG) and len(key) > len(ENV_KWARG):
        if not _plain(raw):
            raise UserError(f"config key {key} = {raw!r} is not a YAML scalar or a list of them; allowed: a value "
                            f"such as false, 0.5, red or [1, 2]")
        values["env"]["kwargs"] = EnvKwargs.of({**values["env"]["kwargs"].as_dict(), key[len(ENV_KWARG):]: raw})
        return
    section, _, name = RENAMED.get(key, key).partition(".")
    if section not in values or name not in values[section]:
        raise _unknown_key(key)
    values[section][name] = _coerce(key, raw, _field_type(section, name))


def _flatten(path: pathlib.Path, data: dict) -> dict:
    """YAML sections to dotted keys; a section that is not a mapping is reported with its file."""
    flat = {}
    for section, fields in data.items():
        if section == "extends":
            continue
        if not isinstance(fields, dict):
            raise UserError(f"config file {path}: section {section!r} is {fields!r}, expected a mapping of keys")
        flat.update({f"{section}.{key}": value for key, value in fields.items()})
    return flat


def _extended_file(path: pathlib.Path, name) -> pathlib.Path:
    if not isinstance(name, str) or not name:
        raise UserError(f"config file {path}: extends = {name!r}; allowed: a YAML file name such as base.yaml")
    beside = path.parent / name
    packaged = CONFIG_DIR / name
    return beside if beside.exists() or not packaged.exists() else packaged


def _load(path: pathlib.Path) -> dict:
    """A config file's YAML mapping, or a one-line error naming the file."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"config file {path} cannot be read: {e.__class__.__name__}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError(f"config file {path} is not valid YAML{where}") from None
    data = data or {}
    if not isinstance(data, dict):
        raise UserError(f"config file {path} holds {type(data).__name__}, expected a mapping of sections")
    return data


def read_yaml(path: pathlib.Path, _seen: tuple = ()) -> dict:
    """A config file's dotted keys, after those of the file it `extends`: a file of that name beside
    it, or else the packaged one (so a copied config still finds `base.yaml`)."""
    path = pathlib.Path(path)
    if path in _seen:
        raise UserError(f"config file {path} extends itself")
    data = _load(path)
    flat = {}
    if "extends" in data:
        flat.update(read_yaml(_extended_file(path, data["extends"]), _seen + (path,)))
    flat.update(_flatten(path, data))
    return flat


def build_config(files: list, overrides: dict, sources: dict | None = None) -> DQNConfig:
    """Defaults, then each file in order, then the overrides; validated once. `sources`, where given,
    is filled with the origin of every key set (for `--print-config`)."""
    layers = [{key: (raw, f"file {pathlib.Path(path).name}") for key, raw in read_yaml(path).items()} for path in files]
    return _build([*layers, {key: (raw, "--set or a flag") for key, raw in overrides.items()}], sources)


def _build(layers: list[dict], sources: dict | None = None, check: bool = True) -> DQNConfig:
    """Defaults, then each layer (key -> (raw value, origin)) in order; validated once (unless not `check`)."""
    values = {s.name: {f.name: getattr(getattr(DQNConfig(), s.name), f.name)
                       for f in dataclasses.fields(_section_type(s.name))}
              for s in dataclasses.fields(DQNConfig)}
    for layer in layers:
        for key, (raw, origin) in layer.items():
            _apply(values, key, raw)
            if sources is not None:
                sources["env.kwargs" if key.startswith(ENV_KWARG) else RENAMED.get(key, key)] = origin
    config = DQNConfig(**{name: _section_type(name)(**fields) for name, fields in values.items()})
    if check:
        validate(config)
    return config


def parse_value(raw: str):
    """A command-line value read as a YAML scalar (1e-4, true, [64, 64]), as `--set` and every flag read it."""
    try:
        return yaml.safe_load(raw) if raw.strip() else raw
    except yaml.YAMLError:
        return raw


def parse_set(items: list[str]) -> dict:
    """`--set a.b=c` items to a dict of `parse_value` values."""
    overrides = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set {item!r} is not of the form key=value")
        overrides[key.strip()] = parse_value(raw)
    return overrides


def _check(ok: bool, key: str, value, allowed: str) -> None:
    if not ok:
        raise UserError(f"config key {key} = {value!r} is out of range; allowed: {allowed}")


def validate(c: DQNConfig) -> None:
    """Every range rule in one place; the first broken one becomes a one-line UserError."""
    positive = [("run.total_steps", c.run.total_steps), ("run.env_steps_per_round", c.run.env_steps_per_round),
                ("replay.capacity", c.replay.capacity), ("replay.batch_size", c.replay.batch_size),
                ("learner.target_update_period", c.learner.target_update_period),
                ("run.log_every", c.run.log_every), ("env.frame_stack", c.env.frame_stack),
                ("env.frame_skip", c.env.frame_skip), ("env.screen_size", c.env.screen_size),
                ("env.max_episode_frames", c.env.max_episode_frames),
                ("run.final_eval_episodes", c.run.final_eval_episodes),
                ("run.eval_episodes", c.run.eval_episodes), ("run.num_envs", c.run.num_envs),
                *((f"learner.{key}", getattr(c.learner, key)) for key in QUANTILE_COUNTS)]
    for key, value in positive:
        _check(value >= 1, key, value, "an integer >= 1")
    non_negative = [("run.learning_starts", c.run.learning_starts), ("run.seed", c.run.seed),
                    ("run.checkpoint_every", c.run.checkpoint_every), ("run.eval_every", c.run.eval_every),
                    ("exploration.epsilon_decay_steps", c.exploration.epsilon_decay_steps),
                    ("exploration.epsilon_delay_steps", c.exploration.epsilon_delay_steps),
                    ("learner.target_update_phase", c.learner.target_update_phase),
                    ("learner.learning_rate_decay_updates", c.learner.learning_rate_decay_updates),
                    ("env.noop_max", c.env.noop_max), ("learner.augment_pad", c.learner.augment_pad)]
    for key, value in non_negative:
        _check(value >= 0, key, value, "an integer >= 0")
    for key in ("epsilon_start", "epsilon_end", "eval_epsilon"):
        value = getattr(c.exploration, key)
        _check(0.0 <= value <= 1.0, f"exploration.{key}", value, "a probability in [0, 1]")
    _check(0.0 <= c.env.repeat_action_probability <= 1.0, "env.repeat_action_probability",
           c.env.repeat_action_probability, "a probability in [0, 1]")
    _check(0.0 <= c.learner.gamma <= 1.0, "learner.gamma", c.learner.gamma, "a discount in [0, 1]")
    _check(c.learner.learning_rate > 0, "learner.learning_rate", c.learner.learning_rate, "a number > 0")
    _check(c.learner.learning_rate_end >= 0, "learner.learning_rate_end", c.learner.learning_rate_end,
           "a number >= 0")
    _check(c.learner.adam_epsilon > 0, "learner.adam_epsilon", c.learner.adam_epsilon, "a number > 0")
    _check(c.learner.huber_delta > 0, "learner.huber_delta", c.learner.huber_delta, "a number > 0")
    _check(c.learner.max_grad_norm >= 0, "learner.max_grad_norm", c.learner.max_grad_norm, "a number >= 0")
    _check(c.learner.optimizer in ("adam", "rmsprop"), "learner.optimizer", c.learner.optimizer, "adam, rmsprop")
    _check(c.replay.device in ("host", "accelerator"), "replay.device", c.replay.device, "host, accelerator")
    _check(c.replay.compression in CODECS, "replay.compression", c.replay.compression, ", ".join(CODECS))
    _check(c.replay.memory_budget_gib >= 0, "replay.memory_budget_gib", c.replay.memory_budget_gib, "a number >= 0")
    _check(c.compute.act_device in ("auto", "cpu"), "compute.act_device", c.compute.act_device, "auto, cpu")
    _check(c.network.kind in ("auto", "mlp", "nature_cnn", "small_cnn", "impala"), "network.kind", c.network.kind,
           "auto, mlp, nature_cnn, small_cnn, impala")
    _check(c.network.conv_padding in ("valid", "same"), "network.conv_padding", c.network.conv_padding, "valid, same")
    _check(len(c.network.hidden_sizes) >= 1 and min(c.network.hidden_sizes) >= 1, "network.hidden_sizes",
           list(c.network.hidden_sizes), "one or more integers >= 1")
    _check(c.learner.n_step >= 1, "learner.n_step", c.learner.n_step, "an integer >= 1")
    _check(not math.isnan(c.run.target_return), "run.target_return", c.run.target_return, "a number, or inf")
    _check(interval_fraction(c.run.training_interval) is not None, "run.training_interval", c.run.training_interval,
           "a number > 0 that is a fraction with a denominator of at most 1000 (4, 1, 0.5, 0.25)")
    _validate_tracking(c.tracking)
    _validate_family(c)
    _validate_actors(c.actors, c.env)
    _validate_combinations(c)
    _validate_replay_size(c)


def _validate_tracking(t: TrackingConfig) -> None:
    if t.wandb and importlib.util.find_spec("wandb") is None:
        raise UserError('tracking.wandb = true (--track) needs the wandb package, which is not installed; allowed: '
                        'pip install "tfdqn[wandb]", or tracking.wandb = false')
    _check(bool(t.wandb_project.strip()), "tracking.wandb_project", t.wandb_project, "a project name")


def _validate_combinations(c: DQNConfig) -> None:
    """Settings that are each valid but not together."""
    if c.compute.deterministic and c.run.async_learner:  # the learner thread's timing picks the batches
        raise UserError("config key compute.deterministic = True with run.async_learner = True cannot repeat a run; "
                        "allowed: one of the two")
    if c.compute.deterministic and c.actors.kind != "inline":  # chunks arrive in timing order
        raise UserError(f"config key compute.deterministic = True with actors.kind = {c.actors.kind!r} cannot repeat "
                        f"a run; allowed: one of the two (actors.kind = 'inline' repeats)")
    if not math.isinf(c.run.target_return) and c.run.eval_every == 0:
        raise UserError(f"config key run.target_return = {c.run.target_return} needs periodic evaluations, but "
                        f"run.eval_every = 0; allowed: run.eval_every >= 1, or run.target_return = inf")
    if c.replay.memory_budget_gib > 0 and c.replay.compression == "none":  # raw frames take all of it up front
        raise UserError(f"config key replay.memory_budget_gib = {c.replay.memory_budget_gib} needs compressed frames, "
                        "but replay.compression = 'none'; allowed: replay.compression = zstd or lz4, or a budget of 0")
    if c.replay.prefetch and c.replay.device == "accelerator":
        raise UserError("config key replay.prefetch = True with replay.device = 'accelerator': that replay's "
                        "batches are drawn inside the update graph; allowed: one of the two")
    if c.replay.compression != "none" and c.replay.device == "accelerator":
        raise UserError(f"config key replay.compression = {c.replay.compression!r} with replay.device = 'accelerator': "
                        "that replay keeps its frames in a tf.Variable as they are; allowed: one of the two")
    if c.compute.act_device == "cpu" and c.run.async_learner:  # the copy would read weights mid-update
        raise UserError("config key compute.act_device = 'cpu' with run.async_learner = True would copy weights "
                        "while an update writes them; allowed: one of the two (act_device = 'auto' acts on the "
                        "learner's weights)")


def _validate_family(c: DQNConfig) -> None:
    """The DQN-family keys: samplers, heads, losses, augmentation."""
    r, n, l = c.replay, c.network, c.learner
    _check(r.sampler in ("uniform", "prioritized"), "replay.sampler", r.sampler, "uniform, prioritized")
    _check(r.priority_exponent >= 0, "replay.priority_exponent", r.priority_exponent, "a number >= 0")
    for key in ("importance_exponent", "importance_exponent_end"):
        _check(0.0 <= getattr(r, key) <= 1.0, f"replay.{key}", getattr(r, key), "a number in [0, 1]")
    _check(r.priority_epsilon > 0, "replay.priority_epsilon", r.priority_epsilon, "a number > 0")
    _check(n.noisy_sigma0 > 0, "network.noisy_sigma0", n.noisy_sigma0, "a number > 0")
    _check(n.noise_refresh in ("call", "update"), "network.noise_refresh", n.noise_refresh, "call, update")
    if n.noise_refresh == "update":
        _check_held_noise(c)
    _check(l.loss in LOSSES, "learner.loss", l.loss, ", ".join(LOSSES))
    _check(l.num_atoms >= 2, "learner.num_atoms", l.num_atoms, "an integer >= 2")
    _check(l.v_max > l.v_min, "learner.v_max", l.v_max, f"a number > learner.v_min = {l.v_min}")
    _check(l.augment_intensity >= 0, "learner.augment_intensity", l.augment_intensity, "a number >= 0")
    _check(l.munchausen_tau > 0, "learner.munchausen_tau", l.munchausen_tau, "a number > 0")
    _check(l.munchausen_alpha >= 0, "learner.munchausen_alpha", l.munchausen_alpha, "a number >= 0")
    _check(l.munchausen_clip < 0, "learner.munchausen_clip", l.munchausen_clip, "a number < 0")
    if l.munchausen and l.loss not in MUNCHAUSEN_LOSSES:
        raise UserError(f"config key learner.munchausen = True with learner.loss = {l.loss!r}: Munchausen's soft "
                        f"target is built here for the Huber loss (M-DQN) and IQN's (M-IQN); allowed: learner.loss = "
                        f"{' or '.join(MUNCHAUSEN_LOSSES)}, or learner.munchausen = False")


def _check_held_noise(c: DQNConfig) -> None:
    """`network.noise_refresh: update` holds the noise of the network the learner updates: the trainer must act
    with that network itself, not with a copy (an acting copy, actor processes or Ray actors)."""
    if not held_noise_allowed(c):
        copy = ("network.noisy = False" if not c.network.noisy else
                f"actors.kind = {c.actors.kind!r}" if c.actors.kind != "inline" else "compute.act_device = 'cpu'")
        raise UserError(f"config key network.noise_refresh = 'update' with {copy}: held noise belongs to the noisy "
                        "network that the learner updates and the trainer acts with; allowed: network.noise_refresh = "
                        "'call', or network.noisy = True with actors.kind = 'inline' and compute.act_device = 'auto'")


LOSSES = ("huber", "categorical", "quantile", "implicit_quantile")
MUNCHAUSEN_LOSSES = ("huber", "implicit_quantile")
QUANTILE_COUNTS = ("num_quantiles", "num_tau_samples", "num_tau_prime_samples", "num_quantile_samples",
              "quantile_embedding_dim")


def interval_fraction(training_interval: float) -> fractions.Fraction | None:
    """`training_interval` as an exact fraction of small integers (0.25 -> 1/4), so that updates owed are
    counted in integers whatever the interval; None where it is <= 0 or no such fraction is close."""
    if not training_interval > 0 or not math.isfinite(training_interval):
        return None
    fraction = fractions.Fraction(training_interval).limit_denominator(1000)
    return fraction if fraction > 0 and abs(float(fraction) - training_interval) <= 1e-9 * training_interval else None


def _validate_replay_size(c: DQNConfig) -> None:
    """The replay must give every env room for its stacks and look-ahead, and a batch beyond that."""
    # Streams stepping together share the ring about equally, so each must find in capacity // streams
    # slots a whole stack, its n next frames and the newest (not yet sampleable) slot.
    per_env, streams = c.env.frame_stack + c.learner.n_step + 1, c.num_streams
    envs = "run.num_envs" if c.actors.kind == "inline" else "actors.count * actors.envs_per_actor"
    if c.replay.capacity // streams < per_env:
        raise UserError(f"config key replay.capacity = {c.replay.capacity} gives each of {envs} = "
                        f"{streams} envs {c.replay.capacity // streams} slots; allowed: capacity >= "
                        f"envs * (frame_stack + n_step + 1) = {streams * per_env}")
    # The ring also holds each episode's final frame and refuses its n_step newest slots and the oldest
    # stack's history, so a batch needs some slack beyond batch_size.
    least = c.replay.batch_size + streams * (c.env.frame_stack + c.learner.n_step)
    if c.replay.capacity < least:
        raise UserError(f"config key replay.batch_size = {c.replay.batch_size} does not fit in "
                        f"replay.capacity = {c.replay.capacity}; allowed: capacity >= batch_size + "
                        f"envs * (frame_stack + n_step) = {least}")


def _validate_actors(a: ActorsConfig, env: EnvConfig) -> None:
    _check(a.kind in ("inline", "process", "ray"), "actors.kind", a.kind, "inline, process, ray")
    if a.kind == "ray":  # checked before the run folder is made, not at the first actor
        require("ray", "actors.kind = ray", instead="actors.kind = process")
    for key in ("count", "envs_per_actor", "weight_sync_period", "chunk_steps"):
        _check(getattr(a, key) >= 1, f"actors.{key}", getattr(a, key), "an integer >= 1")
    _check(a.exploration in ("schedule", "apex"), "actors.exploration", a.exploration, "schedule, apex")
    _check(a.cpus_per_actor > 0, "actors.cpus_per_actor", a.cpus_per_actor, "a number > 0")
    _check(env.step_delay_ms >= 0, "env.step_delay_ms", env.step_delay_ms, "a number >= 0")
    where, _, key = env.action_mask.partition(":")
    _check(env.action_mask in ("auto", "none") or (where in ("info", "observation") and bool(key)), "env.action_mask",
           env.action_mask, "auto, none, info:KEY or observation:KEY")


def default_config_file(env_name: str) -> pathlib.Path:
    """An env's own tuned file where one ships (lunarlander.yaml for LunarLander-v3), else atari.yaml
    for ALE games and the classic-control file (cartpole.yaml) for every other env."""
    from tfdqn.envs.make import is_atari_id, resolve_env_id  # envs import this module's dataclasses

    env_id = resolve_env_id(env_name)
    own = CONFIG_DIR / f"{env_id.split('/')[-1].rsplit('-v', 1)[0].lower()}.yaml"
    if own.name not in ("base.yaml", "atari.yaml") and own.exists():
        return own
    return CONFIG_DIR / ("atari.yaml" if is_atari_id(env_id) else "cartpole.yaml")


# Where a value can come from, in the order the layers apply; `--print-config` shows each key's.
DEFAULT, SET = "default", "--set or a flag"
NOISY_RULE = ("rule: noisy nets explore by their noise, so epsilon is 0 unless --set or a --config file sets it "
              "(Fortunato et al. 2018; Dopamine's full Rainbow agent acts so)")
HELD_NOISE_RULE = ("rule: noisy nets that the trainer acts with itself (actors.kind inline, compute.act_device auto) "
                   "hold their acting noise between updates unless --set, a --config file or the preset sets "
                   "network.noise_refresh (Fortunato et al. 2018 section 3.1; an act call then costs about 1.45 "
                   "plain ones instead of 1.8: docs/performance.md)")
COMPRESSION_RULE = ("rule: Atari frames are compressed with lz4 in the host replay unless --set or a --config file "
                    "sets replay.compression (about 14 times less memory, the same run bit for bit: docs/replay.md)")
IMAGE_XLA_RULE = ("rule: a convolutional network's update runs without XLA unless --set or a --config file sets "
                  "compute.update_jit_compile (the generic config's XLA is for its MLP; on a CPU the trainer's XLA "
                  "update of the Nature CNN took 23 to 26 times as long: docs/bench-networks-xla.md)")
IMAGE_RULE = ("rule: an env that observes uint8 images gets network.kind auto, a CNN their size fits, unless --set "
              "or a --config file sets network.kind (the generic config's mlp is for vector observations)")


def resolve_config(files: list, overrides: dict, preset: str | None = None, sources: dict | None = None) -> DQNConfig:
    """The config a command line runs, resolved once. Layers, each value keeping its origin: the defaults, the
    config files (`files`; none: the packaged one for the env), the preset's settings for the env's kind
    (`tfdqn.presets`: its recipe, or an adaptation saying why), then `overrides` (--set and the flags). Then the
    conditional defaults, in `derived_settings`, from what the layers resolved and who set it, never from which
    layers happen to name a key. `sources` (optional) receives each key's origin."""
    from tfdqn.envs.names import is_atari_name  # envs import this module's dataclasses
    from tfdqn.presets import preset_settings

    given = [pathlib.Path(f) for f in files]
    paths = given or [default_config_file(str(overrides.get("env.id") or DQNConfig().env.id))]
    files_layers = [{key: (raw, f"file {path.name}") for key, raw in read_yaml(path).items()} for path in paths]
    set_layer = {key: (raw, SET) for key, raw in overrides.items()}
    env_id = _build([*files_layers, set_layer], check=False).env.id  # a rule across keys may need the preset's
    preset_layer = preset_settings(preset, is_atari_name(env_id)) if preset else {}
    layers = [*files_layers, preset_layer, set_layer]
    # The user's own keys: --set, the flags and the files given (their own keys, not those they extend).
    user = set(overrides).union(*(_flatten(path, _load(path)) for path in given))
    layers.append(derived_settings(_build(layers), env_id, user, set(preset_layer)))
    return _build(layers, sources)


def derived_settings(layered: DQNConfig, env_id: str, user: set, preset: set) -> dict:
    """The conditional defaults, in one place: key -> (value, the rule that sets it).
    - What the env id implies (`tfdqn.envs.names.implied_settings`: ALE v5's sticky actions and frame skip),
      for every key that neither the user nor the preset sets.
    - Noisy nets => epsilon 0 (`NOISY_RULE`), unless the user sets an epsilon key. A preset never sets both
      (tests/test_preset_sources.py): its epsilon would be dead, as DER.gin's is in Dopamine.
    - Noisy nets that the trainer acts with itself => acting noise held between updates (`HELD_NOISE_RULE`),
      unless the user or the preset sets network.noise_refresh (der cites Dopamine's per-call noise).
    - Atari frames in a host replay => lz4 (`COMPRESSION_RULE`), unless the user sets replay.compression: the
      codec that decodes fastest (docs/bench-replay.md), so the loop barely waits on it.
    - uint8 image observations of any other env => network.kind auto (`IMAGE_RULE`), unless the user or the
      preset sets it: the generic config (cartpole.yaml) names the MLP for vector observations; and a CNN
      there => the update without XLA (`IMAGE_XLA_RULE`), unless the user or the preset sets it: the generic
      config's XLA update suits its MLP and is tens of times slower for a CNN on a CPU."""
    from tfdqn.envs.names import implied_settings, is_atari_name, observes_images, resolve_env_id

    derived = {key: (value, f"implied by env {env_id}") for key, value in implied_settings(env_id).items()
               if key not in user | preset}
    epsilon = ("exploration.epsilon_start", "exploration.epsilon_end")
    if layered.network.noisy and not user & set(epsilon):
        derived.update({key: (0.0, NOISY_RULE) for key in epsilon})
    if held_noise_allowed(layered) and "network.noise_refresh" not in user | preset:
        derived["network.noise_refresh"] = ("update", HELD_NOISE_RULE)
    if is_atari_name(env_id) and layered.replay.device == "host" and "replay.compression" not in user:
        derived["replay.compression"] = ("lz4", COMPRESSION_RULE)
    if not is_atari_name(env_id) and observes_images(resolve_env_id(env_id), layered.env.kwargs.as_dict()):
        derived.update(_image_settings(layered, user | preset))
    return derived


def held_noise_allowed(c: DQNConfig) -> bool:
    """Whether `network.noise_refresh: update` is allowed (`_check_held_noise`): then it is also the default."""
    return c.network.noisy and c.actors.kind == "inline" and c.compute.act_device != "cpu"


def _image_settings(layered: DQNConfig, chosen: set) -> dict:
    """`IMAGE_RULE` and `IMAGE_XLA_RULE` for an env of uint8 images, each where the key is not in `chosen`
    (the keys the user or the preset sets)."""
    derived = {}
    if layered.network.kind == "mlp" and "network.kind" not in chosen:
        derived["network.kind"] = ("auto", IMAGE_RULE)
    convolutional = derived.get("network.kind", (layered.network.kind,))[0] != "mlp"
    if convolutional and layered.compute.update_jit_compile and "compute.update_jit_compile" not in chosen:
        derived["compute.update_jit_compile"] = (False, IMAGE_XLA_RULE)
    return derived


def to_dict(config: DQNConfig) -> dict:
    """Nested plain data (tuples as lists) for config.yaml and the TensorBoard hyperparameter table."""
    data = dataclasses.asdict(config)
    for section in data.values():
        for k, v in section.items():
            if isinstance(v, EnvKwargs):
                section[k] = v.as_dict()
            elif isinstance(v, tuple):
                section[k] = list(v)
    return data


def to_yaml(config: DQNConfig) -> str:
    """The config as YAML, sections and keys in declaration order (config.yaml)."""
    return yaml.safe_dump(to_dict(config), sort_keys=False)


def annotated_yaml(config: DQNConfig, sources: dict) -> str:
    """The config as YAML with each key's doc and where its value came from (`--print-config`)."""
    docs, lines = field_docs(), []
    for section, fields in to_dict(config).items():
        lines.append(f"{section}:")
        for name, value in fields.items():
            key = f"{section}.{name}"
            text = yaml.safe_dump({name: value}, default_flow_style=True, width=1_000).strip()[1:-1]
            lines.append(f"  {text}  # {docs[key]} [{sources.get(key, 'default')}]")
    return "\n".join(lines) + "\n"


def save(config: DQNConfig, path: pathlib.Path) -> None:
    """Write the resolved config so that `--config path` reproduces the run."""
    atomic_write(path, to_yaml(config))
