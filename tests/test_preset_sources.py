"""Each published preset against the source it cites, value by value, on Atari: every key of the resolved config is
checked against the source, listed among the preset's differences from the reference run, unused by the recipe,
or not part of a recipe at all, so a value inherited from atari.yaml or a default cannot go unchecked.

The values were read from google/dopamine at 5873f54 (labs/atari_100k/configs/DER.gin and DrQ_eps.gin, and the
code they configure, as ../shared/reference/recipes-sources.md lists) and from Hessel et al. 2018, Table 1."""

import pytest

from tests.conftest import REPO
from tfdqn import config as config_lib
from tfdqn.config.presets import PRESETS

# Never a recipe's: which game (and its own keyword arguments), where the work runs, how it is logged and saved.
NOT_RECIPE = {"env.id", "env.kwargs", "env.action_mask", "env.mask_actions", "env.step_delay_ms", "replay.device", "replay.compression", "replay.audit", "replay.memory_budget_gib",
              "run.seed", "run.log_every", "run.checkpoint_every",
              *(f"compute.{key}" for key in ("act_jit_compile", "update_jit_compile", "act_device",
                                             "mixed_precision", "deterministic")),
              *(f"actors.{key}" for key in ("count", "envs_per_actor", "weight_sync_period", "chunk_steps",
                                            "exploration", "ray_address", "cpus_per_actor", "ray_placement_timeout")),
              "tracking.wandb", "tracking.wandb_project"}

# Atari 100k as Dopamine runs it (DER.gin and DrQ_eps.gin alike; atari_lib.py, atari_100k_runner.py, dqn_agent.py).
ATARI_100K = {
    "env.frame_stack": 4, "env.frame_skip": 4, "env.screen_size": 84,
    "env.terminal_on_life_loss": True, "env.fire_on_reset": False, "env.repeat_action_probability": 0.0,
    "env.max_episode_frames": 100_000, "replay.batch_size": 32, "network.kind": "nature_cnn",
    "network.conv_padding": "same", "network.dueling": True, "learner.gamma": 0.99, "learner.optimizer": "adam",
    "learner.learning_rate": 1e-4, "learner.learning_rate_decay_updates": 0, "learner.adam_epsilon": 1.5e-4,
    "learner.double_dqn": True, "learner.max_grad_norm": 0.0, "learner.clip_rewards": True, "learner.n_step": 10,
    "exploration.eval_epsilon": 0.001, "run.total_steps": 100_000, "run.learning_starts": 1_600,
    "run.training_interval": 1.0, "run.env_steps_per_round": 1, "run.final_eval_episodes": 100, "run.eval_every": 0,
    "run.num_envs": 1, "run.async_learner": False, "replay.prefetch": False, "actors.kind": "inline",
    "learner.munchausen": False}

