"""Whole-game evaluation episodes with a fixed epsilon; returns are raw (never clipped).

Every evaluation is seeded from the run's seed, its purpose and the env step it runs at, and draws its
random actions from the actor's evaluation RNG. So an evaluation depends only on the weights and
where it happens: it does not move training's random streams, and a resumed run replays none of the
games it evaluated before.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfdqn.agent.actor import Actor
from tfdqn.envs.make import EnvSpec, make_env
from tfdqn.envs.seeds import derive_seed
from tfdqn.replay.frame_stack import FrameStack

PERIODIC, FINAL = 1, 2  # seed streams of the periodic and the final evaluation


def evaluation_seed(seed: int, purpose: int, env_steps: int) -> int:
    """A 32-bit seed that no training env and no other evaluation of the run shares."""
    return derive_seed(seed, purpose, env_steps)


def run_episodes(env, spec: EnvSpec, actor: Actor, episodes: int, epsilon: float, seed: int | None = None,
                 on_step=None, should_stop=None) -> list[float]:
    """Play `episodes` whole games from a reset with `seed` and return their raw returns.

    The evaluation RNG is reseeded from `seed` too. `on_step(env, info)` is called after every step
    (video recording); `should_stop()` ends the evaluation early (a stop signal)."""
    if seed is not None:
        actor.evaluation_generator.reset_from_seed(seed)
    stack = FrameStack(1, spec.stack_size, spec.frame_shape, spec.frame_dtype)
    epsilon = tf.constant(epsilon, tf.float32)
    returns = []
    frame, _ = env.reset(seed=seed)
    stack.reset(0, frame)
    while len(returns) < episodes and not (should_stop and should_stop()):
        action = int(actor.act_with_epsilon(stack.observation, epsilon).numpy()[0])
        frame, _, terminated, truncated, info = env.step(action)
        if on_step is not None:
            on_step(env, info)
        if "episode" in info:
            returns.append(float(np.asarray(info["episode"]["r"]).item()))
        if terminated or truncated:
            frame, _ = env.reset()
            stack.reset(0, frame)
        else:
            stack.push(frame[None])
    return returns


class Evaluator:
    """Evaluates the actor in one evaluation env, built on first use and reused by every evaluation."""

    def __init__(self, env_config, spec: EnvSpec, actor: Actor, seed: int, epsilon: float, should_stop):
        self._env_config, self._spec, self._actor = env_config, spec, actor
        self._seed, self._epsilon, self._should_stop = seed, epsilon, should_stop
        self._env = None

    def evaluate(self, episodes: int, env_steps: int, purpose: int = PERIODIC) -> list[float]:
        """Raw returns of up to `episodes` games (fewer if a stop was requested meanwhile)."""
        seed = evaluation_seed(self._seed, purpose, env_steps)
        if self._env is None:
            self._env, _ = make_env(self._env_config, seed=seed, evaluation=True)
        return run_episodes(self._env, self._spec, self._actor, episodes, self._epsilon, seed=seed,
                            should_stop=self._should_stop)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
