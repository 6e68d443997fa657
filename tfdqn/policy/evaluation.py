"""A trained network played outside its run (`tfdqn evaluate`): only the network and an actor are built, no
learner, and the first episode can be recorded as an MP4."""

from __future__ import annotations

import contextlib
import os
import pathlib
from typing import NamedTuple

import numpy as np

from tfdqn import config as config_lib
from tfdqn.agent.agent import make_policy_actor
from tfdqn.envs.make import describe_protocol, make_env
from tfdqn.policy.locate import NetworkLocation
from tfdqn.policy.saved_model import restore_weights
from tfdqn.policy.video import VideoRecorder, video_fps
from tfdqn.run.evaluation import IllegalActionActor, run_episodes


class Evaluation(NamedTuple):
    protocol: str  # the evaluation protocol in one line (`describe_protocol`)
    report: dict  # the returns and what was played, as `tfdqn evaluate` prints it


def evaluate_network(location: NetworkLocation, config: config_lib.DQNConfig, episodes: int,
                     epsilon: float | None = None, video: str | os.PathLike | None = None) -> Evaluation:
    """Play `episodes` whole games with the network at `location`, on the env of `config` (the config there,
    seeded with the evaluation's seed, run.seed), acting epsilon-greedily (None: the run's
    exploration.eval_epsilon); `video` records the first episode (an error leaves no partial file)."""
    epsilon = config.exploration.eval_epsilon if epsilon is None else epsilon
    seed = config.run.seed
    env, spec = make_env(config.env, seed=seed, evaluation=True, render=video is not None)
    network, actor = make_policy_actor(config, spec.observation_shape, spec.frame_dtype, spec.num_actions, spec.layout)
    env_steps = restore_weights(location, network)
    counted = spec.layout is not None and spec.layout.mask is not None
    actor = IllegalActionActor(actor, spec.layout) if counted else actor
    recorder = VideoRecorder(pathlib.Path(video), video_fps(env, config.env)) if video is not None else None
    capped = []  # games env.max_episode_steps cut, where the env has no time limit of its own
    with contextlib.closing(env), recorder or contextlib.nullcontext():
        returns = run_episodes(env, spec, actor, episodes, epsilon, seed=seed,
                               on_step=recorder.on_step if recorder else None, capped=capped)
    report = {"run_dir": str(location.path), "checkpoint_env_steps": env_steps, "episodes": len(returns),
              "epsilon": epsilon, "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)),
              "returns": returns, **({"illegal_actions": actor.illegal} if counted else {}),
              **({"truncated_by_step_cap": len(capped)} if capped else {}),
              **({"video": os.fspath(video), "video_frames": recorder.frames} if recorder else {})}
    return Evaluation(describe_protocol(config.env, spec, epsilon), report)