SOURCES = {
    "drq_eps": {**ATARI_100K, "replay.sampler": "uniform", "network.noisy": False, "learner.huber_delta": 1.0,
                "learner.target_update_period": 1, "learner.target_update_phase": 0, "learner.loss": "huber", "learner.augment_pad": 4,
                "learner.augment_intensity": 0.05, "exploration.epsilon_start": 1.0, "exploration.epsilon_end": 0.01,
                "exploration.epsilon_decay_steps": 5_000, "exploration.epsilon_delay_steps": 1_600},
    "der": {**ATARI_100K, "replay.sampler": "prioritized", "replay.priority_exponent": 0.5,
            "replay.priority_epsilon": 1e-10, "replay.importance_exponent": 0.5, "replay.importance_exponent_end": 0.5,
            "network.noisy": True, "network.noisy_sigma0": 0.1, "network.noise_refresh": "call",
            "learner.target_update_period": 2_000,
            "learner.target_update_phase": 1_600,
            "learner.loss": "categorical", "learner.num_atoms": 51, "learner.v_min": -10.0, "learner.v_max": 10.0,
            "learner.augment_pad": 0, "learner.augment_intensity": 0.0,
            "exploration.epsilon_start": 0.0, "exploration.epsilon_end": 0.0},  # full_rainbow_agent.py:335
    "rainbow": {"learner.loss": "categorical", "learner.num_atoms": 51, "learner.v_min": -10.0, "learner.v_max": 10.0,
                "network.noisy": True, "network.noisy_sigma0": 0.5, "network.dueling": True, "learner.double_dqn": True,
                "replay.sampler": "prioritized", "replay.priority_exponent": 0.5, "replay.importance_exponent": 0.4,
                "replay.importance_exponent_end": 1.0, "learner.n_step": 3, "learner.optimizer": "adam",
                "learner.learning_rate": 6.25e-5, "learner.adam_epsilon": 1.5e-4, "learner.learning_rate_decay_updates": 0,
                "learner.max_grad_norm": 0.0, "learner.target_update_period": 2_000, "run.learning_starts": 20_000,
                "learner.target_update_phase": 0,
                "run.training_interval": 4.0, "run.env_steps_per_round": 1, "run.num_envs": 1,
                "run.async_learner": False, "replay.prefetch": False, "actors.kind": "inline",
                "exploration.epsilon_start": 0.0,
                "exploration.epsilon_end": 0.0, "learner.gamma": 0.99, "replay.batch_size": 32,
                "replay.capacity": 1_000_000, "env.frame_stack": 4, "env.frame_skip": 4, "env.screen_size": 84,
                "network.kind": "nature_cnn", "network.conv_padding": "valid", "learner.clip_rewards": True,
                "learner.augment_pad": 0, "learner.augment_intensity": 0.0, "learner.munchausen": False},
    "munchausen": {"learner.munchausen": True, "learner.munchausen_tau": 0.03, "learner.munchausen_alpha": 0.9,
                   "learner.munchausen_clip": -1.0, "learner.loss": "huber", "learner.huber_delta": 1.0,
                   "network.dueling": False, "network.noisy": False, "replay.sampler": "uniform",
                   "learner.gamma": 0.99, "learner.n_step": 1, "run.learning_starts": 20_000,
                   "run.training_interval": 4.0, "learner.target_update_period": 2_000,
                   "learner.target_update_phase": 5_000, "exploration.epsilon_start": 1.0,
                   "exploration.epsilon_end": 0.01, "exploration.epsilon_delay_steps": 20_000,
                   "exploration.epsilon_decay_steps": 250_000, "exploration.eval_epsilon": 0.001,
                   "learner.optimizer": "adam", "learner.learning_rate": 5e-5, "learner.adam_epsilon": 3.125e-4,
                   "learner.learning_rate_decay_updates": 0, "learner.max_grad_norm": 0.0,
                   "learner.clip_rewards": True, "replay.capacity": 1_000_000, "replay.batch_size": 32,
                   "env.terminal_on_life_loss": False, "env.fire_on_reset": False, "env.noop_max": 0,
                   "env.repeat_action_probability": 0.25, "env.frame_skip": 4, "env.screen_size": 84,
                   "env.frame_stack": 4, "env.max_episode_frames": 108_000, "network.kind": "nature_cnn",
                   "network.conv_padding": "same", "run.env_steps_per_round": 1, "run.num_envs": 1,
                   "run.async_learner": False, "replay.prefetch": False, "actors.kind": "inline",
                   "learner.augment_pad": 0, "learner.augment_intensity": 0.0},
    "iqn": {"learner.loss": "implicit_quantile", "learner.num_tau_samples": 64, "learner.num_tau_prime_samples": 64,
            "learner.num_quantile_samples": 32, "learner.quantile_embedding_dim": 64, "learner.munchausen": False,
            "learner.double_dqn": False, "network.dueling": False, "network.noisy": False, "replay.sampler": "uniform",
            "learner.gamma": 0.99, "learner.n_step": 3, "run.learning_starts": 20_000, "run.training_interval": 4.0,
            "learner.target_update_period": 2_000, "learner.target_update_phase": 5_000,
            "exploration.epsilon_start": 1.0, "exploration.epsilon_end": 0.01, "exploration.epsilon_delay_steps": 20_000,
            "exploration.epsilon_decay_steps": 250_000, "exploration.eval_epsilon": 0.001, "learner.optimizer": "adam",
            "learner.learning_rate": 5e-5, "learner.adam_epsilon": 3.125e-4, "learner.learning_rate_decay_updates": 0,
            "learner.max_grad_norm": 0.0, "learner.clip_rewards": True, "replay.capacity": 1_000_000,
            "replay.batch_size": 32, "env.terminal_on_life_loss": False, "env.fire_on_reset": False, "env.noop_max": 0,
            "env.repeat_action_probability": 0.25, "env.frame_skip": 4, "env.screen_size": 84, "env.frame_stack": 4,
            "env.max_episode_frames": 100_000, "network.kind": "nature_cnn", "network.conv_padding": "same",
            "run.env_steps_per_round": 1, "run.num_envs": 1, "run.async_learner": False, "replay.prefetch": False,
            "actors.kind": "inline", "learner.augment_pad": 0, "learner.augment_intensity": 0.0},
}

# Keys that differ on purpose, each with the difference the preset lists for it.
DIFFERENT = {
    "drq_eps": {"replay.capacity": "replay capacity", "env.noop_max": "the no-op start"},
    "der": {"replay.capacity": "replay capacity", "env.noop_max": "the no-op start"},
    "rainbow": {**{key: "the environment" for key in ("env.noop_max", "env.fire_on_reset", "env.repeat_action_probability",
                                                      "env.terminal_on_life_loss", "env.max_episode_frames")},
                **{key: "evaluation" for key in ("exploration.eval_epsilon", "run.eval_every", "run.eval_episodes",
                                                 "run.final_eval_episodes", "run.target_return")},
                "run.total_steps": "training length"},
    "munchausen": {**{key: "evaluation" for key in ("run.eval_every", "run.eval_episodes", "run.final_eval_episodes",
                                                    "run.target_return")},
                   "run.total_steps": "training length"},
    "iqn": {**{key: "evaluation" for key in ("run.eval_every", "run.eval_episodes", "run.final_eval_episodes",
                                             "run.target_return")},
            "run.total_steps": "training length"},
}

