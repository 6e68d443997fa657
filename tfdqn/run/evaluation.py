"""Whole-game evaluation episodes with a fixed epsilon; returns are raw (never clipped).

The run's own evaluations play their games side by side in a vector env (one act call per step for
all of them), so ten CartPole games cost about as many act calls as one; `run_episodes` plays one env
at a time for the evaluate command and videos. Every evaluation is seeded from the run's seed, its purpose and
the env step it runs at (`evaluation_seeds`: never a seed an earlier evaluation used), and draws its random
actions from the actor's evaluation RNG. So an evaluation depends only on the weights and where it happens: it
does not move training's random streams, and a resumed run replays none of the games it evaluated before.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfdqn.agent.actor import Actor
from tfdqn.envs.make import EnvSpec
from tfdqn.envs.vector import make_vector_env
from tfdqn.replay.frame_stack import FrameStack
from tfdqn.run.evaluation_seeds import PERIODIC, EvaluationSeeds

MAX_EVALUATION_ENVS = 16  # games played side by side; more episodes than this take turns


def play_steps(env, spec: EnvSpec, choose, seed: int | None = None):
    """Play one env from a reset with `seed`, each action `choose(observation)` on the stacked observation
    [1, *observation_shape]; yields (observation, info) after each step, the observation still the one the
    action was chosen on. A game's end resets the env and the stack (no frames across games)."""
    stack = FrameStack(1, spec.stack_size, spec.frame_shape, spec.frame_dtype)
    frame, _ = env.reset(seed=seed)
    stack.reset(0, frame)
    while True:
        observation = stack.observation
        frame, _, terminated, truncated, info = env.step(choose(observation))
        yield observation, info
        if terminated or truncated:
            frame, _ = env.reset()
            stack.reset(0, frame)
        else:
            stack.push(frame[None])


def run_episodes(env, spec: EnvSpec, actor: Actor, episodes: int, epsilon: float, seed: int | None = None,
                 on_step=None, should_stop=None, capped: list | None = None) -> list[float]:
    """Play `episodes` whole games from a reset with `seed` and return their raw returns.

    The evaluation RNG is reseeded from `seed` too. `on_step(env, info)` is called after every step
    (video recording); `should_stop()` ends the evaluation early (a stop signal); `capped`, where given, gets the
    index of each game `env.max_episode_steps` cut (`wrappers.StepCap`)."""
    if seed is not None:
        actor.evaluation_generator.reset_from_seed(seed)
    epsilon = tf.constant(epsilon, tf.float32)
    steps = play_steps(env, spec, lambda observation: int(actor.act_with_epsilon(observation, epsilon).numpy()[0]),
                       seed)
    returns = []
    while len(returns) < episodes and not (should_stop and should_stop()):
        _, info = next(steps)
        if on_step is not None:
            on_step(env, info)
        if "episode" in info:
            if capped is not None and info.get("step_capped"):
                capped.append(len(returns))
            returns.append(float(np.asarray(info["episode"]["r"]).item()))
    return returns


class IllegalActionActor:
    """An actor that also counts the actions it picks that the observations' legal-action masks forbid
    (`ObservationLayout.illegal`); everything else is the wrapped actor's."""

    def __init__(self, actor: Actor, layout):
        self._actor, self._layout, self.illegal = actor, layout, 0

    def act_with_epsilon(self, observation, epsilon):
        actions = self._actor.act_with_epsilon(observation, epsilon)
        self.illegal += self._layout.illegal(np.asarray(observation), actions.numpy())
        return actions

    def __getattr__(self, name):
        return getattr(self._actor, name)


def run_vector_episodes(vector, spec: EnvSpec, actor: Actor, episodes: int, epsilon: float, seed: int,
                        should_stop=None) -> list[float]:
    """Play `episodes` whole games on the envs of `vector`, reset with `seed`; raw returns, in the
    order the games ended. Env i counts its first `(episodes + i) // n` games only, so every env
    contributes a fixed share and short games are not over-represented."""
    actor.evaluation_generator.reset_from_seed(seed)
    n = vector.num_envs
    wanted = np.array([(episodes + i) // n for i in range(n)])
    played = np.zeros(n, dtype=int)
    stack = FrameStack(n, spec.stack_size, spec.frame_shape, spec.frame_dtype)
    stack.reset_all(vector.reset(seed=seed))
    epsilon = tf.constant(epsilon, tf.float32)
    returns = []
    while (played < wanted).any() and not (should_stop and should_stop()):
        step = vector.step(actor.act_with_epsilon(stack.observation, epsilon).numpy())
        for i, game_return, _ in step.games:
            if played[i] < wanted[i]:
                played[i] += 1
                returns.append(game_return)
        stack.push(step.next_frames)
        for i in np.flatnonzero(step.terminated | step.truncated):
            stack.reset(i, step.next_frames[i])
    return returns


class Evaluator:
    """Evaluates the actor on up to 16 envs side by side, made on first use for each size and reused."""

    def __init__(self, env_config, spec: EnvSpec, actor: Actor, seeds: EvaluationSeeds, epsilon: float, should_stop):
        self._env_config, self._spec, self._actor = env_config, spec, actor
        self.seeds, self._epsilon, self._should_stop = seeds, epsilon, should_stop
        self._vectors = {}  # number of envs -> vector env

    def evaluate(self, episodes: int, env_steps: int, purpose: int = PERIODIC) -> list[float] | None:
        """Raw returns of `episodes` whole games, or None where a stop request cut the evaluation short:
        the games that finish first are the short ones, so a part of an evaluation is discarded whole."""
        n = min(episodes, MAX_EVALUATION_ENVS)
        seed = self.seeds.base_seed(purpose, env_steps, n)
        if n not in self._vectors:
            self._vectors[n], _ = make_vector_env(self._env_config, n, seed=seed)
        returns = run_vector_episodes(self._vectors[n], self._spec, self._actor, episodes, self._epsilon, seed,
                                      should_stop=self._should_stop)
        return returns if len(returns) == episodes else None

    def close(self) -> None:
        for vector in self._vectors.values():
            vector.close()
