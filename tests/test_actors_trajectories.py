"""What actors put in the replay is their real trajectories: each frame says where it comes from, so a
sampled transition can be checked against the env that made it, across chunks, episode ends, a frame
stack of 4 and an actor killed mid-episode (its episodes cut as truncations, never stacked across the cut)."""

import os
import signal

import gymnasium
import numpy as np
import pytest

ENV_ID = "tests.test_actors_trajectories:StepFrames-v0"
RUNNING, TERMINATED, TRUNCATED = 0.0, 1.0, 2.0


class StepFrames(gymnasium.Env):
    """Frames [episode id, step in episode, previous action + 1, how the step ended]: ids are random
    per episode, so two episodes' frames never look alike; episodes end by chance or at 20 steps."""

    observation_space = gymnasium.spaces.Box(0.0, 2.0**24, (4,), np.float32)
    action_space = gymnasium.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._id, self._t = float(self.np_random.integers(1, 2**24)), 0
        return np.array([self._id, 0.0, 0.0, RUNNING], np.float32), {}

    def step(self, action):
        self._t += 1
        terminated = bool(self.np_random.random() < 0.08)
        truncated = not terminated and self._t >= 20
        ended = TERMINATED if terminated else TRUNCATED if truncated else RUNNING
        frame = np.array([self._id, self._t, int(action) + 1, ended], np.float32)
        return frame, float(self._t), terminated, truncated, {}


gymnasium.register("StepFrames-v0", entry_point=StepFrames)


def _check_transition(observation, action, reward, bootstrap, next_observation) -> None:
    """One sampled transition against the frames' own account of the trajectory."""
    newest, following = observation[-1], next_observation[-1]
    episode, t = newest[0], int(newest[1])
    for k, frame in enumerate(observation):  # oldest first; zeros before the episode's first frame
        step = t - (len(observation) - 1 - k)
        expected = (episode, step) if step >= 0 else (0.0, 0.0)
        assert (frame[0], frame[1]) == expected, (observation, "a frame from another episode or step")
    np.testing.assert_array_equal(next_observation[:-1], observation[1:])  # the same episode, one step on
    assert (following[0], following[1]) == (episode, t + 1), (observation, next_observation)
    assert following[2] == action + 1 and reward == t + 1  # the action taken and the reward it got
    assert (bootstrap == 0.0) == (following[3] == TERMINATED)  # truncations and cuts bootstrap


@pytest.mark.slow
@pytest.mark.parametrize("compression", ["lz4"])
def test_the_replay_holds_the_actors_real_trajectories_across_stacks_episode_ends_and_a_killed_actor(compression):
    """The actors send their frames' codes and the ring stores them as they come; raw chunks are the other
    actor tests' (CartPole's frames are never compressed), so one codec, the default, is run here."""
    from tfdqn.actors.collector import RemoteCollector
    from tfdqn.actors.process import ProcessActors
    from tfdqn.agent.agent import make_agent
    from tfdqn.config import DQNConfig
    from tfdqn.envs.make import make_env
    from tfdqn.replay.frame_codec import EncodedFrames
    from tfdqn.replay.ring import ReplayRing
    from tfdqn.telemetry.phase_timer import PhaseTimer

    # Steps that wait 3 ms (no CPU) pace the other actor while actor 0's replacement starts TensorFlow: its
    # chunks, each checked below, are then a few dozen, not thousands. Acting without XLA: no compile per actor.
    config = DQNConfig.for_env(ENV_ID, {"actors.kind": "process", "actors.count": 2, "actors.envs_per_actor": 2,
                                        "actors.chunk_steps": 16, "replay.capacity": 65536,
                                        "replay.compression": compression, "env.step_delay_ms": 3,
                                        "compute.act_jit_compile": False})
    spec = make_env(config.env, seed=0)[1]
    agent = make_agent(config, spec.observation_shape, spec.frame_dtype, spec.num_actions)
    replay = ReplayRing(65536, spec.frame_shape, spec.frame_dtype, stack_size=4, num_streams=4, compression=compression)
    actors = ProcessActors(config)
    collector = RemoteCollector(actors, config, spec, agent.counters, agent.online, replay.cut_episodes, PhaseTimer())
    added = []
    try:
        before, after = 0, 0  # vector steps of actor 0, and of its replacement
        while after < 16:
            transitions = collector.collect()
            if transitions.streams[0] == 0:
                before, after = (before, after + 1) if collector.restarts else (before + 1, after)
                if before == 10:  # it has sent chunks and steps its next one, mid-episode
                    os.kill(actors.whereabouts(0)["pid"], signal.SIGKILL)
            assert isinstance(transitions.frame, EncodedFrames) == (compression != "none")
            replay.add(transitions.frame, transitions.action, transitions.reward, transitions.terminated,
                       transitions.truncated, transitions.final_frame, transitions.streams)
            agent.counters.env_steps.assign_add(len(transitions.action))
            added.append(transitions._replace(frame=_decoded(transitions.frame, spec)))
        assert collector.restarts == 1
        killed, other = collector.report()
        assert killed["restarts"] == 1 and len(killed["lives"]) == 2 and killed["lost_chunks"] >= 1  # its request out
        assert other["restarts"] == other["lost_chunks"] == 0
        assert killed["env_steps"] + other["env_steps"] == sum(len(t.action) for t in added)  # lost ones not counted
    finally:
        collector.close()
    # The killed actor's streams (0 and 1) each had an episode cut; the other actor's streams none.
    cuts = _cut_keys(added, streams=(0, 1))
    assert len(cuts) == 2 and not _cut_keys(added, streams=(2, 3))
    seen_cuts = set()
    for _ in range(12 * len(replay) // 512):  # every transition drawn with probability 1 - e^-12
        batch = replay.sample(512)
        for i in range(len(batch.action)):
            _check_transition(batch.observation[i], batch.action[i], batch.reward[i], batch.bootstrap[i],
                              batch.next_observation[i])
            seen_cuts.add(tuple(batch.next_observation[i][-1][:2]))
    assert set(cuts) <= seen_cuts  # the cut transitions were kept, ending on the last frame seen, bootstrapping


def _decoded(frames, spec):
    from tfdqn.replay.frame_codec import EncodedFrames, decode_frames

    return decode_frames(frames, spec.frame_shape, spec.frame_dtype) if isinstance(frames, EncodedFrames) else frames


def _cut_keys(added, streams) -> list[tuple]:
    """(episode id, step) of the frame each of `streams` had reached when its actor was killed: the last
    frame of an episode that did not end, followed in the stream by another episode."""
    keys = []
    for stream in streams:
        rows = [(t.frame[j], t.terminated[j] or t.truncated[j]) for t in added for j in np.flatnonzero(t.streams == stream)]
        keys += [(frame[0], frame[1] + 1) for (frame, ended), (following, _) in zip(rows, rows[1:])
                 if not ended and following[0] != frame[0]]
    return keys
