"""ReplayRing against a plain-Python reference of what the environment showed the agent.

Every frame is filled with its own id (1, 2, ...; 0 is the padding value), so a rebuilt stack
names exactly which frames it holds and each transition is found by its newest frame. The ring holds
the newest `capacity` slots of all streams together, in the order add() writes them.
"""

import collections
import itertools

import numpy as np
import pytest

from tfdqn.replay.device import DeviceReplay
from tfdqn.replay.ring import ReplayRing


@pytest.fixture(autouse=True, params=["host", "accelerator"])
def ring_kind(request, monkeypatch):
    """Every test here runs on both rings: the host NumPy ring and the tf.Variable one (replay.device)."""
    if request.param == "accelerator":
        monkeypatch.setitem(globals(), "ReplayRing", DeviceReplay)
    return request.param

FRAME_SHAPE = (2, 2)
EPISODE_LENGTHS = (1, 2, 3, 6, 9, 4)


def _rotations(lengths, num_streams):
    """Episode lengths per stream: the same cycle from a different start, so episode ends interleave."""
    return [lengths[s % len(lengths):] + lengths[:s % len(lengths)] for s in range(num_streams)]


def _frame(frame_id):
    return np.full(FRAME_SHAPE, frame_id, np.int32)


class Reference:
    """Plays per-stream episodes, records the zero-padded stacks seen and which slots the ring holds."""

    def __init__(self, stack_size, capacity, stream_lengths, ends):
        self.stack_size = stack_size
        self.ids = itertools.count(1)
        self.episode_of = {}  # frame id -> (stream, episode number)
        self.transitions = {}  # newest frame id of the observation -> (obs ids, action, reward, bootstrap, next ids)
        num_streams = len(stream_lengths)
        self.num_streams = num_streams
        self.ring = collections.deque(maxlen=capacity)  # (stream, kind, frame id, step in episode), oldest first
        self.lengths = [itertools.cycle(lengths) for lengths in stream_lengths]
        self.ends = ends
        self.episodes = [0] * num_streams
        self.episode_frames = [[] for _ in range(num_streams)]
        self.remaining = [0] * num_streams

    def _new_frame(self, stream):
        frame_id = next(self.ids)
        self.episode_of[frame_id] = (stream, self.episodes[stream])
        self.episode_frames[stream].append(frame_id)
        return frame_id

    def _stack(self, frames):
        padded = [0] * self.stack_size + frames
        return padded[-self.stack_size:]

    def step(self, ring):
        """Advance every stream's episode by one step, record what it saw, and add that step to `ring`."""
        frames, actions, rewards, terminated, truncated, next_frames, finals = [], [], [], [], [], [], []
        for s in range(self.num_streams):
            if self.remaining[s] == 0:  # start an episode with its reset frame
                self.episodes[s] += 1
                self.episode_frames[s] = []
                self.remaining[s] = next(self.lengths[s])
                self._new_frame(s)
            frame_id = self.episode_frames[s][-1]
            observation = self._stack(self.episode_frames[s])
            next_id = self._new_frame(s)
            self.remaining[s] -= 1
            done = self.remaining[s] == 0
            term = done and (self.ends == "terminated" or (self.ends == "mixed" and self.episodes[s] % 2 == 0))
            action, reward = (frame_id * 7) % 5, frame_id * 0.5 - 3.0
            self.transitions[frame_id] = (observation, action, reward, 0.0 if term else 1.0,
                                          self._stack(self.episode_frames[s]))
            step_in_episode = len(self.episode_frames[s]) - 2
            self.ring.append((s, "transition", frame_id, step_in_episode))
            if done:  # add() writes every stream's transition, then the final frames
                finals.append((s, "final", next_id, step_in_episode + 1))
            frames.append(_frame(frame_id))
            next_frames.append(_frame(next_id))
            actions.append(action)
            rewards.append(reward)
            terminated.append(term)
            truncated.append(done and not term)
        self.ring.extend(finals)
        ring.add(np.stack(frames), np.array(actions), np.array(rewards, np.float32),
                 np.array(terminated), np.array(truncated), np.stack(next_frames))

    def held(self):
        """Per stream, what the ring holds of it, oldest first: (kind, frame id, step in episode)."""
        return [[entry[1:] for entry in self.ring if entry[0] == s] for s in range(self.num_streams)]

    def sampleable(self, n_step=1):
        """Newest frame ids of transitions whose n next slots and needed history are still in the ring."""
        ids = set()
        for written in self.held():
            for position, (kind, frame_id, step_in_episode) in enumerate(written):
                history = min(step_in_episode, self.stack_size - 1)
                if kind == "transition" and position < len(written) - n_step and position - history >= 0:
                    ids.add(frame_id)
        return ids


