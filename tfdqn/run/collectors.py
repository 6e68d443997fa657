"""Collectors: where transitions come from. The loop asks `collect()` and adds what comes back.

`VectorEnvCollector` is the in-process one: a vector env stepped in this thread (ALE's C++ threads for
N Atari games) with one in-graph `act` call per vector step. A collector also owns what a checkpoint
needs to continue its envs (`state()` / `restore()`), so the loop never sees frames or stacks.
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from typing import NamedTuple

import numpy as np

from tfdqn.envs.make import EnvSpec
from tfdqn.errors import RunFailure, one_line
from tfdqn.replay.frame_stack import FrameStack
from tfdqn.telemetry.phase_timer import PhaseTimer


class Transitions(NamedTuple):
    """One env step of every stream (or of `streams`), each field with a leading axis of one entry per stream."""

    frame: np.ndarray        # the newest frame of the observation each action was chosen from
    action: np.ndarray       # int32
    reward: np.ndarray       # float32, raw
    terminated: np.ndarray   # bool
    truncated: np.ndarray    # bool
    final_frame: np.ndarray  # the episode's last frame where it ended (the replay keeps only those)
    games: list              # (stream, raw return, length) of each whole game that ended
    streams: np.ndarray | None = None  # the replay streams these are (None: all of them, in order)


@dataclasses.dataclass
class CollectorState:
    """What a checkpoint keeps of a collector: `env` is None where the envs do not pickle (ALE)."""

    frames: np.ndarray
    stack: FrameStack | None
    env: object | None


class CollectorFailure(RunFailure):
    """Transitions stopped coming: the message names where (an env, an actor); the loop adds the last checkpoint."""


class CollectionStopped(Exception):
    """A stop request (SIGINT, SIGTERM) came while the collector waited for transitions: the loop ends."""


class EnvFailure(CollectorFailure):
    """An env's own step raised; the message names the env and the env step."""


def pickles_faithfully(env, is_atari: bool) -> bool:
    """Whether a checkpoint can hold these envs mid-episode (pure-Python envs can). ALE's emulator does
    not pickle with its RNG, so Atari runs start a new game on resume instead. Asked once per run."""
    if is_atari:
        return False
    try:
        pickle.dumps(env)
    except (pickle.PicklingError, TypeError, AttributeError):
        return False
    return True


class VectorEnvCollector:
    """Steps `vector` (1 or N envs) with the actor's in-graph epsilon-greedy act, in this thread."""

    def __init__(self, vector, spec: EnvSpec, actor, timer: PhaseTimer, seed: int):
        self.num_envs = vector.num_envs
        self._vector, self._spec, self._actor, self._timer = vector, spec, actor, timer
        self._stack = FrameStack(self.num_envs, spec.stack_size, spec.frame_shape, spec.frame_dtype)
        self._envs_pickle = pickles_faithfully(vector, spec.is_atari)
        self._frames = vector.reset(seed=seed)
        self._stack.reset_all(self._frames)

    def collect(self) -> Transitions:
        t = time.perf_counter()
        actions = self._actor.act(self._stack.observation).numpy()
        t = self._timer.add("act", t)
        try:
            step = self._vector.step(actions)
        except Exception as error:  # the env itself failed: name it and the env step
            failed_at = int(self._actor.env_steps.numpy()) + self.num_envs  # the step counts once collected
            raise EnvFailure(f"env {self._spec.env_id} failed at env step {failed_at}: {one_line(error)}") from error
        t = self._timer.add("env_step", t)
        transitions = Transitions(self._frames, actions, step.reward, step.terminated, step.truncated,
                                  step.final_frames, step.games)
        self._stack.push(step.next_frames)
        for i in np.flatnonzero(step.terminated | step.truncated):  # a new episode starts from its own frame
            self._stack.reset(i, step.next_frames[i])
        self._frames = step.next_frames
        self._timer.add("act", t)  # building the next observation is part of acting
        return transitions

    def metrics(self) -> dict:
        """Nothing to report: acting here uses the learner's own weights and step count, with no lag."""
        return {}

    def state(self) -> CollectorState:
        return CollectorState(self._frames, self._stack, self._vector if self._envs_pickle else None)

    def restore(self, state: CollectorState, replay, seed: int) -> None:
        """Continue from a checkpoint: the saved envs mid-episode where they pickle; otherwise new
        games from `seed`, with the replay's unfinished episodes cut as truncations."""
        if state.env is not None:
            self._vector.close()
            self._vector, self._frames, self._stack = state.env, state.frames, state.stack
            return
        replay.cut_episodes(state.frames)
        self._frames = self._vector.reset(seed=seed)
        self._stack.reset_all(self._frames)

    def close(self) -> None:
        self._vector.close()


class IllegalActionCount:
    """A collector that also counts the actions taken that the env's legal-action mask forbids (none while
    `env.mask_actions` applies the mask; the runs without it show how many): `charts/illegal_actions`, per
    summary window. Everything else is the wrapped collector's."""

    def __init__(self, collector, layout):
        self._collector, self._layout, self._count = collector, layout, 0

    def collect(self) -> Transitions:
        transitions = self._collector.collect()
        self._count += self._layout.illegal(transitions.frame, transitions.action)
        return transitions

    def metrics(self) -> dict:
        metrics, self._count = {**self._collector.metrics(), "charts/illegal_actions": self._count}, 0
        return metrics

    def __getattr__(self, name):
        return getattr(self._collector, name)
