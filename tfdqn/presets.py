"""`--preset NAME`: recipes of the DQN family as config settings, each naming its source: the published
ones, and tfdqn's own `atari_cpu`, chosen by a measured sweep for time to a score on a 2-core CPU.

A preset sets the components of its recipe for every env (heads, losses, sampler, n-step), and its
published hyperparameters where they apply: on Atari, where they were tuned. For vector observations
(CartPole, LunarLander, ...) the env's own config keeps its tuned step sizes and schedules, and what
cannot apply is adapted, each adaptation saying why: no frames to shift, no reward clipping (so a
categorical support wide enough for unclipped returns). `--print-config` shows every value's origin.
"""

from __future__ import annotations

import dataclasses

from tfdqn.errors import UserError


@dataclasses.dataclass(frozen=True)
class Preset:
    source: str           # the paper (and the reference configuration) the settings come from
    components: dict      # key -> value, for every env
    atari: dict           # key -> value, the published hyperparameters, on Atari only
    vector: dict          # key -> (value, why), what vector observations need instead

    def settings(self, atari: bool) -> dict:
        """key -> (value, origin) for an env of that kind."""
        origin = lambda what: f"preset {what}: {self.source}"  # noqa: E731
        settings = {key: (value, origin("recipe")) for key, value in self.components.items()}
        if atari:
            settings.update({key: (value, origin("Atari")) for key, value in self.atari.items()})
        else:
            settings.update({key: (value, f"preset adapted: {why}") for key, (value, why) in self.vector.items()})
        return settings


# Vector observations: rewards are not clipped there, so the support spans +-100 (an undiscounted reward of
# 1 per step gives returns up to 1 / (1 - 0.99) = 100); there are no frames to shift.
_VECTOR_SUPPORT = {"learner.v_min": (-100.0, "unclipped returns (up to 1 / (1 - gamma) = 100 at reward 1)"),
                   "learner.v_max": (100.0, "unclipped returns (up to 1 / (1 - gamma) = 100 at reward 1)")}
_NO_SHIFT = {"learner.augment_pad": (0, "vector observations have no frames to shift"),
             "learner.augment_intensity": (0.0, "vector observations have no pixel intensities")}
# Atari 100k's protocol as Dopamine's labs/atari_100k runs it (100,000 agent steps, no sticky actions,
# games capped at 27,000 agent steps, the score the mean of 100 games at epsilon 0.001 after training,
# so no periodic evaluation picks a network).
_ATARI_100K = {"env.repeat_action_probability": 0.0, "env.max_episode_frames": 108_000, "run.total_steps": 100_000,
               "replay.capacity": 100_000, "exploration.eval_epsilon": 0.001, "run.eval_every": 0,
               "run.final_eval_episodes": 100, "run.env_steps_per_round": 1,
               "replay.batch_size": 32, "learner.optimizer": "adam", "learner.learning_rate": 1e-4,
               "learner.adam_epsilon": 1.5e-4, "learner.max_grad_norm": 0.0, "run.learning_starts": 1_600,
               "run.training_interval": 1}

PRESETS = {
    "rainbow": Preset(
        "Hessel et al. 2018 (Rainbow)",
        components={"learner.loss": "categorical", "learner.num_atoms": 51, "network.dueling": True,
                    "network.noisy": True, "learner.double_dqn": True, "replay.sampler": "prioritized",
                    "replay.priority_exponent": 0.5, "replay.importance_exponent": 0.4,
                    "replay.importance_exponent_end": 1.0, "learner.n_step": 3},
        atari={"learner.v_min": -10.0, "learner.v_max": 10.0, "learner.optimizer": "adam",
               "learner.learning_rate": 6.25e-5, "learner.adam_epsilon": 1.5e-4, "run.training_interval": 4,
               "learner.target_update_period": 2_000,  # 8,000 agent steps at 4 agent steps per update
               "run.learning_starts": 20_000, "run.env_steps_per_round": 1},
        vector=_VECTOR_SUPPORT),
    "der": Preset(
        "van Hasselt et al. 2019 (data-efficient Rainbow), as Dopamine's labs/atari_100k DER.gin",
        components={"learner.loss": "categorical", "learner.num_atoms": 51, "network.dueling": True,
                    "network.noisy": True, "learner.double_dqn": True, "replay.sampler": "prioritized",
                    "replay.priority_exponent": 0.5, "replay.importance_exponent": 0.5,
                    "replay.importance_exponent_end": 0.5, "learner.n_step": 10},
        atari={**_ATARI_100K, "learner.v_min": -10.0, "learner.v_max": 10.0, "learner.target_update_period": 2_000,
               "exploration.epsilon_start": 1.0, "exploration.epsilon_end": 0.01,
               "exploration.epsilon_decay_steps": 2_000},
        vector=_VECTOR_SUPPORT),
    "drq_eps": Preset(
        "Agarwal et al. 2021 (DrQ(epsilon)), as Dopamine's labs/atari_100k DrQ_eps.gin",
        components={"learner.loss": "huber", "network.dueling": True, "network.noisy": False,
                    "learner.double_dqn": True, "replay.sampler": "uniform", "learner.n_step": 10,
                    "learner.target_update_period": 1, "learner.augment_pad": 4, "learner.augment_intensity": 0.05},
        atari={**_ATARI_100K, "exploration.epsilon_start": 1.0, "exploration.epsilon_end": 0.01,
               # Dopamine holds epsilon at 1 for the 1,600 warm-up steps, then decays over 5,000: it reaches
               # 0.01 at step 6,600, as this linear decay from step 0 does
               "exploration.epsilon_decay_steps": 6_600},
        vector=_NO_SHIFT),
    "atari_cpu": Preset(
        "tfdqn's sweep for time to a score on a 2-core CPU (docs/atari.md: Pong)",
        # prioritized replay and a dueling head as RLlib's tuned Pong DQN (T5 in the sweep: ahead of T4b, which had
        # neither, from 125,000 agent steps)
        components={"learner.n_step": 3, "learner.double_dqn": True, "network.dueling": True,
                    "replay.sampler": "prioritized", "replay.priority_exponent": 0.5,
                    "replay.importance_exponent": 0.4, "replay.importance_exponent_end": 1.0},
        # 42x42 frames (as RLlib's tuned Pong DQN) through small_cnn, which keeps an 11x11 map where the Nature
        # CNN keeps 1x1; one update per 2 agent steps on 4 envs; a 100,000-transition replay; ALE v5 without
        # sticky actions, as Atari 100k and the peers' Pong figures play it
        atari={"env.screen_size": 42, "network.kind": "small_cnn", "env.repeat_action_probability": 0.0,
               "replay.capacity": 100_000, "replay.batch_size": 32, "learner.learning_rate": 1e-4,
               "learner.target_update_period": 1_000, "exploration.epsilon_end": 0.01,
               "exploration.epsilon_decay_steps": 100_000, "exploration.eval_epsilon": 0.001,
               "run.learning_starts": 10_000, "run.training_interval": 2, "run.num_envs": 4,
               "run.eval_every": 25_000, "run.eval_episodes": 10, "run.checkpoint_every": 50_000,
               "run.total_steps": 1_000_000},
        vector={}),
}


def preset_settings(name: str, atari: bool) -> dict:
    """key -> (value, origin) of preset `name` for an env of that kind, or a one-line error."""
    if name not in PRESETS:
        raise UserError(f"--preset {name!r} is not a preset; allowed: {', '.join(PRESETS)}")
    return PRESETS[name].settings(atari)
