"""Every range rule and every rule across keys, in one pass; the first broken one becomes a one-line UserError
naming the key, its value and what is allowed."""

from __future__ import annotations

import importlib.util
import math

from tfdqn.config.schema import ActorsConfig, DQNConfig, TrackingConfig, field_allowed
from tfdqn.errors import UserError
from tfdqn.extras import require


def _check(ok: bool, key: str, value, allowed: str) -> None:
    if not ok:
        raise UserError(f"config key {key} = {value!r} is out of range; allowed: {allowed}")


def validate(c: DQNConfig) -> None:
    """Every range rule in one place; the first broken one becomes a one-line UserError. What each key accepts on
    its own is the `Allowed` beside its field in schema.py, which the configuration reference shows too."""
    for key, allowed in field_allowed().items():
        section, _, name = key.partition(".")
        value = getattr(getattr(c, section), name)
        _check(allowed.accepts(value), key, list(value) if isinstance(value, tuple) else value, allowed.text)
    _validate_tracking(c.tracking)
    _validate_family(c)
    _validate_actors(c.actors)
    _validate_combinations(c)
    _validate_replay_size(c)


def _validate_tracking(t: TrackingConfig) -> None:
    if t.wandb and importlib.util.find_spec("wandb") is None:
        raise UserError('tracking.wandb = true (--track) needs the wandb package, which is not installed; allowed: '
                        'pip install "tfdqn[wandb]", or tracking.wandb = false')


def _validate_combinations(c: DQNConfig) -> None:
    """Settings that are each valid but not together."""
    if c.compute.deterministic and c.run.async_learner:  # the learner thread's timing picks the batches
        raise UserError("config key compute.deterministic = True with run.async_learner = True cannot repeat a run; "
                        "allowed: one of the two")
    if c.compute.deterministic and c.actors.kind != "inline":  # chunks arrive in timing order
        raise UserError(f"config key compute.deterministic = True with actors.kind = {c.actors.kind!r} cannot repeat "
                        f"a run; allowed: one of the two (actors.kind = 'inline' repeats)")
    if c.run.confirm_episodes and math.isinf(c.run.target_return):
        raise UserError(f"config key run.confirm_episodes = {c.run.confirm_episodes} confirms a hit of "
                        f"run.target_return, which is inf; allowed: run.confirm_episodes = 0, or a finite "
                        f"run.target_return")
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
    """The DQN-family rules across keys: held noise, the categorical support, Munchausen's losses and one step."""
    l = c.learner
    if c.network.noise_refresh == "update":
        _check_held_noise(c)
    _check(l.v_max > l.v_min, "learner.v_max", l.v_max, f"a number > learner.v_min = {l.v_min}")
    if l.munchausen and l.loss not in MUNCHAUSEN_LOSSES:
        raise UserError(f"config key learner.munchausen = True with learner.loss = {l.loss!r}: Munchausen's soft "
                        f"target is built here for the Huber loss (M-DQN) and IQN's (M-IQN); allowed: learner.loss = "
                        f"{' or '.join(MUNCHAUSEN_LOSSES)}, or learner.munchausen = False")
    if l.munchausen and l.n_step > 1:
        raise UserError(f"config key learner.n_step = {l.n_step} with learner.munchausen = True: an n-step return "
                        "would need Munchausen's log-policy term for every step's action, which no source defines; "
                        "allowed: learner.n_step = 1, or learner.munchausen = False")


def _check_held_noise(c: DQNConfig) -> None:
    """`network.noise_refresh: update` holds the noise of the network the learner updates: the trainer must act
    with that network itself, not with a copy (an acting copy, actor processes or Ray actors)."""
    if not held_noise_allowed(c):
        copy = ("network.noisy = False" if not c.network.noisy else
                f"actors.kind = {c.actors.kind!r}" if c.actors.kind != "inline" else "compute.act_device = 'cpu'")
        raise UserError(f"config key network.noise_refresh = 'update' with {copy}: held noise belongs to the noisy "
                        "network that the learner updates and the trainer acts with; allowed: network.noise_refresh = "
                        "'call', or network.noisy = True with actors.kind = 'inline' and compute.act_device = 'auto'")


MUNCHAUSEN_LOSSES = ("huber", "implicit_quantile")


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


def _validate_actors(a: ActorsConfig) -> None:
    if a.kind == "ray":  # checked before the run folder is made, not at the first actor
        require("ray", "actors.kind = ray", instead="actors.kind = process")


def held_noise_allowed(c: DQNConfig) -> bool:
    """Whether `network.noise_refresh: update` is allowed (`_check_held_noise`): then it is also the default."""
    return c.network.noisy and c.actors.kind == "inline" and c.compute.act_device != "cpu"
