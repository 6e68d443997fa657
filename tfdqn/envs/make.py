"""Environments: short names to gymnasium ids, Atari preprocessing, and a small spec for the rest of tfdqn.

`make_env` returns an env that yields SINGLE frames (stacking lives in `tfdqn.replay.frame_stack`, shared by the
actor and the replay) and always follows the gymnasium 5-tuple API. The info keys the loop may rely on:

- every step, every env: `info["game_over"]` (bool), True when the whole game ended on this step (the
  game's own terminal or a time/frame-cap truncation); the next `reset()` then starts a new game.
- exactly on the steps where `game_over` is True: `info["episode"] = {"r": raw return, "l": length in
  agent steps, "t": seconds}` for the whole game (gymnasium's RecordEpisodeStatistics). For Atari, `l`
  also counts the agent steps the wrappers take themselves (the FIRE after each reset or lost life, the
  NOOP of each continuing reset), as OpenAI Baselines' Monitor does; `l * frame_skip` is the game's
  emulator frames after the no-op start.
- Atari, every step: `info["lives"]` (int) and `info["life_lost"]` (bool).

Atari in training (`evaluation=False`, `terminal_on_life_loss`): a lost life returns `terminated=True`
with `game_over=False`, and the following `reset()` continues the same game. In evaluation episodes are
whole games. Seeds: the env seeds itself on its first reset; give evaluation envs a seed stream apart from
the training envs' (e.g. `seed + 10_000`), so that evaluation games are not replays of training games.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import re

import ale_py
import gymnasium
import numpy as np

from tfdqn.config import EnvConfig
from tfdqn.errors import UserError

gymnasium.register_envs(ale_py)
# ALE prints a two-line banner to stderr on its first env unless told to log errors only; the command
# lines promise one stderr line per error.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)

_VERSIONED = re.compile(r"-v\d+$")


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """What the rest of tfdqn needs to know about an env, without holding the env."""

    env_id: str  # resolved gymnasium id, e.g. "CartPole-v1", "ALE/Breakout-v5"
    is_atari: bool
    frame_shape: tuple  # shape of ONE frame the env returns: (84, 84) for Atari, the obs shape otherwise
    frame_dtype: np.dtype  # uint8 for Atari, float32 for vector observations
    stack_size: int  # frames per network input: config.frame_stack for Atari, 1 otherwise
    observation_shape: tuple  # what the network sees: (stack_size, *frame_shape), or frame_shape if stack_size 1
    num_actions: int
    action_meanings: tuple | None  # Atari only, e.g. ("NOOP", "FIRE", "RIGHT", "LEFT")


# --------------------------------------------------------------------------------------------- names

def _normalise(name: str) -> str:
    """`Space_Invaders`, `space-invaders`, `SpaceInvaders` -> `spaceinvaders`."""
    return re.sub(r"[\s_\-]", "", name).lower()


def is_atari_id(env_id: str) -> bool:
    entry_point = gymnasium.spec(env_id).entry_point
    return isinstance(entry_point, str) and entry_point.startswith("ale_py")


@functools.lru_cache(maxsize=1)
def _name_tables() -> tuple[dict, dict, dict, list, list]:
    """Lookup tables over gymnasium's registry, built once.

    Returns (ids by lower-case id, ALE ids by normalised game name, newest id by normalised bare name,
    ALE game names for messages, non-Atari short names for messages).
    """
    ids_lower, ale_games, newest, versions = {}, {}, {}, {}
    for env_id, spec in gymnasium.registry.items():
        ids_lower[env_id.lower()] = env_id
        bare = f"{spec.namespace}/{spec.name}" if spec.namespace else spec.name
        version = spec.version if spec.version is not None else -1
        key = _normalise(bare)
        if version >= versions.get(key, -2):
            versions[key], newest[key] = version, env_id
        if spec.namespace == "ALE":
            ale_games.setdefault(_normalise(spec.name), {})[version] = (spec.name, env_id)
    games = {key: by_version[max(by_version)] for key, by_version in ale_games.items()}
    ale_ids = {key: env_id for key, (_, env_id) in games.items()}
    game_names = sorted(name for name, _ in games.values())
    short_names = sorted({spec.name for spec in gymnasium.registry.values()
                          if spec.namespace is None and not is_atari_id(spec.id)})
    return ids_lower, ale_ids, newest, game_names, short_names


def resolve_env_id(name: str) -> str:
    """A short name, ALE game name or gymnasium id to a registered gymnasium id.

    `CartPole` -> `CartPole-v1`, `Acrobot` -> `Acrobot-v1` (newest registered version), `Breakout`,
    `breakout`, `space_invaders` -> `ALE/<Game>-v5`; registered ids (`CartPole-v1`, `ALE/Pong-v5`,
    `BreakoutNoFrameskip-v4`) are returned as they are. `module:EnvId` imports `module` first, which
    registers a user's own env (gymnasium's convention). Anything else raises a one-line UserError.
    """
    text = str(name).strip()
    if ":" in text:
        module, _, text = text.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise UserError(f"env {name!r}: module {module!r} cannot be imported ({error}); allowed: "
                            f"module:EnvId with an importable module that registers EnvId") from None
    ids_lower, ale_ids, newest, game_names, short_names = _name_tables()
    if text in gymnasium.registry:
        return text
    if text.lower() in ids_lower:
        return ids_lower[text.lower()]
    if _VERSIONED.search(text):
        if f"ale/{text.lower()}" in ids_lower:  # `Breakout-v5` -> `ALE/Breakout-v5`
            return ids_lower[f"ale/{text.lower()}"]
    elif text:
        key = _normalise(text)
        game_key = key[len("ale/"):] if key.startswith("ale/") else key
        if game_key in ale_ids:
            return ale_ids[game_key]
        if key in newest:
            return newest[key]
    # One line: the bad value, the closest allowed name, and what is allowed.
    candidates = {_normalise(n): n for n in game_names + short_names}
    candidates.update({_normalise(i): i for i in ids_lower.values()})
    close = difflib.get_close_matches(_normalise(text), list(candidates), n=1, cutoff=0.75)
    hint = f"; did you mean {candidates[close[0]]}?" if close else ";"
    raise UserError(f"unknown env {name!r}{hint} allowed: a gymnasium id (CartPole-v1, Acrobot-v1, "
                    f"MountainCar-v0, ...) or an ALE game name (Breakout, Pong, SpaceInvaders, ... "
                    f"{len(game_names)} games)")


# ------------------------------------------------------------------------------------------ wrappers

class GameOverInfo(gymnasium.Wrapper):
    """Puts `game_over` (and for Atari `lives`, `life_lost`) in every step's info.

    Sits right outside RecordEpisodeStatistics, so `game_over` is True exactly when `episode` is present.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self._lives = None

    def reset(self, *, seed=None, options=None):
        observation, info = self.env.reset(seed=seed, options=options)
        self._lives = info.get("lives")
        info["game_over"] = False
        if self._lives is not None:
            info["life_lost"] = False
        return observation, info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        info["game_over"] = bool(terminated or truncated)
        if "lives" in info:
            lives = int(info["lives"])
            info["life_lost"] = self._lives is not None and lives < self._lives
            self._lives = lives
        return observation, reward, terminated, truncated, info


