"""Every range rule and every rule across keys, in one pass; the first broken one becomes a one-line UserError
naming the key, its value and what is allowed."""

from __future__ import annotations

import fractions
import importlib.util
import math

from tfdqn.config.schema import ActorsConfig, DQNConfig, EnvConfig, TrackingConfig
from tfdqn.errors import UserError
from tfdqn.extras import require
from tfdqn.replay.frame_codec import CODECS


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


def held_noise_allowed(c: DQNConfig) -> bool:
    """Whether `network.noise_refresh: update` is allowed (`_check_held_noise`): then it is also the default."""
    return c.network.noisy and c.actors.kind == "inline" and c.compute.act_device != "cpu"
