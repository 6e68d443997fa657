"""Whole-game evaluation episodes with a fixed epsilon; returns are raw (never clipped)."""

import numpy as np
import tensorflow as tf

from tfdqn.agent.actor import Actor
from tfdqn.envs.make import EnvSpec
from tfdqn.replay.frame_stack import FrameStack


def run_episodes(env, spec: EnvSpec, actor: Actor, episodes: int, epsilon: float, on_step=None,
                 should_stop=None) -> list[float]:
    """Play `episodes` whole games and return their raw returns. `on_step(env, info)` is called after
    every step (video recording); `should_stop()` ends the evaluation early (a stop signal)."""
    stack = FrameStack(1, spec.stack_size, spec.frame_shape, spec.frame_dtype)
    epsilon = tf.constant(epsilon, tf.float32)
    returns = []
    frame, _ = env.reset()
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