class LifeLossTerminal(gymnasium.Wrapper):
    """Training only: a lost life ends the episode for learning, not the game (OpenAI Baselines' EpisodicLifeEnv).

    The step that loses a life returns `terminated=True` (with `info["game_over"]` False). The reset after
    it continues the same game with one NOOP step for a fresh frame; any other reset restarts the game.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self._continue_game = False

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._continue_game = info["life_lost"] and not info["game_over"]
        return observation, reward, bool(terminated or info["life_lost"]), truncated, info

    def reset(self, *, seed=None, options=None):
        if self._continue_game and seed is None:
            self._continue_game = False
            observation, _, terminated, truncated, info = self.env.step(0)  # NOOP
            if not (terminated or truncated):
                return observation, info
            # The NOOP ended the game (frame cap): pass its whole-game statistics on, then start anew.
            episode = info.get("episode")
            observation, info = self.env.reset(options=options)
            if episode is not None:
                info["episode"] = episode
            return observation, info
        self._continue_game = False
        return self.env.reset(seed=seed, options=options)


class FireOnReset(gymnasium.Wrapper):
    """Presses FIRE once after every reset (OpenAI Baselines' FireResetEnv), for games that need it to start.

    With `after_life_loss` (no LifeLossTerminal inside, e.g. evaluation) it also presses FIRE in the step
    that loses a life, so that a greedy agent that never chooses FIRE cannot stall the game.
    """

    def __init__(self, env: gymnasium.Env, after_life_loss: bool):
        super().__init__(env)
        self._fire = list(env.unwrapped.get_action_meanings()).index("FIRE")
        self._after_life_loss = after_life_loss

    def reset(self, *, seed=None, options=None):
        self.env.reset(seed=seed, options=options)
        observation, _, terminated, truncated, info = self.env.step(self._fire)
        if terminated or truncated:  # only with an absurdly small frame cap
            observation, info = self.env.reset(options=options)
        return observation, info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        if self._after_life_loss and info.get("life_lost") and not (terminated or truncated):
            observation, fire_reward, terminated, truncated, fire_info = self.env.step(self._fire)
            reward += fire_reward
            fire_info["life_lost"] = True
            info = {**info, **fire_info}
        return observation, reward, terminated, truncated, info


class Float32Observation(gymnasium.ObservationWrapper):
    """Vector observations as float32; unlike gymnasium's DtypeObservation it pickles, so a
    checkpoint can hold the env mid-episode and a resumed run continues it exactly."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gymnasium.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32),
                                                      space.shape, np.float32)

    def observation(self, observation):
        return np.asarray(observation, dtype=np.float32)


