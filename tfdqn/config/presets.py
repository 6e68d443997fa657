"""`--preset NAME`: recipes of the DQN family as config settings, each naming its source: the published
ones, and tfdqn's own `atari_cpu` (Pong) and `iqn_impala_cpu` (Breakout), chosen by measured sweeps for time to a
score on a 2-core CPU.

A preset sets the components of its recipe for every env (heads, losses, sampler, n-step), and its
published hyperparameters where they apply: on Atari, where they were tuned. For vector observations
(CartPole, LunarLander, ...) the env's own config keeps its tuned step sizes and schedules, and what
cannot apply is adapted, each adaptation saying why: no frames to shift, no reward clipping (so a
categorical support wide enough for unclipped returns). `--print-config` shows every value's origin: for a
published preset the file and line (or the paper's table) each value comes from, then the differences from the
reference run that remain (`Preset.differences`, which docs/reference/presets.md lists too).
tests/test_preset_sources.py holds every key of a published preset's resolved config to its source or to that list.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from tfdqn.errors import UserError


class Cited(NamedTuple):
    """A preset's value with where it comes from: a file and line of the reference code, or a paper's table."""

    value: object
    where: str


class Difference(NamedTuple):
    """Where a preset still differs from its reference run on purpose: what, the two sides, and the effect."""

    what: str
    reference: str
    tfdqn: str
    effect: str

    def line(self) -> str:
        return f"{self.what}: {self.reference} there, {self.tfdqn} here ({self.effect})"


@dataclasses.dataclass(frozen=True)
class Preset:
    source: str           # the paper (and the reference configuration) the settings come from
    components: dict      # key -> value (or Cited), for every env
    atari: dict           # key -> value (or Cited), the published hyperparameters, on Atari only
    vector: dict          # key -> (value, why), what vector observations need instead
    differences: tuple = ()  # Difference, on Atari: where tfdqn still differs from the reference run

    def settings(self, atari: bool, name: str) -> dict:
        """key -> (value, origin) of preset `name` for an env of that kind."""
        def origin(value, what: str) -> tuple:
            if isinstance(value, Cited):
                return value.value, f"preset {name}: {value.where}"
            return value, f"preset {what}: {self.source}"

        settings = {key: origin(value, "recipe") for key, value in self.components.items()}
        if atari:
            settings.update({key: origin(value, "Atari") for key, value in self.atari.items()})
        else:
            settings.update({key: (value, f"preset adapted: {why}") for key, (value, why) in self.vector.items()})
        return settings

    def differences_text(self, name: str) -> str:
        """The differences from the reference run as YAML comments, for `--print-config` (docs/reference/presets.md
        lists the same lines)."""
        if not self.differences:
            return ""
        lines = [f"# differences of --preset {name} from the reference run ({self.source}):"]
        return "\n".join([*lines, *(f"#  - {d.line()}" for d in self.differences)]) + "\n"


# Vector observations: rewards are not clipped there, so the support spans +-100 (an undiscounted reward of
# 1 per step gives returns up to 1 / (1 - 0.99) = 100); there are no frames to shift.
_VECTOR_SUPPORT = {"learner.v_min": (-100.0, "unclipped returns (up to 1 / (1 - gamma) = 100 at reward 1)"),
                   "learner.v_max": (100.0, "unclipped returns (up to 1 / (1 - gamma) = 100 at reward 1)")}
_NO_SHIFT = {"learner.augment_pad": (0, "vector observations have no frames to shift"),
             "learner.augment_intensity": (0.0, "vector observations have no pixel intensities")}

# Dopamine's labs/atari_100k (google/dopamine at 5873f54), which DER.gin and DrQ_eps.gin configure. Paths are
# under dopamine/; "GIN:N" is a line of the preset's own gin file, whose line numbers differ between the two.
DOPAMINE = "google/dopamine 5873f54"
_NETWORK = "jax/networks.py:574-585 FullRainbowNetwork"


def _atari_100k(gin: str, line: dict) -> dict:
    """Atari 100k's protocol and the learner both gin files share, each value cited (`line`: binding -> its
    line in `gin`)."""
    def at(binding: str, value) -> Cited:
        return Cited(value, f"{gin}:{line[binding]} {binding} = {value}")

    return {
        # the environment: AtariPreprocessing over the raw ALE game (discrete_domains/atari_lib.py)
        "env.repeat_action_probability": Cited(0.0, f"{gin}:{line['sticky_actions']} "
                                                    f"create_atari_environment.sticky_actions = False"),
        "env.terminal_on_life_loss": at("AtariPreprocessing.terminal_on_life_loss", True),
        "env.fire_on_reset": Cited(False, "discrete_domains/atari_lib.py:139-160: FireReset only under PPO "
                                          "preprocessing, so the agent must press FIRE itself"),
        "env.noop_max": Cited(116, "labs/atari_100k/atari_100k_runner.py:60, 204-212 max_noops=30: 0 to 29 NOOP "
                                   "agent steps of 4 frames before each game, in training and evaluation"),
        "env.frame_skip": Cited(4, "discrete_domains/atari_lib.py:183 AtariPreprocessing frame_skip=4, max over "
                                   "the last two frames"),
        "env.screen_size": Cited(84, "discrete_domains/atari_lib.py:185 AtariPreprocessing screen_size=84"),
        "env.frame_stack": Cited(4, "jax/agents/dqn/dqn_agent.py:264 stack_size=NATURE_DQN_STACK_SIZE (4)"),
        "env.max_episode_frames": Cited(100_000, "discrete_domains/atari_lib.py:134 max_num_frames_per_episode="
                                                 "100_000, which binds before Runner.max_steps_per_episode = "
                                                 "27,000 agent steps (108,000 frames)"),
        # training and evaluation
        "run.total_steps": Cited(100_000, f"{gin}:{line['Runner.num_iterations']}-"
                                          f"{line['Runner.training_steps']} 10 iterations x 10,000 agent steps"),
        "run.learning_starts": at("JaxDQNAgent.min_replay_history", 1_600),
        "run.training_interval": at("JaxDQNAgent.update_period", 1),
        "run.env_steps_per_round": Cited(1, "jax/agents/dqn/dqn_agent.py:564-565 one update after each agent step"),
        "run.num_envs": Cited(1, "labs/atari_100k/atari_100k_runner.py: one environment while training"),
        "run.final_eval_episodes": at("MaxEpisodeEvalRunner.num_eval_episodes", 100),
        "run.eval_every": Cited(0, "labs/atari_100k: the score is the evaluation after training, so no "
                                   "periodic evaluation picks a network"),
        "exploration.eval_epsilon": at("JaxDQNAgent.epsilon_eval", 0.001),
        "replay.batch_size": at("OutOfGraphPrioritizedReplayBuffer.batch_size", 32),
        "learner.gamma": at("JaxDQNAgent.gamma", 0.99),
        "learner.n_step": at("JaxDQNAgent.update_horizon", 10),
        "learner.optimizer": at("JaxDQNAgent.optimizer", "adam"),
        "learner.learning_rate": at("create_optimizer.learning_rate", 1e-4),
        "learner.adam_epsilon": at("create_optimizer.eps", 1.5e-4),
        "learner.learning_rate_decay_updates": Cited(0, "jax/agents/dqn/dqn_agent.py:80-93 create_optimizer: "
                                                        "a constant step size"),
        "learner.max_grad_norm": Cited(0.0, "jax/agents/dqn/dqn_agent.py:93 optax.adam, no gradient clipping"),
        "learner.clip_rewards": Cited(True, "labs/atari_100k/atari_100k_runner.py:334-336 rewards clipped to "
                                            "[-1, 1] for the agent"),
        "learner.double_dqn": at("JaxFullRainbowAgent.double_dqn", True),
        "network.dueling": at("JaxFullRainbowAgent.dueling", True),
        "network.kind": Cited("nature_cnn", f"{_NETWORK}: conv 32 8x8/4, 64 4x4/2, 64 3x3/1, dense 512"),
        "network.conv_padding": Cited("same", f"{_NETWORK}: nn.Conv with flax's default padding, SAME"),
        # Dopamine's 1,000,000 slots hold every transition of 100,000 agent steps; so do these, in a fifth of the
        # memory: each step takes at most two slots (its own and, at a lost life or a game end, the final frame's).
        "replay.capacity": Cited(200_000, "every transition of 100,000 agent steps, as Dopamine's 1,000,000 "
                                          "(the differences from the reference run)"),
    }


_DOPAMINE_LENGTH = Difference("training length", "200 iterations of 250,000 agent steps (50M)",
                              "atari.yaml's 10M agent steps (--total-steps sets it)", "a fifth of the paper's training")
_DOPAMINE_EVALUATION = Difference("evaluation", "125,000 agent steps at epsilon 0.001 after each iteration",
                                  "atari.yaml's: 10 games every 250,000 agent steps at epsilon 0.001",
                                  "the best network is picked as tfdqn picks it")
_CAPACITY = Difference("replay capacity", "1,000,000 transitions (\"a proxy for unbounded memory\")",
                       "200,000", "none: both hold every transition of the 100,000 steps, as each step takes at "
                                  "most two slots; 1.4 GB of frames instead of 7 GB")
_TRUNCATION = Difference("a game cut at 100,000 frames", "terminal (AtariPreprocessing returns terminated or "
                         "truncated as one flag)", "truncated: the target bootstraps",
                         "only games longer than 25,000 agent steps, which few 100k-step agents play")
_NOOPS = Difference("the no-op start", "0 to 29 NOOP agent steps (0 to 116 frames in steps of 4, max-pooled)",
                    "0 to 116 NOOP emulator frames (ale-py's vector env, which plays the evaluation, counts frames)",
                    "the same spread of starting states, not the same draws")
_REPLAY_AT_TERMINALS = Difference(
    "replay elements at a lost life or a game end", "the transition accumulator (jax/replay_memory/accumulator.py) "
    "stores the state 11 steps before the end four times as terminal, the next nine with one frame of four, and "
    "not the final step", "each step once, with its whole stack and its truncated n-step return",
    "not measured; the most samples in games whose lives are short (Breakout, Alien), few in Pong")
_LIFE_LOSS = Difference("the step that loses a life", "cut short at the frame the life goes, then the agent acts",
                        "all 4 frames, then one NOOP agent step for a fresh frame",
                        "not measured; 4 to 7 frames per life outside the agent's choice")
_ADAM = Difference("Adam's epsilon", "added to the square root of the bias-corrected second moment (optax)",
                   "added before the bias correction (Keras)", "a larger effective epsilon early on: 31x at the "
                   "first update, 1.26x at 1,000, the same from about 5,000 updates on")
_SAMPLING = Difference("prioritized draws", "independent", "stratified: one in each of 32 equal segments",
                       "less variance within a batch, the same distribution")
_SHIFTS = Difference("DrQ's random shift and intensity", "shifts -4 to +3 (the crop's offset is drawn in [0, 8)), "
                     "intensity on float pixels", "shifts -4 to +4, intensity on uint8 pixels (rounded, clipped)",
                     "negligible")
_NOISE_SEED = Difference("noisy-net noise", "drawn from a key seeded by the clock", "drawn from the run seed",
                         "none on scores; a run repeats")
# where each gin file sets the bindings `_atari_100k` cites
_DER_LINES = {"JaxDQNAgent.gamma": 10, "JaxDQNAgent.update_horizon": 12, "JaxDQNAgent.min_replay_history": 13,
              "JaxDQNAgent.update_period": 14, "JaxDQNAgent.target_update_period": 15,
              "JaxDQNAgent.epsilon_eval": 17, "JaxDQNAgent.optimizer": 19, "JaxFullRainbowAgent.noisy": 21,
              "JaxFullRainbowAgent.dueling": 22, "JaxFullRainbowAgent.double_dqn": 23,
              "JaxFullRainbowAgent.num_atoms": 24, "JaxFullRainbowAgent.vmax": 25,
              "JaxFullRainbowAgent.replay_scheme": 26, "Atari100kRainbowAgent.data_augmentation": 29,
              "create_optimizer.learning_rate": 32, "create_optimizer.eps": 33, "sticky_actions": 37,
              "AtariPreprocessing.terminal_on_life_loss": 38, "Runner.num_iterations": 39,
              "Runner.training_steps": 40, "MaxEpisodeEvalRunner.num_eval_episodes": 41,
              "OutOfGraphPrioritizedReplayBuffer.batch_size": 45}
_DRQ_LINES = {"JaxDQNAgent.gamma": 11, "JaxDQNAgent.update_horizon": 12, "JaxDQNAgent.min_replay_history": 13,
              "JaxDQNAgent.update_period": 14, "JaxDQNAgent.target_update_period": 15,
              "JaxDQNAgent.epsilon_train": 17, "JaxDQNAgent.epsilon_eval": 18,
              "JaxDQNAgent.epsilon_decay_period": 19, "JaxDQNAgent.optimizer": 20, "JaxFullRainbowAgent.noisy": 22,
              "JaxFullRainbowAgent.dueling": 23, "JaxFullRainbowAgent.double_dqn": 24,
              "JaxFullRainbowAgent.distributional": 25, "JaxFullRainbowAgent.replay_scheme": 28,
              "Atari100kRainbowAgent.data_augmentation": 30, "create_optimizer.learning_rate": 33,
              "create_optimizer.eps": 34, "sticky_actions": 38, "AtariPreprocessing.terminal_on_life_loss": 39,
              "Runner.num_iterations": 40, "Runner.training_steps": 41,
              "MaxEpisodeEvalRunner.num_eval_episodes": 42, "OutOfGraphPrioritizedReplayBuffer.batch_size": 46}
_RAINBOW_TABLE = "Hessel et al. 2018, Table 1"

def _gin(gin: str, line: dict, binding: str, value, shown=None) -> Cited:
    return Cited(value, f"{gin}:{line[binding]} {binding} = {value if shown is None else shown}")


# Munchausen's reference code (google-research/google-research at 72d82b6), on Dopamine's TensorFlow DQN agent
_MDQN = "google-research/google-research 72d82b6 munchausen_rl"
_MDQN_GIN = "munchausen_rl/configs/atari.gin"
_MDQN_BINDINGS = {  # key -> (the binding in atari.gin, its value); `_mdqn` cites its line
    "learner.gamma": ("MunchausenDQNAgent.gamma", 0.99), "learner.n_step": ("MunchausenDQNAgent.update_horizon", 1),
    "run.learning_starts": ("MunchausenDQNAgent.min_replay_history", 20_000),
    "run.training_interval": ("MunchausenDQNAgent.update_period", 4),
    "exploration.epsilon_end": ("MunchausenDQNAgent.epsilon_train", 0.01),
    "exploration.eval_epsilon": ("MunchausenDQNAgent.epsilon_eval", 0.001),
    "exploration.epsilon_decay_steps": ("MunchausenDQNAgent.epsilon_decay_period", 250_000),
    "learner.optimizer": ("MunchausenDQNAgent.optimizer_type", "adam"),
    "learner.learning_rate": ("MunchausenDQNAgent.optimizer_lr", 5e-5),
    "replay.capacity": ("WrappedReplayBuffer.replay_capacity", 1_000_000),
    "replay.batch_size": ("WrappedReplayBuffer.batch_size", 32),
    "env.terminal_on_life_loss": ("AtariPreprocessing.terminal_on_life_loss", False)}
_MDQN_LINES = {"MunchausenDQNAgent.gamma": 8, "MunchausenDQNAgent.update_horizon": 9,
               "MunchausenDQNAgent.min_replay_history": 10, "MunchausenDQNAgent.update_period": 11,
               "MunchausenDQNAgent.epsilon_train": 13, "MunchausenDQNAgent.epsilon_eval": 14,
               "MunchausenDQNAgent.epsilon_decay_period": 15, "MunchausenDQNAgent.optimizer_type": 16,
               "MunchausenDQNAgent.optimizer_lr": 17, "WrappedReplayBuffer.replay_capacity": 68,
               "WrappedReplayBuffer.batch_size": 69, "AtariPreprocessing.terminal_on_life_loss": 71}


def _mdqn(binding: str, value) -> Cited:
    return _gin(_MDQN_GIN, _MDQN_LINES, binding, value)


# Dopamine's Atari protocol (discrete_domains/atari_lib.py and run_experiment.py, which its TensorFlow and JAX
# agents share), as M-DQN's and IQN's reference runs play it.
_DOPAMINE_ATARI = {
    "env.fire_on_reset": Cited(False, "dopamine/discrete_domains/atari_lib.py create_atari_environment: no FIRE "
                                      "pressed for the agent"),
    "env.noop_max": Cited(0, "dopamine/discrete_domains/atari_lib.py: no no-op start (sticky actions instead)"),
    "env.frame_skip": Cited(4, "dopamine/discrete_domains/atari_lib.py AtariPreprocessing frame_skip=4"),
    "env.screen_size": Cited(84, "dopamine/discrete_domains/atari_lib.py AtariPreprocessing screen_size=84"),
    "env.frame_stack": Cited(4, "dopamine/discrete_domains/atari_lib.py NATURE_DQN_STACK_SIZE = 4"),
    "learner.clip_rewards": Cited(True, "dopamine/discrete_domains/run_experiment.py Runner: each reward clipped to "
                                        "[-1, 1] for the agent"),
    "exploration.epsilon_start": Cited(1.0, "linearly_decaying_epsilon (dqn_agent.py) begins at 1"),
    "exploration.epsilon_delay_steps": Cited(20_000, "linearly_decaying_epsilon (dqn_agent.py) holds 1 through "
                                                     "warmup_steps = min_replay_history"),
    "learner.target_update_phase": Cited(5_000, "dqn_agent.py _train_step: a copy when the agent steps counted from "
                                                "step 0 are a multiple of target_update_period, so after 20,000 / 4 = "
                                                "5,000 updates' worth of warm-up"),
    "run.env_steps_per_round": Cited(1, "dqn_agent.py _train_step: an update every update_period agent steps"),
    "run.num_envs": Cited(1, "dopamine/discrete_domains/run_experiment.py: one environment")}
# IQN's reference run: Dopamine's JAX agent (google/dopamine 5873f54)
_IQN_GIN = "jax/agents/implicit_quantile/configs/implicit_quantile.gin"
_IQN_AGENT = "jax/agents/implicit_quantile/implicit_quantile_agent.py"
_IQN_NETWORK = "jax/networks.py:381-429 ImplicitQuantileNetwork"
_IQN_BINDINGS = {  # key -> (the binding in implicit_quantile.gin, its line, its value)
    "learner.num_tau_samples": ("JaxImplicitQuantileAgent.num_tau_samples", 9, 64),
    "learner.num_tau_prime_samples": ("JaxImplicitQuantileAgent.num_tau_prime_samples", 10, 64),
    "learner.num_quantile_samples": ("JaxImplicitQuantileAgent.num_quantile_samples", 11, 32),
    "learner.gamma": ("JaxImplicitQuantileAgent.gamma", 12, 0.99),
    "learner.n_step": ("JaxImplicitQuantileAgent.update_horizon", 13, 3),
    "run.learning_starts": ("JaxImplicitQuantileAgent.min_replay_history", 14, 20_000),
    "run.training_interval": ("JaxImplicitQuantileAgent.update_period", 15, 4),
    "exploration.epsilon_end": ("JaxImplicitQuantileAgent.epsilon_train", 17, 0.01),
    "exploration.eval_epsilon": ("JaxImplicitQuantileAgent.epsilon_eval", 18, 0.001),
    "exploration.epsilon_decay_steps": ("JaxImplicitQuantileAgent.epsilon_decay_period", 19, 250_000),
    "learner.optimizer": ("JaxImplicitQuantileAgent.optimizer", 20, "adam"),
    "learner.learning_rate": ("create_optimizer.learning_rate", 21, 5e-5),
    "learner.adam_epsilon": ("create_optimizer.eps", 22, 3.125e-4),
    "replay.capacity": ("ReplayBuffer.max_capacity", 35, 1_000_000),
    "replay.batch_size": ("ReplayBuffer.batch_size", 36, 32)}


def _iqn(binding: str, line: int, value) -> Cited:
    return Cited(value, f"{_IQN_GIN}:{line} {binding} = {value}")


_PRIORITIES = "labs/atari_100k/atari_100k_rainbow_agent.py:221 priorities sqrt(loss + 1e-10)"
_WEIGHTS = "labs/atari_100k/atari_100k_rainbow_agent.py:190-191 weights 1 / sqrt(p), over their maximum"
# tfdqn's own recipes for a 2-core CPU (docs/experiments/atari.md), chosen by measured sweeps for time to a score.
# Prioritized replay and a dueling head as RLlib's tuned Pong DQN (T5 in the Pong sweep: ahead of T4b, which had
# neither, from 125,000 agent steps).
_CPU_COMPONENTS = {"learner.n_step": 3, "learner.double_dqn": True, "network.dueling": True,
                   "replay.sampler": "prioritized", "replay.priority_exponent": 0.5,
                   "replay.importance_exponent": 0.4, "replay.importance_exponent_end": 1.0}
# 42x42 frames (as RLlib's tuned Pong DQN) through small_cnn, which keeps an 11x11 map where the Nature CNN keeps
# 1x1; one update per 2 agent steps on 4 envs; a 100,000-transition replay; ALE v5 without sticky actions, as
# Atari 100k and the peers' Pong figures play it
_CPU_ATARI = {"env.screen_size": 42, "network.kind": "small_cnn", "env.repeat_action_probability": 0.0,
              "replay.capacity": 100_000, "replay.batch_size": 32, "learner.learning_rate": 1e-4,
              "learner.target_update_period": 1_000, "exploration.epsilon_end": 0.01,
              "exploration.epsilon_decay_steps": 100_000, "exploration.eval_epsilon": 0.001,
              "run.learning_starts": 10_000, "run.training_interval": 2, "run.num_envs": 4,
              "run.eval_every": 25_000, "run.eval_episodes": 10, "run.checkpoint_every": 50_000,
              "run.total_steps": 1_000_000}

PRESETS = {
    "rainbow": Preset(
        "Hessel et al. 2018 (Rainbow), Table 1",
        components={"learner.loss": Cited("categorical", f"{_RAINBOW_TABLE}: distributional"),
                    "learner.num_atoms": Cited(51, f"{_RAINBOW_TABLE}: distributional atoms 51"),
                    "network.dueling": Cited(True, "Hessel et al. 2018, section 3: the dueling architecture"),
                    "network.noisy": Cited(True, f"{_RAINBOW_TABLE}: noisy nets (exploration epsilon 0)"),
                    "network.noisy_sigma0": Cited(0.5, f"{_RAINBOW_TABLE}: noisy nets sigma0 0.5"),
                    "learner.double_dqn": Cited(True, "Hessel et al. 2018, section 3: double Q-learning"),
                    "replay.sampler": Cited("prioritized", f"{_RAINBOW_TABLE}: prioritization type proportional"),
                    "replay.priority_exponent": Cited(0.5, f"{_RAINBOW_TABLE}: prioritization exponent 0.5"),
                    "replay.importance_exponent": Cited(0.4, f"{_RAINBOW_TABLE}: importance sampling 0.4 -> 1"),
                    "replay.importance_exponent_end": Cited(1.0, f"{_RAINBOW_TABLE}: importance sampling 0.4 -> 1"),
                    "learner.n_step": Cited(3, f"{_RAINBOW_TABLE}: multi-step returns n 3")},
        atari={"learner.v_min": Cited(-10.0, f"{_RAINBOW_TABLE}: distributional min/max values [-10, 10]"),
               "learner.v_max": Cited(10.0, f"{_RAINBOW_TABLE}: distributional min/max values [-10, 10]"),
               "learner.optimizer": Cited("adam", f"{_RAINBOW_TABLE}: Adam"),
               "learner.learning_rate": Cited(6.25e-5, f"{_RAINBOW_TABLE}: Adam learning rate 0.0000625"),
               "learner.adam_epsilon": Cited(1.5e-4, f"{_RAINBOW_TABLE}: Adam epsilon 1.5e-4"),
               "learner.max_grad_norm": Cited(0.0, "Hessel et al. 2018 clip no gradients"),
               "run.training_interval": Cited(4, "Hessel et al. 2018, after Mnih et al. 2015: an update every 4 "
                                                 "agent steps"),
               "learner.target_update_period": Cited(2_000, f"{_RAINBOW_TABLE}: target network period 32K frames "
                                                            "= 2,000 updates at 4 agent steps per update"),
               "run.learning_starts": Cited(20_000, f"{_RAINBOW_TABLE}: min history to start learning 80K frames"),
               "run.env_steps_per_round": 1},
        vector=_VECTOR_SUPPORT,
        differences=(Difference("the environment", "no sticky actions (the deterministic ALE of Mnih et al. 2015)",
                                "atari.yaml's ALE v5 protocol: sticky actions 0.25, up to 30 no-op frames, FIRE "
                                "pressed at each life, a lost life terminal for learning",
                                "scores compare with ALE v5 baselines (Machado et al. 2018), not with the paper's"),
                     Difference("training length", "200M frames (50M agent steps)", "atari.yaml's 10M agent steps "
                                "(--total-steps sets it)", "a fifth of the paper's training"),
                     Difference("evaluation", "the paper's protocol", "atari.yaml's: 10 games every 250,000 agent "
                                "steps at epsilon 0.05, noise off", "the best network is picked as tfdqn picks it"))),
    "der": Preset(
        f"van Hasselt et al. 2019 (data-efficient Rainbow), as Dopamine's labs/atari_100k DER.gin ({DOPAMINE})",
        components={"learner.loss": Cited("categorical", "jax/agents/full_rainbow/full_rainbow_agent.py:257 "
                                                         "distributional=True"),
                    "learner.num_atoms": _gin("DER.gin", _DER_LINES, "JaxFullRainbowAgent.num_atoms", 51),
                    "network.dueling": _gin("DER.gin", _DER_LINES, "JaxFullRainbowAgent.dueling", True),
                    "network.noisy": _gin("DER.gin", _DER_LINES, "JaxFullRainbowAgent.noisy", True),
                    "network.noisy_sigma0": Cited(0.1, "jax/networks.py:504 NoisyNetwork sigma 0.1 / sqrt(fan_in); "
                                                       "van Hasselt et al. 2019, noisy nets parameter 0.1"),
                    "network.noise_refresh": Cited("call", "jax/agents/full_rainbow/full_rainbow_agent.py:86-90 "
                                                           "select_action splits a new key for the network per call"),
                    "learner.double_dqn": _gin("DER.gin", _DER_LINES, "JaxFullRainbowAgent.double_dqn", True),
                    "replay.sampler": _gin("DER.gin", _DER_LINES, "JaxFullRainbowAgent.replay_scheme", "prioritized"),
                    "replay.priority_exponent": Cited(0.5, _PRIORITIES),
                    "replay.priority_epsilon": Cited(1e-10, _PRIORITIES),
                    "replay.importance_exponent": Cited(0.5, _WEIGHTS),
                    "replay.importance_exponent_end": Cited(0.5, _WEIGHTS),
                    "learner.n_step": _gin("DER.gin", _DER_LINES, "JaxDQNAgent.update_horizon", 10)},
        atari={**_atari_100k("DER.gin", _DER_LINES),
               "learner.v_min": Cited(-10.0, "jax/agents/full_rainbow/full_rainbow_agent.py:316 vmin = -vmax"),
               "learner.v_max": _gin("DER.gin", _DER_LINES, "JaxFullRainbowAgent.vmax", 10.0),
               "learner.target_update_period": _gin("DER.gin", _DER_LINES, "JaxDQNAgent.target_update_period", 2_000),
               "learner.target_update_phase": Cited(1_600, "jax/agents/full_rainbow/full_rainbow_agent.py:492-500: "
                                                           "a copy when the agent steps since step 0 are a multiple "
                                                           "of the period, so the first after 400 updates"),
               "learner.augment_pad": _gin("DER.gin", _DER_LINES, "Atari100kRainbowAgent.data_augmentation", 0,
                                           "False"),
               "learner.augment_intensity": _gin("DER.gin", _DER_LINES, "Atari100kRainbowAgent.data_augmentation",
                                                 0.0, "False")},
        vector=_VECTOR_SUPPORT,
        differences=(_NOOPS, _REPLAY_AT_TERMINALS, _LIFE_LOSS, _SAMPLING, _ADAM, _CAPACITY,
                     _TRUNCATION, _NOISE_SEED)),
    "drq_eps": Preset(
        f"Agarwal et al. 2021 (DrQ(epsilon)), as Dopamine's labs/atari_100k DrQ_eps.gin ({DOPAMINE})",
        components={"learner.loss": Cited("huber", "DrQ_eps.gin:25 JaxFullRainbowAgent.distributional = False: "
                                                   "full_rainbow_agent.py:169 huber_loss"),
                    "network.dueling": _gin("DrQ_eps.gin", _DRQ_LINES, "JaxFullRainbowAgent.dueling", True),
                    "network.noisy": _gin("DrQ_eps.gin", _DRQ_LINES, "JaxFullRainbowAgent.noisy", False),
                    "learner.double_dqn": _gin("DrQ_eps.gin", _DRQ_LINES, "JaxFullRainbowAgent.double_dqn", True),
                    "replay.sampler": _gin("DrQ_eps.gin", _DRQ_LINES, "JaxFullRainbowAgent.replay_scheme", "uniform"),
                    "learner.n_step": _gin("DrQ_eps.gin", _DRQ_LINES, "JaxDQNAgent.update_horizon", 10),
                    "learner.target_update_period": _gin("DrQ_eps.gin", _DRQ_LINES, "JaxDQNAgent.target_update_period",
                                                         1),
                    "learner.augment_pad": Cited(4, "labs/atari_100k/atari_100k_rainbow_agent.py:107 "
                                                    "drq_image_augmentation img_pad=4"),
                    "learner.augment_intensity": Cited(0.05, "labs/atari_100k/atari_100k_rainbow_agent.py:99 "
                                                             "_intensity_aug scale=0.05")},
        atari={**_atari_100k("DrQ_eps.gin", _DRQ_LINES),
               "learner.huber_delta": Cited(1.0, "jax/losses.py:20-21 huber_loss delta=1.0"),
               "exploration.epsilon_start": Cited(1.0, "jax/agents/dqn/dqn_agent.py:171 linearly_decaying_epsilon "
                                                       "begins at 1"),
               "exploration.epsilon_delay_steps": Cited(1_600, "jax/agents/dqn/dqn_agent.py:171 linearly_decaying_"
                                                               "epsilon holds 1 through warmup_steps = "
                                                               "min_replay_history"),
               "exploration.epsilon_end": _gin("DrQ_eps.gin", _DRQ_LINES, "JaxDQNAgent.epsilon_train", 0.01),
               "exploration.epsilon_decay_steps": _gin("DrQ_eps.gin", _DRQ_LINES, "JaxDQNAgent.epsilon_decay_period",
                                                       5_000)},
        vector=_NO_SHIFT,
        differences=(_NOOPS, _REPLAY_AT_TERMINALS, _LIFE_LOSS, _SHIFTS, _ADAM, _CAPACITY, _TRUNCATION)),
    "munchausen": Preset(
        f"Vieillard, Pietquin and Geist 2020 (M-DQN), as {_MDQN} runs it",
        components={"learner.munchausen": Cited(True, "munchausen_rl/agents/m_dqn.py _build_target_q_op: the "
                                                       "modified Bellman target"),
                    "learner.munchausen_tau": Cited(0.03, "munchausen_rl/train.py flag tau 0.03 (the paper's Atari "
                                                          "value)"),
                    "learner.munchausen_alpha": Cited(0.9, "munchausen_rl/train.py flag alpha 0.9 (the paper's; the "
                                                           "agent's own default is 1)"),
                    "learner.munchausen_clip": Cited(-1.0, "munchausen_rl/train.py flag clip_value_min -1 (the "
                                                           "paper's l0; the agent's own default is -10)"),
                    "learner.n_step": _mdqn("MunchausenDQNAgent.update_horizon", 1),
                    "learner.loss": Cited("huber", "dopamine/agents/dqn/dqn_agent.py: DQNAgent's Huber loss, which "
                                                   "MunchausenDQNAgent keeps"),
                    "network.dueling": Cited(False, "dopamine/discrete_domains/atari_lib.py nature_dqn_network: one "
                                                    "stream"),
                    "network.noisy": Cited(False, "munchausen_rl/agents/m_dqn.py: epsilon-greedy acting"),
                    "replay.sampler": Cited("uniform", "munchausen_rl/configs/atari.gin: WrappedReplayBuffer, "
                                                       "Dopamine's uniform circular replay")},
        atari={**{key: _mdqn(binding, value) for key, (binding, value) in _MDQN_BINDINGS.items()}, **_DOPAMINE_ATARI,
               "learner.target_update_period": Cited(2_000, f"{_MDQN_GIN}:12 target_update_period = 8000 agent "
                                                            "steps = 2,000 updates at 4 agent steps per update"),
               "learner.adam_epsilon": Cited(3.125e-4, "munchausen_rl/agents/m_dqn.py _build_optimizer: "
                                                       "AdamOptimizer epsilon=0.0003125"),
               "learner.max_grad_norm": Cited(0.0, "dopamine/agents/dqn/dqn_agent.py: optimizer.minimize, no "
                                                   "gradient clipping"),
               "learner.huber_delta": Cited(1.0, "dopamine/agents/dqn/dqn_agent.py: tf.losses.huber_loss, delta 1"),
               "env.repeat_action_probability": Cited(0.25, f"{_MDQN_GIN}:72 sticky_actions = True: "
                                                            "NoFrameskip-v0, 0.25"),
               "network.kind": Cited("nature_cnn", "dopamine/discrete_domains/atari_lib.py nature_dqn_network: conv "
                                                   "32 8x8/4, 64 4x4/2, 64 3x3/1, dense 512"),
               "network.conv_padding": Cited("same", "dopamine/discrete_domains/atari_lib.py nature_dqn_network: "
                                                     "slim.conv2d, whose padding is SAME")},
        vector={},
        differences=(_DOPAMINE_LENGTH, _DOPAMINE_EVALUATION,
                     Difference("a game cut at 108,000 frames", "stored as terminal (DQNAgent.end_episode)",
                                "truncated: the target bootstraps", "only games longer than 27,000 agent steps"))),
    "iqn": Preset(
        f"Dabney, Ostrovski, Silver and Munos 2018 (IQN), as Dopamine's {_IQN_GIN} runs it ({DOPAMINE})",
        components={"learner.loss": Cited("implicit_quantile", f"{_IQN_AGENT} JaxImplicitQuantileAgent"),
                    "learner.quantile_embedding_dim": Cited(64, f"{_IQN_AGENT} quantile_embedding_dim=64; "
                                                                f"{_IQN_NETWORK}: cos(pi i tau), i = 1..64"),
                    **{key: _iqn(binding, line, value) for key, (binding, line, value) in _IQN_BINDINGS.items()
                       if key.startswith("learner.num_")},
                    "learner.double_dqn": Cited(False, f"{_IQN_AGENT} double_dqn=False"),
                    "learner.n_step": _iqn("JaxImplicitQuantileAgent.update_horizon", 13, 3),
                    "learner.munchausen": False,
                    "network.dueling": Cited(False, f"{_IQN_NETWORK}: one stream"),
                    "network.noisy": Cited(False, f"{_IQN_NETWORK}: plain dense layers, epsilon-greedy acting"),
                    "replay.sampler": Cited("uniform", f"{_IQN_AGENT}: replay_scheme is not passed on, so "
                                                       "JaxDQNAgent's uniform replay")},
        atari={**{key: _iqn(binding, line, value) for key, (binding, line, value) in _IQN_BINDINGS.items()},
               **_DOPAMINE_ATARI,
               "learner.target_update_period": Cited(2_000, f"{_IQN_GIN}:16 target_update_period = 8_000 agent "
                                                            "steps = 2,000 updates at 4 agent steps per update"),
               "learner.max_grad_norm": Cited(0.0, "jax/agents/dqn/dqn_agent.py:93 optax.adam, no gradient "
                                                   "clipping"),
               "env.repeat_action_probability": Cited(0.25, f"{_IQN_GIN}:26 sticky_actions = True: 0.25"),
               "env.terminal_on_life_loss": Cited(False, "dopamine/discrete_domains/atari_lib.py "
                                                         "AtariPreprocessing terminal_on_life_loss=False"),
               "env.max_episode_frames": Cited(100_000, "dopamine/discrete_domains/atari_lib.py:134 "
                                                        "max_num_frames_per_episode=100_000, which binds before "
                                                        f"{_IQN_GIN}:33 Runner.max_steps_per_episode = 27,000 agent "
                                                        "steps (108,000 frames)"),
               "network.kind": Cited("nature_cnn", f"{_IQN_NETWORK}: conv 32 8x8/4, 64 4x4/2, 64 3x3/1, then the "
                                                   "fractions' embedding and a dense 512"),
               "network.conv_padding": Cited("same", f"{_IQN_NETWORK}: nn.Conv with flax's default padding, SAME")},
        vector={},
        differences=(_DOPAMINE_LENGTH,
                     Difference("a game cut at 100,000 frames", "stored as terminal (AtariPreprocessing returns "
                                "terminated or truncated as one flag)", "truncated: the target bootstraps",
                                "only games longer than 25,000 agent steps"),
                     Difference("evaluation", f"none: {_IQN_GIN}:27 schedule continuous_train reports the returns of "
                                "the training games", "atari.yaml's: 10 games every 250,000 agent steps at epsilon "
                                "0.001", "the best network is picked as tfdqn picks it; Dopamine's published IQN "
                                "curves are training returns"), _ADAM,
                     Difference("the fractions acting reads Q at", "K = 32 drawn uniformly at every act call",
                                "the K = 32 midpoints (2k + 1) / 64 for acting, evaluation and export (the learner "
                                "draws K for the target's next action, as Dopamine does)",
                                "a greedy policy that repeats; not measured on scores"),
                     Difference("initial weights", "uniform in +-3^(1/4) / sqrt(fan_in) (variance_scaling 1/sqrt(3), "
                                "fan_in)", "Glorot uniform, +-sqrt(6 / (fan_in + fan_out)), as every tfdqn network",
                                "not measured"))),
    "atari_cpu": Preset("tfdqn's sweep for time to a score on a 2-core CPU (docs/experiments/atari.md: Pong)",
                        components=_CPU_COMPONENTS, atari=_CPU_ATARI, vector={}),
    # Breakout: IQN's loss at 8 fractions and the IMPALA network, with Dopamine's 1M replay, epsilon schedule and
    # update period, on atari_cpu's other settings (T9 in docs/experiments/atari.md's Breakout sweep, the recipe it
    # recorded)
    "iqn_impala_cpu": Preset(
        "tfdqn's sweep for time to a score on a 2-core CPU (docs/experiments/atari.md: Breakout, T9)",
        components={**_CPU_COMPONENTS, "learner.loss": "implicit_quantile", "learner.num_tau_samples": 8,
                    "learner.num_tau_prime_samples": 8, "learner.num_quantile_samples": 8},
        atari={**_CPU_ATARI, "network.kind": "impala", "replay.capacity": 1_000_000,
               "exploration.epsilon_decay_steps": 250_000, "run.training_interval": 4},
        vector={}),
}


def preset_settings(name: str, atari: bool) -> dict:
    """key -> (value, origin) of preset `name` for an env of that kind, or a one-line error."""
    if name not in PRESETS:
        raise UserError(f"--preset {name!r} is not a preset; allowed: {', '.join(PRESETS)}")
    return PRESETS[name].settings(atari, name)
