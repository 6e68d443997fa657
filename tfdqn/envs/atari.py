"""Atari (ALE) envs for one env: ALE settings, gymnasium's AtariPreprocessing and tfdqn's life/FIRE wrappers.

What the env does, in emulator frames (ALE's own counter, `info["episode_frame_number"]`):

- a new game: ALE's reset, then the no-op start (`NoopStart`): 0..noop_max (uniform, from the env's
  seeded `np_random`) NOOP EMULATOR FRAMES, not agent steps (gymnasium steps the ALE env with
  frameskip=1); `noop_max=0`: none. These frames are no agent steps: they are not in the episode length
  `l`, nor in the frame cap. ale-py's vector env (`atari_vector`) plays the same protocol.
- every agent step: the action repeated for `frame_skip` frames (sticky with `repeat_action_probability`
  per frame), the frame max-pooled over the last two, grayscale, resized to `screen_size` (INTER_AREA).
- FIRE (`fire_on_reset`, games with FIRE): one agent step of FIRE after every reset, as the wrappers' own
  step inside `reset()`: never inside an agent's step, so every agent step is exactly one action.
- a lost life (`terminal_on_life_loss`): the step returns `terminated=True` with `game_over` False; the
  next `reset()` continues the game with one NOOP agent step, then the FIRE step. Training and evaluation
  envs are built alike: the agent is evaluated on the game it trained on, and whole-game returns come from
  `info["episode"]`. Without `terminal_on_life_loss` the agent presses FIRE itself after a lost life
  (ALE v5's protocol; a stalled game runs into the frame cap).
- the frame cap (`max_episode_frames`) truncates the game that many emulator frames after the no-op
  start, as Dopamine's runner counts its cap from the first agent step after its no-ops (Machado et al.
  2018 play no no-ops, so there the cap counts from the reset alike).
"""

from __future__ import annotations

import gymnasium
import numpy as np

from tfdqn.config import EnvConfig
from tfdqn.envs.spec import EnvSpec
from tfdqn.envs.wrappers import GameOverInfo, SeedOnFirstReset

NOOP = 0


class NoopStart(gymnasium.Wrapper):
    """The no-op start and the frame cap on ALE's one-frame steps (inside AtariPreprocessing), as ale-py's
    vector env plays them: 0..noop_max NOOP frames after every reset, and `truncated` once the game has
    run `max_frames` emulator frames after them (ALE's `info["episode_frame_number"]` counts both)."""

    def __init__(self, env: gymnasium.Env, noop_max: int, max_frames: int):
        super().__init__(env)
        self._noop_max, self._max_frames = noop_max, max_frames
        self._start_frame = 0

    def reset(self, *, seed=None, options=None):
        observation, info = self.env.reset(seed=seed, options=options)
        noops = int(self.env.unwrapped.np_random.integers(0, self._noop_max + 1)) if self._noop_max else 0
        for _ in range(noops):
            observation, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:  # no game ends within 30 frames; a new one would start here
                observation, info = self.env.reset(options=options)
        self._start_frame = info["episode_frame_number"]
        return observation, info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        capped = info["episode_frame_number"] - self._start_frame >= self._max_frames
        return observation, reward, terminated, bool(truncated or capped), info


