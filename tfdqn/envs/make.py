"""`make_env`: the env for a config and the small spec the rest of tfdqn needs, and the protocol line.

`make_env` returns an env that yields SINGLE frames (stacking lives in `tfdqn.replay.frame_stack`, shared by the
actor and the replay) and always follows the gymnasium 5-tuple API. The info keys the loop may rely on:

- every step, every env: `info["game_over"]` (bool), True when the whole game ended on this step (the
  game's own terminal or a time/frame-cap truncation); the next `reset()` then starts a new game.
- exactly on the steps where `game_over` is True: `info["episode"] = {"r": raw return, "l": length in
  agent steps, "t": seconds}` for the whole game (gymnasium's RecordEpisodeStatistics). For Atari, `l`
  also counts the agent steps the wrappers take themselves (the FIRE after each reset, the NOOP of each
  continuing reset), as OpenAI Baselines' Monitor does; `l * frame_skip` is the game's emulator frames
  after the no-op start. A `reset()`'s info carries `episode` too where a game ended inside the reset
  (a wrapper's own step hit the frame cap).
- Atari, every step: `info["lives"]` (int) and `info["life_lost"]` (bool).

Atari (`tfdqn.envs.atari` has the details): with `terminal_on_life_loss` a lost life returns
`terminated=True` with `game_over=False`, and the following `reset()` continues the same game; evaluation
envs are built exactly like training envs, so whole games are told by `game_over`/`episode`, not by
`terminated`. Seeds: the env seeds itself with `seed` on its first reset; which seeds evaluation envs get
is the caller's choice.

The module's names are split by job: `names` (env ids), `spec` (EnvSpec), `wrappers` (every env's
wrappers), `atari` (Atari wrappers and settings); they stay importable from here.
"""

from __future__ import annotations

import gymnasium
import numpy as np

from tfdqn.config import EnvConfig
from tfdqn.envs.atari import FireOnReset, LifeLossTerminal, atari_make_kwargs, describe_atari, wrap_atari
from tfdqn.envs.names import implied_settings, is_atari_id, resolve_env_id
from tfdqn.envs.observation_layout import MASK, make_layout, mask_source
from tfdqn.envs.spec import EnvSpec
from tfdqn.envs.wrappers import (ChannelsFirst, EncodedObservation, Float32Observation, GameOverInfo,
                                 SeedOnFirstReset, StepCap, StepDelay, image_layout)
from tfdqn.errors import UserError

__all__ = ["EnvSpec", "make_env", "describe_protocol", "resolve_env_id", "is_atari_id", "GameOverInfo",
           "LifeLossTerminal", "FireOnReset", "SeedOnFirstReset", "Float32Observation"]


def _describe_space(space) -> str:
    if isinstance(space, gymnasium.spaces.Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, gymnasium.spaces.Box):
        return f"Box(shape={space.shape}, dtype={space.dtype})"
    return " ".join(type(space).__name__.split())


def _make_base(env_id: str, user_kwargs: dict, **kwargs) -> gymnasium.Env:
    """gymnasium.make with the user's `env.kwargs` and tfdqn's own `kwargs`, passing render_mode only when
    rendering: users' own envs need not take it. A keyword tfdqn sets itself (Atari's protocol, which env.*
    keys set) is refused, as is one the env does not take."""
    if kwargs.get("render_mode", "") is None:
        del kwargs["render_mode"]
    if clash := sorted(set(user_kwargs) & set(kwargs)):
        raise UserError(f"env.kwargs.{clash[0]} is set by tfdqn for {env_id}; allowed: other keyword arguments "
                        f"(the env's protocol is set by env.* keys: tfdqn train --help)")
    try:
        return gymnasium.make(env_id, **user_kwargs, **kwargs)
    except (gymnasium.error.DependencyNotInstalled, ImportError) as e:
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UserError(f"env {env_id} cannot be made here: {first_line}; allowed: envs whose "
                        f"dependencies are installed (CartPole-v1, Acrobot-v1, any ALE game)") from None
    except TypeError as e:
        if not user_kwargs:
            raise
        given = ", ".join(f"{name}={value!r}" for name, value in user_kwargs.items())
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0].split(" was raised from")[0]
        raise UserError(f"env {env_id} does not take env.kwargs {given}: {first_line}; allowed: the keyword "
                        f"arguments its constructor takes") from None


