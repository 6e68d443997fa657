"""One actor: its own envs and a CPU copy of the network, stepping chunks of transitions for a learner in
another process. The same class runs in an actor process (`process.py`) and as a Ray actor
(`ray_actors.py`); it knows no transport.

A chunk holds `actors.chunk_steps` vector steps of the actor's envs. Each frame travels once (the frame
each action was chosen from, plus an episode's final frame only where one ended), in the env's own dtype
(uint8 for Atari); only the frames after the last step travel twice, as the next chunk's first. With
`replay.compression` the actor compresses the chunk's frames itself, each actor in its own process, and the
learner's ring stores those codes as they come (the frames after the last step travel raw: the learner keeps
them as each stream's next frame). TensorFlow is imported when a worker is made, after its thread limits are
set, so importing this module stays cheap for the learner and for Ray's driver.
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import numpy as np

from tfdqn import cli
from tfdqn.config import DQNConfig
from tfdqn.envs.vector import make_vector_env
from tfdqn.replay.frame_codec import EncodedFrames, encode_frames, make_codec
from tfdqn.run.collectors import VectorEnvCollector
from tfdqn.telemetry.phase_timer import PhaseTimer


class Chunk(NamedTuple):
    """`steps` vector steps of one actor's M envs; the per-step fields have leading [steps, M] axes."""

    actor: int
    frame: np.ndarray | EncodedFrames  # [T, M, *frame_shape] (codes: [T, M]): the newest frame of the observation
    #                                    each action was chosen from
    action: np.ndarray       # [T, M] int32
    reward: np.ndarray       # [T, M] float32, raw
    terminated: np.ndarray   # [T, M] bool
    truncated: np.ndarray    # [T, M] bool
    ended: np.ndarray        # [E, 2] (t, m) of every episode that ended
    final_frame: np.ndarray | EncodedFrames  # [E, *frame_shape] (codes: [E]): those episodes' final frames
    next_frame: np.ndarray   # [M, *frame_shape]: the frames after the last step (the next chunk's first)
    games: list              # (t, m, raw return, length) of every whole game that ended
    busy_seconds: float      # time the actor spent acting and stepping for this chunk
    weights_updates: int     # the learner's update count when the weights this chunk acted with were read
    start_env_steps: int     # the epsilon clock at the chunk's first step (the run's env step it stands for)

    @property
    def steps(self) -> int:
        return len(self.action)

    @property
    def payload_bytes(self) -> int:
        """The bytes of its arrays and frame codes: what crosses from the actor to the learner, less framing."""
        return sum(field.nbytes if isinstance(field, np.ndarray) else sum(map(len, field.codes.ravel()))
                   for field in self if isinstance(field, (np.ndarray, EncodedFrames)))


def start_tensorflow() -> None:
    """Start TensorFlow with its start-up lines off stderr (the learner's stderr, which actors share,
    stays one line on failure), and with one thread: an actor acts on one small batch at a time, and
    N actors must not fight over the cores (or the learner's). Threads are set only before TensorFlow
    runs anything in this process."""
    cli.start_tensorflow()
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.set_visible_devices([], "GPU")  # "a CPU copy of the network": the GPU is the learner's
    except RuntimeError:  # TensorFlow already started in this process (a worker made twice in a test)
        pass


def actor_exploration(config: DQNConfig, index: int):
    """The run's epsilon schedule, or actor `index`'s fixed Ape-X epsilon (`actors.exploration: apex`)."""
    from tfdqn.agent.epsilon import apex_epsilon

    if config.actors.exploration == "schedule":
        return config.exploration
    epsilon = apex_epsilon(index, config.actors.count)
    return dataclasses.replace(config.exploration, epsilon_start=epsilon, epsilon_end=epsilon, epsilon_decay_steps=0)


class ActorWorker:
    """Actor `index` of a run: `collect(weights, weights_updates, env_steps)` returns the next chunk."""

    def __init__(self, config: DQNConfig, index: int, seed: int):
        start_tensorflow()
        from tfdqn.agent.agent import make_acting_copy

        self.index, self._steps = index, config.actors.chunk_steps
        vector, spec = make_vector_env(config.env, config.actors.envs_per_actor, seed=seed)
        self._network, actor = make_acting_copy(config, actor_exploration(config, index), spec.observation_shape,
                                                spec.frame_dtype, spec.num_actions, seed, spec.layout)
        self._env_steps = actor.env_steps
        self._weights_updates = 0  # the update count of the weights the network holds
        self._collector = VectorEnvCollector(vector, spec, actor, PhaseTimer(), seed=seed)
        m = vector.num_envs
        self._frame = np.zeros((self._steps, m, *spec.frame_shape), spec.frame_dtype)
        frame_bytes = self._frame[0, 0].nbytes
        self._codec = make_codec(config.replay.compression, frame_bytes) if config.replay.compression != "none" else None

    def collect(self, weights: list | None, weights_updates: int, env_steps: int) -> Chunk:
        """Set the weights where new ones came (read at learner update `weights_updates`), set the
        epsilon clock to `env_steps` (the run's env step at which the learner will start taking this
        chunk), and step the envs `actors.chunk_steps` times, the clock moving with this actor's steps."""
        started = time.perf_counter()
        if weights is not None:
            self._network.set_weights(weights)
            self._weights_updates = weights_updates
        self._env_steps.assign(env_steps)
        shape = self._frame.shape[:2]
        action, reward = np.zeros(shape, np.int32), np.zeros(shape, np.float32)
        terminated, truncated = np.zeros(shape, bool), np.zeros(shape, bool)
        ended, final_frames, games = [], [], []
        for t in range(self._steps):
            step = self._collector.collect()
            self._env_steps.assign_add(len(step.action))  # this actor's own epsilon clock
            self._frame[t] = step.frame
            action[t], reward[t], terminated[t], truncated[t] = step.action, step.reward, step.terminated, step.truncated
            for m in np.flatnonzero(step.terminated | step.truncated):
                ended.append((t, m))
                final_frames.append(step.final_frame[m])
            games += [(t, stream, ret, length) for stream, ret, length in step.games]
        final_frame = np.stack(final_frames) if final_frames else np.zeros((0, *self._frame.shape[2:]), self._frame.dtype)
        frame = self._frame.copy()
        if self._codec is not None:
            frame_ndim = self._frame.ndim - 2
            frame, final_frame = (encode_frames(self._codec, f, frame_ndim) for f in (frame, final_frame))
        return Chunk(self.index, frame, action, reward, terminated, truncated,
                     np.array(ended, np.int64).reshape(-1, 2), final_frame, self._collector.state().frames.copy(),
                     games, time.perf_counter() - started, self._weights_updates, env_steps)

    def close(self) -> None:
        self._collector.close()