class SeedOnFirstReset(gymnasium.Wrapper):
    """Seeds the env with `reset(seed=seed)` on its first reset only, and its action space at once."""

    def __init__(self, env: gymnasium.Env, seed: int):
        super().__init__(env)
        self._seed = seed
        self.action_space.seed(seed)

    def reset(self, *, seed=None, options=None):
        if seed is None:
            seed = self._seed
        self._seed = None
        return self.env.reset(seed=seed, options=options)


# --------------------------------------------------------------------------------------------- make

def _describe_space(space) -> str:
    if isinstance(space, gymnasium.spaces.Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, gymnasium.spaces.Box):
        return f"Box(shape={space.shape}, dtype={space.dtype})"
    return " ".join(type(space).__name__.split())


def _make_base(env_id: str, **kwargs) -> gymnasium.Env:
    """gymnasium.make, passing render_mode only when rendering: users' own envs need not take it."""
    if kwargs.get("render_mode", "") is None:
        del kwargs["render_mode"]
    try:
        return gymnasium.make(env_id, **kwargs)
    except (gymnasium.error.DependencyNotInstalled, ImportError) as e:
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UserError(f"env {env_id} cannot be made here: {first_line}; allowed: envs whose "
                        f"dependencies are installed (CartPole-v1, Acrobot-v1, any ALE game)") from None