def _play(stack_size, num_streams, slots, adds, lengths=EPISODE_LENGTHS, ends="mixed", seed=0,
          stream_lengths=None):
    """`slots` per stream: a ring of slots * num_streams."""
    ring = ReplayRing(slots * num_streams, FRAME_SHAPE, np.int32, stack_size, num_streams, seed)
    reference = Reference(stack_size, slots * num_streams, stream_lengths or _rotations(lengths, num_streams), ends)
    for _ in range(adds):
        reference.step(ring)
    return ring, reference


def _draw(ring, count):
    """`count` sample indices, drawn in batches no larger than what the ring may sample at once."""
    return np.concatenate([ring.sample_indices(len(ring)) for _ in range(-(-count // len(ring)))])[:count]


def _all_sampleable(ring):
    everything = np.arange(ring.capacity)
    return everything[ring.is_sampleable(everything)]


def _assert_matches_reference(ring, reference, indices):
    """Each gathered transition equals the reference one named by its newest frame, and stays in its episode."""
    batch = ring.gather(indices)
    k = reference.stack_size
    observations = batch.observation.reshape(len(indices), k, -1)
    next_observations = batch.next_observation.reshape(len(indices), k, -1)
    # every pixel of a frame holds its id
    assert (observations == observations[..., :1]).all() and (next_observations == next_observations[..., :1]).all()
    for b in range(len(indices)):
        obs_ids = observations[b, :, 0].tolist()
        next_ids = next_observations[b, :, 0].tolist()
        expected_obs, action, reward, bootstrap, expected_next = reference.transitions[obs_ids[-1]]
        assert obs_ids == expected_obs
        assert next_ids == expected_next
        assert batch.action[b] == action
        assert batch.reward[b] == np.float32(reward)
        assert batch.bootstrap[b] == bootstrap
        episode = reference.episode_of[obs_ids[-1]]
        assert all(reference.episode_of[i] == episode for i in obs_ids + next_ids if i != 0)
    assert batch.observation.shape == (len(indices), *ring.observation_shape)
    assert batch.next_observation.shape == batch.observation.shape
    assert batch.observation.dtype == np.int32
    assert (batch.action.dtype, batch.reward.dtype, batch.bootstrap.dtype) == (np.int32, np.float32, np.float32)


SCENARIOS = {  # name: (slots per stream, adds)
    "fits": (64, 20),
    "one_wrap": (24, 30),
    "several_wraps": (16, 120),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("ends", ["terminated", "truncated", "mixed"])
@pytest.mark.parametrize("num_streams", [1, 3])
@pytest.mark.parametrize("stack_size", [1, 4])
def test_every_sampleable_transition_matches_reference(scenario, ends, num_streams, stack_size):
    slots, adds = SCENARIOS[scenario]
    ring, reference = _play(stack_size, num_streams, slots, adds, ends=ends)
    indices = _all_sampleable(ring)
    batch = ring.gather(indices)
    newest = batch.observation.reshape(len(indices), -1)[:, -1]
    assert set(newest.tolist()) == reference.sampleable()
    assert len(newest) == len(set(newest.tolist())) == len(ring)
    _assert_matches_reference(ring, reference, indices)


@pytest.mark.parametrize("stack_size", [1, 4])
def test_capacity_edges_exactly_full_and_one_past(stack_size):
    slots = 12
    never_ends = (10**6,)
    ring, reference = _play(stack_size, 1, slots, slots, lengths=never_ends)
    assert len(ring) == slots - 1  # all but the newest, whose next frame is not written yet
    assert set(_frame_ids(ring)) == reference.sampleable()

    reference.step(ring)  # one past full: the oldest frame is overwritten
    assert len(ring) == slots - 1 - (stack_size - 1)  # the oldest stacks lost a history frame
    assert set(_frame_ids(ring)) == reference.sampleable()
    _assert_matches_reference(ring, reference, _all_sampleable(ring))


def _frame_ids(ring):
    indices = _all_sampleable(ring)
    return ring.gather(indices).observation.reshape(len(indices), -1)[:, -1].tolist()


@pytest.mark.parametrize("stack_size", [1, 4])
def test_truncation_bootstraps_from_final_frame_and_termination_does_not(stack_size):
    ring = ReplayRing(16, FRAME_SHAPE, np.int32, stack_size)
    # episode 1: frames 1, 2, final 3, truncated; episode 2: frames 4, final 5, terminated
    ring.add([_frame(1)], [0], [0.0], [False], [False], [_frame(2)])
    ring.add([_frame(2)], [1], [7.5], [False], [True], [_frame(3)])
    ring.add([_frame(4)], [2], [-2.25], [True], [False], [_frame(5)])
    ring.add([_frame(6)], [3], [0.0], [False], [False], [_frame(7)])  # newest step: not sampleable yet
    batch = ring.gather(_all_sampleable(ring))
    assert batch.reward.tolist() == [0.0, 7.5, -2.25]  # raw, not clipped
    assert batch.bootstrap.tolist() == [1.0, 1.0, 0.0]
    newest_next = batch.next_observation.reshape(3, -1)[:, -1].tolist()
    assert newest_next == [2, 3, 5]
    if stack_size == 4:
        assert batch.observation[1, :, 0, 0].tolist() == [0, 0, 1, 2]
        assert batch.next_observation[1, :, 0, 0].tolist() == [0, 1, 2, 3]
        assert batch.observation[2, :, 0, 0].tolist() == [0, 0, 0, 4]  # no frame from episode 1
        assert batch.next_observation[2, :, 0, 0].tolist() == [0, 0, 4, 5]


def test_sampled_batches_match_reference_across_streams():
    ring, reference = _play(4, 3, 16, 60)
    _assert_matches_reference(ring, reference, _draw(ring, 500))


def test_unsampleable_slots_are_never_sampled():
    ring, reference = _play(4, 3, 16, 120)
    valid = _all_sampleable(ring)
    invalid = np.setdiff1d(np.arange(ring.capacity), valid)
    assert invalid.size >= 3 * 2  # at least each stream's newest slot and some final-only slots
    assert not np.isin(_draw(ring, 2000), invalid).any()


@pytest.mark.parametrize("adds", [6, 40])
def test_sampling_is_uniform_over_transitions_not_streams(adds):
    # stream 0 has one-step episodes, so each add writes it two slots (a transition and a final frame)
    # and stream 1 one: both before the ring wraps (6 adds) and after (40), stream 0 holds two thirds of
    # the newest slots and half of the transitions, and each transition is drawn equally often.
    ring, reference = _play(1, 2, 16, adds, stream_lengths=[(1,), (1000,)])
    valid = _all_sampleable(ring)
    assert set(_frame_ids(ring)) == reference.sampleable()
    held = [len(slots) for slots in reference.held()]
    assert abs(held[0] - 2 * held[1]) <= 2  # shares of what was written, not halves of the ring
    expected = 1000  # draws per sampleable transition
    counts = collections.Counter(_draw(ring, expected * len(valid)).tolist())
    assert set(counts) == set(valid.tolist())
    assert all(abs(count - expected) < 6 * np.sqrt(expected) for count in counts.values())


def test_sampling_is_reproducible_for_a_seed():
    draws = []
    for seed in (5, 5, 6):
        ring, _ = _play(4, 3, 16, 50, seed=seed)
        draws.append(_draw(ring, 64))
    assert np.array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[0], draws[2])


def test_stacked_batches_are_one_draw_split_in_order():
    """The fused-update input: `count` batches from one draw, batch i holding draws i*B to (i+1)*B."""
    stacked = _play(4, 3, 16, 50, seed=2)[0].sample_stacked(3, 8)
    flat = _play(4, 3, 16, 50, seed=2)[0].sample(24)
    for name, a, b in zip(flat._fields, stacked, flat):
        assert a.shape == (3, 8, *b.shape[1:]), name
        np.testing.assert_array_equal(a.reshape(b.shape), b, err_msg=name)


def test_stacked_batches_need_only_one_batch_of_sampleable_transitions():
    """A round of fused updates right after learning_starts asks for more draws than the ring holds
    transitions: each batch is drawn with replacement, so one batch's worth must be sampleable."""
    ring, _ = _play(1, 2, 16, 10, seed=3)
    assert len(ring) < 64
    stacked = ring.sample_stacked(8, len(ring))
    assert stacked.action.shape == (8, len(ring))
    with pytest.raises(ValueError, match="sampleable"):
        ring.sample_stacked(8, len(ring) + 1)


def test_can_sample_and_sample_refuses_too_few():
    ring = ReplayRing(16, FRAME_SHAPE, np.int32, stack_size=4)
    assert len(ring) == 0 and not ring.can_sample(1)
    with pytest.raises(ValueError, match="sampleable"):
        ring.sample(1)
    for frame_id in range(1, 4):
        ring.add([_frame(frame_id)], [0], [0.0], [False], [False], [_frame(frame_id + 1)])
    assert len(ring) == 2 and ring.can_sample(2) and not ring.can_sample(3)
    assert ring.sample(2).observation.shape == (2, 4, 2, 2)


def test_atari_memory_per_transition_and_uint8_batch():
    capacity = 10_000
    args = (capacity, (84, 84), np.uint8, 4)
    ring = ReplayRing(*args)
    assert ring.nbytes == ReplayRing.bytes_needed(*args)
    assert ring.nbytes / capacity <= 7200
    frame = np.full((1, 84, 84), 200, np.uint8)
    for _ in range(40):
        ring.add(frame, [1], [1.0], [False], [False], frame)
    batch = ring.sample(32)
    assert batch.observation.shape == batch.next_observation.shape == (32, 4, 84, 84)
    assert batch.observation.dtype == np.uint8
    assert not batch.observation.flags.writeable  # a view shared with next_observation
    assert set(np.unique(batch.observation).tolist()) <= {0, 200}


@pytest.mark.parametrize("capacity, stack_size, num_streams", [(5, 4, 1), (17, 4, 3), (10, 0, 1), (10, 1, 0)])
def test_too_small_or_bad_sizes_are_refused(capacity, stack_size, num_streams):
    with pytest.raises(ValueError):
        ReplayRing(capacity, FRAME_SHAPE, np.int32, stack_size, num_streams)
    with pytest.raises(ValueError):
        ReplayRing.bytes_needed(capacity, FRAME_SHAPE, np.int32, stack_size, num_streams)


def test_add_names_an_argument_without_the_stream_axis():
    ring = ReplayRing(16, FRAME_SHAPE, np.int32, num_streams=2)
    with pytest.raises(ValueError, match="frame has shape"):
        ring.add(_frame(1), [0, 0], [0.0, 0.0], [False, False], [False, False], _frame(2))


def test_cut_episodes_ends_the_open_episode_as_a_truncation():
    ring = ReplayRing(64, (2,), np.int32, stack_size=2, seed=0)
    for t in range(1, 6):
        ring.add(np.full((1, 2), t), [0], [1.0], [False], [False], np.full((1, 2), t + 1))
    ring.cut_episodes(np.full((1, 2), 6))  # a resume abandons this game at frame 6
    ring.add(np.full((1, 2), 100), [1], [2.0], [False], [False], np.full((1, 2), 101))
    ring.add(np.full((1, 2), 101), [1], [2.0], [False], [False], np.full((1, 2), 102))
    batch = ring.gather(np.flatnonzero(ring.is_sampleable(np.arange(ring.capacity))))
    last_old = np.flatnonzero(batch.observation[:, -1, 0] == 5)[0]
    assert batch.bootstrap[last_old] == 1.0 and batch.next_observation[last_old, -1, 0] == 6
    first_new = np.flatnonzero(batch.observation[:, -1, 0] == 100)[0]
    assert batch.observation[first_new, 0, 0] == 0  # zero padding: no frame of the old game leaks in