class LifeLossTerminal(gymnasium.Wrapper):
    """A lost life ends the episode for learning, not the game (OpenAI Baselines' EpisodicLifeEnv).

    The step that loses a life returns `terminated=True` (with `info["game_over"]` False). The reset after
    it continues the same game with one NOOP step for a fresh frame; any other reset restarts the game.
    If that NOOP ends the game (the frame cap), the reset starts a new one and its info carries the ended
    game's `episode`.
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
            observation, _, terminated, truncated, info = self.env.step(NOOP)
            if not (terminated or truncated):
                return observation, info
            # The NOOP ended the game (frame cap): pass its whole-game statistics on, then start anew.
            return _restart(self.env, info, options)
        self._continue_game = False
        return self.env.reset(seed=seed, options=options)


class FireOnReset(gymnasium.Wrapper):
    """Presses FIRE once after every reset (OpenAI Baselines' FireResetEnv), for games that need it to start.

    Outside LifeLossTerminal, so a life continued by a reset starts with FIRE too. FIRE is never pressed
    inside a step: every agent step is one action. A whole game that ended inside the reset (the frame
    cap hit by a wrapper's own step) keeps its `info["episode"]` in the info the reset returns.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self._fire = list(env.unwrapped.get_action_meanings()).index("FIRE")

    def reset(self, *, seed=None, options=None):
        _, reset_info = self.env.reset(seed=seed, options=options)
        observation, _, terminated, truncated, info = self.env.step(self._fire)
        if terminated or truncated:  # only with an absurdly small frame cap
            return _restart(self.env, info, options)
        if "episode" in reset_info:
            info["episode"] = reset_info["episode"]
        return observation, info


def _restart(env: gymnasium.Env, ended_info: dict, options) -> tuple:
    """A real reset after a wrapper's own step ended the game; the ended game's `episode` rides along."""
    observation, info = env.reset(options=options)
    if "episode" in ended_info:
        info["episode"] = ended_info["episode"]
    return observation, info


def atari_make_kwargs(config: EnvConfig) -> dict:
    """gymnasium.make's ALE settings: one emulator frame per env step (AtariPreprocessing skips frames), and
    no frame cap of ALE's own, which would count the no-op start (`NoopStart` caps the game)."""
    return dict(frameskip=1, repeat_action_probability=config.repeat_action_probability, full_action_space=False,
                max_num_frames_per_episode=0)  # ALE: 0 is no cap (the v5 ids register 108000)


def uses_fire(config: EnvConfig, action_meanings) -> bool:
    """Whether the wrappers press FIRE after each reset: asked for, and the game has FIRE."""
    return bool(config.fire_on_reset and action_meanings and "FIRE" in action_meanings)


def wrap_atari(env: gymnasium.Env, config: EnvConfig, env_id: str, seed: int) -> tuple[gymnasium.Env, EnvSpec]:
    """The ALE env `env` (made with `atari_make_kwargs`) wrapped as the module docstring says, and its spec."""
    meanings = tuple(env.unwrapped.get_action_meanings())
    env = gymnasium.wrappers.AtariPreprocessing(
        NoopStart(env, config.noop_max, config.max_episode_frames), noop_max=0, frame_skip=config.frame_skip, screen_size=config.screen_size,
        terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
    env = gymnasium.wrappers.RecordEpisodeStatistics(env)
    env = GameOverInfo(env)
    if config.terminal_on_life_loss:
        env = LifeLossTerminal(env)
    if uses_fire(config, meanings):
        env = FireOnReset(env)
    env = SeedOnFirstReset(env, seed)
    frame_shape = (config.screen_size, config.screen_size)
    stack = config.frame_stack
    spec = EnvSpec(env_id=env_id, is_atari=True, frame_shape=frame_shape, frame_dtype=np.dtype(np.uint8),
                   stack_size=stack, observation_shape=(stack, *frame_shape) if stack > 1 else frame_shape,
                   num_actions=int(env.action_space.n), action_meanings=meanings)
    return env, spec


def describe_atari(config: EnvConfig, spec: EnvSpec) -> list[str]:
    """The Atari parts of `describe_protocol`'s line: what `make_env`'s env and `AtariVector` both play."""
    n = config.noop_max
    parts = [f"no-op start of 0-{n} emulator frames" if n else "no no-op start"]
    p = config.repeat_action_probability
    parts.append(f"sticky actions p={p:g}" if p else "no sticky actions")
    parts.append(f"frame skip {config.frame_skip} (max-pooled)" if config.frame_skip > 1 else "no frame skip")
    parts.append(f"{config.screen_size}x{config.screen_size} grayscale")
    parts.append(f"stack {spec.stack_size}")
    fire = uses_fire(config, spec.action_meanings)
    if fire:
        parts.append("FIRE after each new game")
    if config.terminal_on_life_loss:
        parts.append("a lost life is terminal for learning, returns are whole games (the game goes on: NOOP"
                     + (" then FIRE)" if fire else ")"))
    parts.append(f"games capped at {config.max_episode_frames} emulator frames"
                 + (" after the no-op start" if n else ""))
    return parts
