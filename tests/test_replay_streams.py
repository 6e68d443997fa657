"""The replay with streams that add at different rates (actors of unequal speed): it holds the newest
`capacity` slots of all streams together, and every transition it rebuilds is the one the stream lived.

Frames encode (stream, step): every pixel of stream s's i-th frame holds s * STEPS_PER_STREAM + i + 1
(0 is the padding value), so a sampled stack names which stream and which of its frames it holds.
"""

import numpy as np
import pytest

from tfdqn.replay.ring import ReplayRing

STEPS_PER_STREAM = 1_000_000
FRAME_SHAPE = (2,)


class Trajectories:
    """What each stream's env showed the agent, frame by frame, and the order the ring was written in."""

    def __init__(self, num_streams):
        self.frames = [[] for _ in range(num_streams)]   # stream -> frame ids, final frames included
        self.episode = [[] for _ in range(num_streams)]  # stream -> episode number of each frame
        self.action, self.reward, self.terminated = {}, {}, {}  # frame id -> what followed it
        self.final = set()     # frame ids that are an episode's final frame (no transition of their own)
        self.written = []      # (stream, frame id) per ring slot, in write order
        self._episodes = [0] * num_streams

    def new_frame(self, stream):
        frame_id = stream * STEPS_PER_STREAM + len(self.frames[stream]) + 1
        self.frames[stream].append(frame_id)
        self.episode[stream].append(self._episodes[stream])
        return frame_id

    def end_episode(self, stream, final_id):
        self.final.add(final_id)
        self._episodes[stream] += 1


def _frame(frame_id):
    return np.full((1, *FRAME_SHAPE), frame_id, np.int64)


def _play(ring, trajectories, rates, adds, rng, end_probability=0.1, cut_every=0):
    """`adds` add() calls, each of one stream chosen with probability proportional to `rates`; episodes end
    at random, terminated or truncated; every `cut_every` adds all open episodes are cut (a restart)."""
    streams = rng.choice(len(rates), size=adds, p=np.asarray(rates) / np.sum(rates))
    current = {s: trajectories.new_frame(s) for s in range(len(rates)) if not trajectories.frames[s]}
    current.update({s: trajectories.frames[s][-1] for s in range(len(rates)) if s not in current})
    for t, stream in enumerate(streams):
        frame_id, next_id = current[stream], trajectories.new_frame(stream)
        ended = rng.random() < end_probability
        terminated = ended and rng.random() < 0.5
        action, reward = int(frame_id % 3), float(rng.normal())
        trajectories.action[frame_id], trajectories.reward[frame_id] = action, np.float32(reward)
        trajectories.terminated[frame_id] = terminated
        ring.add(_frame(frame_id), [action], [reward], [terminated], [ended and not terminated], _frame(next_id),
                 [stream])
        trajectories.written.append((stream, frame_id))
        if ended:
            trajectories.written.append((stream, next_id))
            trajectories.end_episode(stream, next_id)
            next_id = trajectories.new_frame(stream)
        current[stream] = next_id
        if cut_every and (t + 1) % cut_every == 0:
            for s in range(len(rates)):  # the open episodes end where they stand: the frame acted from is final
                frame_is_first = trajectories.episode[s][-1] != trajectories.episode[s][-2] if len(
                    trajectories.frames[s]) > 1 else True
                if not frame_is_first:
                    ring.cut_episodes(_frame(current[s]), [s])
                    trajectories.written.append((s, current[s]))
                    trajectories.end_episode(s, current[s])
                    current[s] = trajectories.new_frame(s)


def _expected_sampleable(trajectories, capacity, stack_size, n_step):
    """Frame ids of the transitions the ring may give: the newest `capacity` slots held, its stream's
    n_step newer slots written, and its stack's frames of the same episode still held."""
    held = trajectories.written[-capacity:]
    per_stream = {}
    for stream, frame_id in held:
        per_stream.setdefault(stream, []).append(frame_id)
    expected = set()
    for stream, ids in per_stream.items():
        for position, frame_id in enumerate(ids):
            index = frame_id - stream * STEPS_PER_STREAM - 1
            episode = trajectories.episode[stream]
            history = next((h for h in range(stack_size - 1) if index - h - 1 < 0
                            or episode[index - h - 1] != episode[index]), stack_size - 1)
            if frame_id not in trajectories.final and position < len(ids) - n_step and position - history >= 0:
                expected.add(frame_id)
    return expected