def make_env(config: EnvConfig, seed: int, evaluation: bool = False,
             render: bool = False) -> tuple[gymnasium.Env, EnvSpec]:
    """The env for `config.id` and its spec; the env seeds itself with `seed` on its first reset.

    `render=True` makes `env.render()` return the current RGB screen (for videos; Atari: the raw 210x160
    screen, not the preprocessed frame).

    Atari: sticky actions in ALE, a no-op start of 0..noop_max emulator frames and the frame cap counted
    after it (`atari.NoopStart`, as ale-py's vector env plays them), AtariPreprocessing (frame skip with
    max over the last two frames, square grayscale uint8 frames), whole-game episode statistics, a life-loss terminal and FIRE after each reset (`tfdqn.envs.atari`).
    The sticky-action probability and frame skip are `config`'s: `config.resolve_config` sets them from
    what the id implies (`names.implied_settings`) unless the user set them; an id that skips a random
    number of frames is refused, since the wrapper's fixed skip would replace its protocol.
    `evaluation` changes nothing: evaluation envs are training envs, so the agent is evaluated on the game
    it trained on (the caller tells whole games by `info["game_over"]`). Other envs: a Discrete action space
    is required; a uint8 image Box (`wrappers.image_layout`) stays uint8, [H, W, C] turned to [C, H, W], and is
    stacked `config.frame_stack` deep; any other Box is cast to float32; any other observation, or one with a
    legal-action mask (`config.action_mask`), becomes a byte frame (`observation_layout`), unstacked.
    """
    del evaluation  # kept for callers; see the docstring
    env, spec = _make_wrapped(config, seed, render)
    if config.step_delay_ms > 0:
        env = StepDelay(env, config.step_delay_ms)
    return env, spec


def _make_wrapped(config: EnvConfig, seed: int, render: bool) -> tuple[gymnasium.Env, EnvSpec]:
    env_id = resolve_env_id(config.id)
    render_mode = "rgb_array" if render else None
    if is_atari_id(env_id):
        implied_settings(env_id)  # refuses an id with a random frame skip, which the fixed skip would replace
        return wrap_atari(_make_base(env_id, config.kwargs.as_dict(), render_mode=render_mode,
                                     **atari_make_kwargs(config)), config, env_id, seed)
    env = _make_base(env_id, config.kwargs.as_dict(), render_mode=render_mode)
    if not isinstance(env.action_space, gymnasium.spaces.Discrete):
        env.close()
        raise UserError(f"env {env_id} has action space {_describe_space(env.action_space)}; allowed: "
                        f"a Discrete action space (DQN picks one of n actions), e.g. CartPole-v1 or an ALE game")
    if render:
        _check_render(env, env_id)
    try:
        source = mask_source(env.observation_space, _probe_info(env, config.action_mask), config.action_mask)
        layout = None
        if source is not None or not isinstance(env.observation_space, gymnasium.spaces.Box):
            layout = make_layout(env.observation_space, int(env.action_space.n), source)
    except UserError as error:
        env.close()
        raise UserError(f"env {env_id}: {error}") from None
    if layout is not None:
        if config.frame_stack > 1:
            env.close()
            boxed = layout.nesting == "single" and all(part.kind in ("box", "image") for part in layout.inputs)
            raise UserError(f"env.frame_stack = {config.frame_stack} stacks frames of one Box observation; {env_id}'s "
                            f"observations {'carry a legal-action mask' if boxed else 'are not one Box'}; allowed: 1 "
                            f"(or a wrapper that stacks inside the env)")
        return _finish(EncodedObservation(env, layout), config, env_id, seed, layout=layout)
    return _finish(env, config, env_id, seed, image_layout(env.observation_space))