def make_env(config: EnvConfig, seed: int, evaluation: bool = False,
             render: bool = False) -> tuple[gymnasium.Env, EnvSpec]:
    """The env for `config.id` and its spec; the env seeds itself with `seed` on its first reset.

    `render=True` makes `env.render()` return the current RGB screen (for videos; Atari: the raw 210x160
    screen, not the preprocessed frame).

    Atari: sticky actions and a frame cap in ALE, AtariPreprocessing (no-op starts, frame skip with max
    over the last two frames, square grayscale uint8 frames), whole-game episode statistics, then for
    training a life-loss terminal and FIRE on reset. `evaluation=True` keeps whole games as episodes.
    Other envs: a Box observation (cast to float32) and a Discrete action space are required.
    """
    env_id = resolve_env_id(config.id)
    render_mode = "rgb_array" if render else None
    if is_atari_id(env_id):
        return _make_atari(config, env_id, seed, evaluation, render_mode)
    env = _make_base(env_id, render_mode=render_mode)
    if not isinstance(env.action_space, gymnasium.spaces.Discrete):
        env.close()
        raise UserError(f"env {env_id} has action space {_describe_space(env.action_space)}; allowed: "
                        f"a Discrete action space (DQN picks one of n actions), e.g. CartPole-v1 or an ALE game")
    if not isinstance(env.observation_space, gymnasium.spaces.Box):
        env.close()
        raise UserError(f"env {env_id} has observation space {_describe_space(env.observation_space)}; "
                        f"allowed: a Box observation space (a vector or an image)")
    if render:
        _check_render(env, env_id)
    env = Float32Observation(env)
    env = gymnasium.wrappers.RecordEpisodeStatistics(env)
    env = GameOverInfo(env)
    env = SeedOnFirstReset(env, seed)
    frame_shape = tuple(env.observation_space.shape)
    spec = EnvSpec(env_id=env_id, is_atari=False, frame_shape=frame_shape, frame_dtype=np.dtype(np.float32),
                   stack_size=1, observation_shape=frame_shape, num_actions=int(env.action_space.n),
                   action_meanings=None)
    return env, spec


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


def _make_atari(config: EnvConfig, env_id: str, seed: int, evaluation: bool,
                render_mode: str | None) -> tuple[gymnasium.Env, EnvSpec]:
    env = _make_base(env_id, render_mode=render_mode, frameskip=1, repeat_action_probability=config.repeat_action_probability,
                     full_action_space=False, max_num_frames_per_episode=config.max_episode_frames)
    meanings = tuple(env.unwrapped.get_action_meanings())
    env = gymnasium.wrappers.AtariPreprocessing(
        env, noop_max=config.noop_max, frame_skip=config.frame_skip, screen_size=config.screen_size,
        terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
    env = gymnasium.wrappers.RecordEpisodeStatistics(env)
    env = GameOverInfo(env)
    life_loss_terminal = config.terminal_on_life_loss and not evaluation
    if life_loss_terminal:
        env = LifeLossTerminal(env)
    if config.fire_on_reset and "FIRE" in meanings:
        env = FireOnReset(env, after_life_loss=not life_loss_terminal)
    env = SeedOnFirstReset(env, seed)
    frame_shape = (config.screen_size, config.screen_size)
    stack = config.frame_stack
    spec = EnvSpec(env_id=env_id, is_atari=True, frame_shape=frame_shape, frame_dtype=np.dtype(np.uint8),
                   stack_size=stack, observation_shape=(stack, *frame_shape) if stack > 1 else frame_shape,
                   num_actions=int(env.action_space.n), action_meanings=meanings)
    return env, spec


def describe_protocol(config: EnvConfig, spec: EnvSpec, epsilon: float) -> str:
    """One line that states how evaluation returns were produced, for printing beside them."""
    parts = [f"protocol: {spec.env_id}", f"epsilon {epsilon:g}"]
    if not spec.is_atari:
        steps = gymnasium.spec(spec.env_id).max_episode_steps
        parts.append(f"episodes capped at {steps} steps (TimeLimit)" if steps else "no time limit")
        return ", ".join(parts)
    parts.append(f"up to {config.noop_max} no-op starts" if config.noop_max else "no no-op starts")
    p = config.repeat_action_probability
    parts.append(f"sticky actions p={p:g}" if p else "no sticky actions")
    parts.append(f"frame skip {config.frame_skip} (max-pooled)" if config.frame_skip > 1 else "no frame skip")
    parts.append(f"{config.screen_size}x{config.screen_size} grayscale")
    parts.append(f"stack {spec.stack_size}")
    if config.fire_on_reset and spec.action_meanings and "FIRE" in spec.action_meanings:
        parts.append("fire on reset")
    parts.append(f"episodes capped at {config.max_episode_frames} frames")
    return ", ".join(parts)