def _reference(trajectories, frame_id, stack_size, n_step, gamma):
    """(observation ids, reward, bootstrap, next observation ids) of the transition acted from `frame_id`,
    from the stream's true trajectory."""
    stream, index = divmod(frame_id - 1, STEPS_PER_STREAM)
    frames, episode = trajectories.frames[stream], trajectories.episode[stream]

    def stack(i):
        return [frames[j] if j >= 0 and episode[j] == episode[i] else 0 for j in range(i - stack_size + 1, i + 1)]

    reward, steps, bootstrap = 0.0, 0, 1.0
    while steps < n_step:
        current = frames[index + steps]
        reward += gamma ** steps * trajectories.reward[current]
        steps += 1
        if trajectories.terminated[current]:
            bootstrap = 0.0
            break
        if frames[index + steps] in trajectories.final:
            break
    bootstrap = 0.0 if bootstrap == 0.0 else gamma ** (steps - 1)
    return stack(index), reward, bootstrap, stack(index + steps)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unequal_streams_rebuild_their_true_trajectories(seed):
    """Three streams adding 8:3:1, random ends (terminated and truncated) and restarts, stack 4 and 3-step
    returns: every sampleable slot, and every sampled transition, is the one its stream lived."""
    stack_size, n_step, gamma, capacity = 4, 3, 0.9, 300
    rng = np.random.default_rng(seed)
    ring = ReplayRing(capacity, FRAME_SHAPE, np.int64, stack_size, num_streams=3, seed=seed, n_step=n_step,
                      gamma=gamma)
    trajectories = Trajectories(3)
    for round_ in range(4):  # checked before the ring wraps, then after several wraps
        _play(ring, trajectories, [8, 3, 1], 70 if round_ == 0 else 400, rng, cut_every=0 if round_ < 2 else 97)
        everything = np.arange(capacity)
        sampleable = everything[ring.is_sampleable(everything)]
        batch = ring.gather(sampleable)
        assert set(batch.observation[:, -1, 0].tolist()) == _expected_sampleable(trajectories, capacity, stack_size,
                                                                                  n_step)
        assert len(sampleable) == len(ring)
        drawn = ring.gather(ring.sample_indices(len(ring), draws=512))
        for b in range(len(drawn.action)):
            observation = drawn.observation[b, :, 0].tolist()
            expected, reward, bootstrap, following = _reference(trajectories, observation[-1], stack_size,
                                                                n_step, gamma)
            assert observation == expected
            assert drawn.next_observation[b, :, 0].tolist() == following
            assert drawn.action[b] == trajectories.action[observation[-1]]
            assert drawn.reward[b] == pytest.approx(reward, rel=1e-5, abs=1e-6)
            assert drawn.bootstrap[b] == pytest.approx(bootstrap)
            assert (drawn.observation[b] == drawn.observation[b][:, :1]).all()  # every pixel holds its frame id


def test_two_streams_adding_ten_to_one_are_sampled_as_their_share_of_the_newest_capacity():
    """Samples follow the data: the slow stream's share of 20,000 samples is its share of the newest
    `capacity` transitions (within 3 points), and its samples are no older than the fast stream's."""
    capacity, rates = 20_000, (10, 1)
    ring = ReplayRing(capacity, FRAME_SHAPE, np.int64, num_streams=2, seed=0)
    steps = [0, 0]
    frame_id = np.zeros((1, *FRAME_SHAPE), np.int64)
    for t in range(3 * capacity):  # stream 1 adds once for every 10 adds of stream 0
        stream = 1 if t % (sum(rates)) == sum(rates) - 1 else 0
        frame_id[:] = t + 1  # the global add index: how old a sample is
        ended = steps[stream] % 200 == 199
        ring.add(frame_id, [stream], [0.0], [ended], [False], frame_id, [stream])
        steps[stream] += 1
    added = np.arange(3 * capacity) % sum(rates) == sum(rates) - 1  # whether add t was stream 1's
    newest = added[-capacity:]  # the newest `capacity` adds (final frames take a few slots among them)
    batch = ring.gather(ring.sample_indices(1000, draws=20_000))
    age = 3 * capacity - batch.observation[:, 0]  # adds since the sample's frame
    from_slow = added[batch.observation[:, 0] - 1]
    assert abs(from_slow.mean() - newest.mean()) < 0.03
    assert age.max() < capacity and abs(np.median(age) - capacity / 2) < 0.05 * capacity
    assert abs(np.median(age[from_slow]) - np.median(age[~from_slow])) < 0.1 * capacity


def test_a_ring_saved_by_its_dirty_chunks_restores_exactly(monkeypatch):
    """Unequal streams after wraps, saved as a checkpoint saves it (every chunk, then only the chunks
    written since, with the counters through JSON) and restored into a fresh ring: every slot record,
    every count and the sampling RNG come back, so both rings go on drawing the same batches. A slow
    stream's newest slot sits in an old chunk and is linked to its next slot later: that chunk is dirty."""
    import json

    monkeypatch.setattr("tfdqn.replay.ring.CHUNK_SLOTS", 64)
    rng = np.random.default_rng(7)
    original = ReplayRing(300, FRAME_SHAPE, np.int64, 4, num_streams=3, seed=3, n_step=3, gamma=0.9)
    trajectories = Trajectories(3)
    saved = {}

    def save():
        for chunk in original.dirty_chunks():
            saved[chunk] = {name: array.copy() for name, array in original.chunk_arrays(chunk).items()}
        original.mark_saved(original.dirty_chunks())
        return json.loads(json.dumps(original.counters()))

    _play(original, trajectories, [20, 3, 1], 700, rng, cut_every=97)
    save()
    _play(original, trajectories, [20, 3, 1], 40, rng)
    counters = save()
    restored = ReplayRing(300, FRAME_SHAPE, np.int64, 4, num_streams=3, seed=99, n_step=3, gamma=0.9)
    for chunk in range(restored.num_chunks):
        restored.load_chunk(chunk, saved[chunk])
    restored.load_counters(counters)
    assert len(restored) == len(original)
    for chunk in range(original.num_chunks):
        for name, array in original.chunk_arrays(chunk).items():
            np.testing.assert_array_equal(restored.chunk_arrays(chunk)[name], array, err_msg=f"{name}, chunk {chunk}")
    for ring in (original, restored):
        _play(ring, Trajectories(3), [1, 1, 1], 50, np.random.default_rng(1))
    for a, b in zip(original.sample(256), restored.sample(256)):
        np.testing.assert_array_equal(a, b)