def _probe_info(env: gymnasium.Env, setting: str) -> dict:
    """A reset's info, where the mask setting may read it (the env's first real reset reseeds it)."""
    space = env.observation_space
    if setting == "none" or setting.startswith("observation:") or (
            setting == "auto" and isinstance(space, gymnasium.spaces.Dict) and MASK in space.spaces):
        return {}
    return env.reset()[1]


def _finish(env: gymnasium.Env, config: EnvConfig, env_id: str, seed: int, image: str | None = None,
            layout=None) -> tuple[gymnasium.Env, EnvSpec]:
    """The wrappers every non-Atari env ends with, and its spec: vectors as float32, images channels first
    and stacked `config.frame_stack` deep, byte frames (`layout`) as they are."""
    if image is None and layout is None:
        env = Float32Observation(env)
    elif image == "hwc":
        env = ChannelsFirst(env)
    if own_time_limit(env) is None and config.max_episode_steps > 0:
        env = StepCap(env, config.max_episode_steps)
    env = gymnasium.wrappers.RecordEpisodeStatistics(env)
    env = GameOverInfo(env)
    env = SeedOnFirstReset(env, seed)
    frame_shape = tuple(env.observation_space.shape)
    stack = config.frame_stack if image else 1
    spec = EnvSpec(env_id=env_id, is_atari=False, frame_shape=frame_shape,
                   frame_dtype=np.dtype(np.uint8 if image or layout else np.float32), stack_size=stack,
                   observation_shape=(stack, *frame_shape) if stack > 1 else frame_shape,
                   num_actions=int(env.action_space.n), action_meanings=None, env_channels_last=image == "hwc",
                   layout=layout)
    return env, spec


def own_time_limit(env: gymnasium.Env) -> int | None:
    """The step limit the env was made with (its registration's or env.kwargs' max_episode_steps), else None."""
    spec = getattr(env, "spec", None)
    return getattr(spec, "max_episode_steps", None)


def _check_render(env: gymnasium.Env, env_id: str) -> None:
    """Fail now, in one line, if rendering needs a missing package (classic control needs pygame).

    The probe reset is harmless: the env's first real reset reseeds it.
    """
    try:
        env.reset()
        env.render()
    except gymnasium.error.DependencyNotInstalled as e:
        env.close()
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UserError(f"env {env_id} cannot render here: {first_line}; allowed: no video, "
                        f"or an ALE game (rendered by ale-py)") from None


def describe_images(spec: EnvSpec) -> str:
    """How an image env's frames are kept: their shape and order as the env gives them, and the stack."""
    shape = spec.frame_shape
    if len(shape) == 2:
        given = f"{shape[0]}x{shape[1]} grey"
    elif spec.env_channels_last:
        given = f"{shape[1]}x{shape[2]}x{shape[0]} (HWC, stored channels first)"
    else:
        given = f"{shape[0]}x{shape[1]}x{shape[2]} (CHW)"
    stack = f", stack {spec.stack_size}" if spec.stack_size > 1 else ""
    return f"uint8 image frames {given}{stack}"


def describe_protocol(config: EnvConfig, spec: EnvSpec, epsilon: float) -> str:
    """One line that states how evaluation returns were produced (by `make_env`'s env), to print beside them."""
    parts = [f"protocol: {spec.env_id}", f"epsilon {epsilon:g}"]
    if config.kwargs:
        parts[0] += "(" + ", ".join(f"{name}={value!r}" for name, value in config.kwargs.as_dict().items()) + ")"
    if not spec.is_atari:
        if spec.layout is not None:
            parts.append(spec.layout.describe() + ("" if config.mask_actions or not spec.layout.mask_source
                                                   else " (read only, to count illegal actions)"))
        elif spec.frame_dtype == np.uint8:
            parts.append(describe_images(spec))
        steps = config.kwargs.as_dict().get("max_episode_steps", gymnasium.spec(spec.env_id).max_episode_steps)
        parts.append(f"episodes capped at {steps} steps (TimeLimit)" if steps else
                     f"no time limit of its own: episodes capped at {config.max_episode_steps} steps "
                     f"(env.max_episode_steps), a capped one counted as truncated" if config.max_episode_steps else
                     "no time limit")
        return ", ".join(parts)
    return ", ".join(parts + describe_atari(config, spec))
