"""N Atari games stepped together by ale-py's C++ emulator threads, playing what `make_env`'s env plays."""

from __future__ import annotations

import time

import ale_py
import gymnasium
import numpy as np
from ale_py.vector_env import AtariVectorEnv

from tfdqn.config import EnvConfig
from tfdqn.envs.names import resolve_env_id
from tfdqn.envs.seeds import env_seeds
from tfdqn.envs.spec import VectorStep

NOOP = 0


def ale_game_name(env_id: str) -> str:
    """"ALE/MsPacman-v5" -> "ms_pacman": the ROM name AtariVectorEnv takes, as the id registers it (so
    "BreakoutNoFrameskip-v4" -> "breakout", "ALE/TicTacToe3D-v5" -> "tic_tac_toe_3d")."""
    return gymnasium.spec(env_id).kwargs["game"]


class AtariVector:
    """N Atari games, each in an ale-py `AtariVectorEnv` of one env (its own C++ thread), stepped together
    with `send` to all, then `recv` from all.

    One vector of N cannot step some of its envs alone, and the wrappers' own presses need that: like
    `make_env`'s env (LifeLossTerminal + FireOnReset), every new game starts with a FIRE agent step, and a
    lost life that is terminal for learning continues the game with a NOOP then a FIRE step; these steps
    are no agent decisions (their rewards count in the game's return, their steps in its length, not in
    `VectorStep.reward`). A game that ends (or hits the frame cap) is reset by ALE in the same step.

    It plays `make_env`'s protocol (tests/test_envs_agreement.py, tests/test_envs_protocol.py): a no-op
    start of 0..noop_max NOOP emulator frames (ale-py draws 0..n-1; it is given n = noop_max + 1) and the
    frame cap counted after it. What differs, by ale-py's C++ env: the no-op counts come from another
    random stream, and ALE's own seed is the env's seed itself (gymnasium's ALE env derives one from it).
    With `noop_max=0` and no sticky actions both play frame for frame the same game.

    Env i is seeded `env_seed(seed, i)`, not ale-py's `seed + i` (which an int seed would give).
    `num_threads`: at most this many emulators step at once (0: all of them, each in its own C++ thread;
    the OS shares the cores, which was faster than waves of one per core).
    """

    def __init__(self, config: EnvConfig, num_envs: int, seed: int, num_threads: int = 0):
        game = ale_game_name(resolve_env_id(config.id))
        self._envs = [AtariVectorEnv(
            game, 1, num_threads=1, stack_num=1, img_height=config.screen_size, img_width=config.screen_size,
            frameskip=config.frame_skip, noop_max=config.noop_max + 1 if config.noop_max else 0,
            use_fire_reset=False, repeat_action_probability=config.repeat_action_probability,
            reward_clipping=False, max_num_frames_per_episode=config.max_episode_frames, episodic_life=False,
            life_loss_info=config.terminal_on_life_loss, autoreset_mode="SameStep") for _ in range(num_envs)]
        action_set = self._envs[0].ale.get_action_set()
        self._fire = action_set.index(ale_py.Action.FIRE) \
            if config.fire_on_reset and ale_py.Action.FIRE in action_set else None
        self._continue_lives = config.terminal_on_life_loss
        self._delay = config.step_delay_ms / 1000.0  # once per vector step: the emulators' waits overlap
        self._wave = num_threads if num_threads > 0 else num_envs
        self.num_envs = num_envs
        self._first_seeds = env_seeds(seed, num_envs)
        self._returns = np.zeros(num_envs)
        self._lengths = np.zeros(num_envs, np.int64)
        self._lives = np.zeros(num_envs, np.int64)
        self._frame_numbers = np.zeros(num_envs, np.int64)
        self._total_frames = np.zeros(num_envs, np.int64)
        self._frames = None  # [N, H, W]: each env's latest frame
        self._games = []

    @property
    def frame_numbers(self) -> np.ndarray:
        """[N]: ALE's emulator frame count of each env since it was made (`info["frame_number"]`); less
        `episode_frame_numbers` after a game ended, it is the ended game's frame count."""
        return self._total_frames.copy()

    @property
    def episode_frame_numbers(self) -> np.ndarray:
        """[N]: ALE's emulator frame count of each env's current game (its no-op start included)."""
        return self._frame_numbers.copy()

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Starts new games: env i seeded `env_seed(seed, i)`, or with the constructor's seed on the first
        reset, or not reseeded. Each game starts as `make_env`'s does: no-op start, then FIRE."""
        seeds = env_seeds(seed, self.num_envs) if seed is not None else self._first_seeds or [-1] * self.num_envs
        self._first_seeds = None
        frames = []
        for i, (env, env_seed) in enumerate(zip(self._envs, seeds)):
            observation, info = env.reset(seed=np.array([env_seed]))
            frames.append(observation[0, 0])
            self._lives[i], self._frame_numbers[i] = info["lives"][0], info["episode_frame_number"][0]
            self._total_frames[i] = info["frame_number"][0]
        self._frames = np.stack(frames)
        self._returns[:], self._lengths[:] = 0.0, 0
        if self._fire is not None:
            self._run(np.arange(self.num_envs), self._fire)
        self._games = []  # a game that ended within the FIRE (an absurd frame cap) is not one the loop played
        return self._frames.copy()

    def step(self, actions: np.ndarray) -> VectorStep:
        if self._delay:
            time.sleep(self._delay)
        everyone = np.arange(self.num_envs)
        reward, terminated, truncated, final_frames, new_game = self._run(everyone, np.asarray(actions))
        # The wrappers' own steps: NOOP where a lost life goes on, then FIRE there and in every new game.
        lost_life = terminated & ~new_game if self._continue_lives else np.zeros_like(terminated)
        self._run(everyone[lost_life], NOOP)
        if self._fire is not None:
            self._run(everyone[lost_life | new_game], self._fire)
        games, self._games = self._games, []
        return VectorStep(self._frames.copy(), reward.astype(np.float32), terminated, truncated, final_frames, games)

    def _run(self, indices: np.ndarray, actions) -> tuple:
        """Steps envs `indices` by one agent step (`actions`: one per env, or one for all), at most
        `num_threads` emulators at once; keeps their latest frames, game returns and lengths, and records
        the whole games that ended. Returns their rewards, flags, final frames and where a new game began."""
        actions = np.broadcast_to(np.asarray(actions, np.int32), indices.shape)
        results = []
        for start in range(0, len(indices), self._wave):
            wave = range(start, min(start + self._wave, len(indices)))
            for k in wave:
                self._envs[indices[k]].send(actions[k:k + 1])
            results += [self._envs[indices[k]].recv() for k in wave]
        reward = np.array([float(r[1][0]) for r in results])
        terminated = np.array([bool(r[2][0]) for r in results], bool)
        truncated = np.array([bool(r[3][0]) for r in results], bool)
        final_frames = np.empty((len(indices), *self._frames.shape[1:]), np.uint8)
        new_game = np.zeros(len(indices), bool)
        for k, (i, (observation, _, _, _, info)) in enumerate(zip(indices, results)):
            new_game[k] = self._account(i, reward[k], terminated[k], truncated[k], info)
            # ALE's final_obs is the ended game's last frame; where a life ended without a new game (or
            # nothing ended) the frame that followed the step is the current one.
            final_frames[k] = info["final_obs"][0, 0] if new_game[k] else observation[0, 0]
            self._frames[i] = observation[0, 0]
        return reward, terminated, truncated, final_frames, new_game

    def _account(self, i: int, reward: float, terminated: bool, truncated: bool, info: dict) -> bool:
        """Counts one step into env i's game; records the game if ALE reset it (returned)."""
        lives, frame_number = int(info["lives"][0]), int(info["episode_frame_number"][0])
        # ALE resets a game that is over or capped: its lives come back, its frame count starts anew.
        # A lost life without a new game lowers the lives while the frames go on.
        new_game = truncated or (terminated and (lives >= self._lives[i] or frame_number < self._frame_numbers[i]))
        self._lives[i], self._frame_numbers[i] = lives, frame_number
        self._total_frames[i] = info["frame_number"][0]
        self._returns[i] += reward
        self._lengths[i] += 1
        if new_game:
            self._games.append((int(i), float(self._returns[i]), int(self._lengths[i])))
            self._returns[i], self._lengths[i] = 0.0, 0
        return new_game

    def close(self) -> None:
        for env in self._envs:
            env.close()