# Keys the recipe does not read, and why.
_DISTRIBUTIONAL = {"learner.num_atoms": "huber loss", "learner.v_min": "huber loss", "learner.v_max": "huber loss"}
_PRIORITIES = {key: "uniform sampling" for key in ("replay.priority_exponent", "replay.priority_epsilon",
                                                      "replay.importance_exponent", "replay.importance_exponent_end")}
_NO_NOISY_LAYERS = {"network.noisy_sigma0": "no noisy layers", "network.noise_refresh": "no noisy layers"}
_NO_PERIODIC_EVALUATION = {"run.eval_episodes": "run.eval_every = 0", "run.target_return": "run.eval_every = 0"}
_EPSILON_ZERO = {"exploration.epsilon_decay_steps": "epsilon 0 throughout",
                 "exploration.epsilon_delay_steps": "epsilon 0 throughout"}
_IQN_KEYS = {f"learner.{key}": "implicit quantile loss only" for key in (
    "num_tau_samples", "num_tau_prime_samples", "num_quantile_samples", "quantile_embedding_dim")}
_COMMON_UNUSED = {"network.hidden_sizes": "mlp only", "learner.num_quantiles": "quantile loss only",
                  "learner.learning_rate_end": "no step-size decay", **_IQN_KEYS,
                  "run.confirm_episodes": "run.target_return = inf: no hit to confirm",
                  "env.max_episode_steps": "Atari: env.max_episode_frames caps a game",
                  **{f"learner.munchausen_{key}": "no Munchausen target" for key in ("tau", "alpha", "clip")}}
UNUSED = {
    "drq_eps": {**_COMMON_UNUSED, **_DISTRIBUTIONAL, **_PRIORITIES, **_NO_PERIODIC_EVALUATION,
                **_NO_NOISY_LAYERS},
    "der": {**_COMMON_UNUSED, **_NO_PERIODIC_EVALUATION, **_EPSILON_ZERO, "learner.huber_delta": "categorical loss"},
    "rainbow": {**_COMMON_UNUSED, **_EPSILON_ZERO, "learner.huber_delta": "categorical loss"},
    "munchausen": {**{k: v for k, v in _COMMON_UNUSED.items() if not k.startswith("learner.munchausen")},
                   **_DISTRIBUTIONAL, **_PRIORITIES, **_NO_NOISY_LAYERS,
                   "learner.double_dqn": "the soft target takes no next action"},
    "iqn": {**{k: v for k, v in _COMMON_UNUSED.items() if k not in _IQN_KEYS}, **_DISTRIBUTIONAL, **_PRIORITIES,
            **_NO_NOISY_LAYERS, "learner.huber_delta": "the quantile Huber loss's kappa is 1"},
}
# Keys the source leaves open, and tfdqn's choice.
UNSTATED = {"drq_eps": {}, "der": {}, "munchausen": {}, "iqn": {},
            "rainbow": {"replay.priority_epsilon": "1e-6, so no priority is 0",
                        "network.noise_refresh": "update where the trainer acts with the updated network, as Fortunato "
                                                 "et al. 2018; call with acting copies, as Dopamine"}}


@pytest.mark.parametrize("preset", ["rainbow", "der", "drq_eps", "munchausen", "iqn"])
def test_every_value_of_a_published_preset_is_its_sources_or_a_listed_difference(preset):
    config = config_lib.to_dict(config_lib.resolve_config([], {"env.id": "Breakout"}, preset))
    values = {f"{section}.{key}": value for section, fields in config.items() for key, value in fields.items()}
    checked, different, unused = SOURCES[preset], DIFFERENT[preset], {**UNUSED[preset], **UNSTATED[preset]}
    assert not set(checked) & set(different) and not set(checked) & set(unused)
    assert set(values) == set(checked) | set(different) | set(unused) | NOT_RECIPE, "a key nobody classified"
    assert {key: values[key] for key in checked} == checked
    listed = {difference.what for difference in PRESETS[preset].differences}
    assert set(different.values()) <= listed


def test_no_preset_sets_an_epsilon_its_noisy_nets_would_make_dead():
    for name, preset in PRESETS.items():
        settings = {**preset.components, **preset.atari}
        noisy = settings.get("network.noisy")
        if getattr(noisy, "value", noisy) is True:
            assert not {key for key in settings if key.startswith("exploration.epsilon_")}, name


def test_docs_list_each_difference_from_the_reference_run():
    text = (REPO / "docs" / "reference" / "presets.md").read_text()
    for preset in ("rainbow", "der", "drq_eps", "munchausen", "iqn"):
        section = text.split(f"\n## {preset}\n")[1].split("\n## ")[0]  # under its own heading
        for difference in PRESETS[preset].differences:
            assert f"- {difference.line()}\n" in section, (preset, difference.what)
