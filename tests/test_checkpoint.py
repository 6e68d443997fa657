import errno
import hashlib
import json
import pathlib

import numpy as np
import psutil
import pytest

from tfdqn.agent.agent import make_agent
from tfdqn.run import checkpoint as checkpoint_module
from tfdqn.run.checkpoint import Checkpointer
from tfdqn.run.markers import complete_steps
from tfdqn.config import DQNConfig
from tfdqn.replay.ring import CHUNK_SLOTS, ReplayRing


def _parts(seed=0, capacity=3 * CHUNK_SLOTS):
    agent = make_agent(DQNConfig(), (4,), np.float32, 2)
    replay = ReplayRing(capacity, (4,), np.float32, seed=seed)
    return agent, replay


def files_and_hashes(directory: pathlib.Path) -> dict:
    """Every file in `directory` by name, with the sha256 of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def _fill(replay, start, count):
    for t in range(start, start + count):
        frame = np.full((1, 4), t, np.float32)
        replay.add(frame, [t % 2], [1.0], [t % 97 == 0], [False], frame + 1)


def test_a_save_writes_only_the_chunks_written_since_the_last(tmp_path):
    agent, replay = _parts()
    checkpointer = Checkpointer(tmp_path, agent, replay)
    _fill(replay, 0, CHUNK_SLOTS + 10)
    first = checkpointer.save(1000, {"n": 1})
    _fill(replay, CHUNK_SLOTS + 10, 100)  # stays inside chunk 1
    second = checkpointer.save(2000, {"n": 2})
    assert sorted(p.name for p in tmp_path.glob("chunk-*")) == ["chunk-00000-1000.npz", "chunk-00001-1000.npz",
                                                                "chunk-00001-2000.npz"]
    assert second["bytes"] < first["bytes"]
    manifest = json.loads((tmp_path / "replay-2000.json").read_text())
    assert manifest["chunks"] == {"0": "chunk-00000-1000.npz", "1": "chunk-00001-2000.npz"}


def test_restore_brings_back_replay_counters_rng_and_loop_state(tmp_path):
    agent, replay = _parts()
    _fill(replay, 0, 5000)
    Checkpointer(tmp_path, agent, replay).save(5000, {"frame": np.arange(3)})
    expected = replay.sample(64)
    agent2, replay2 = _parts(seed=99)
    steps, state = Checkpointer(tmp_path, agent2, replay2).restore_latest()
    assert steps == 5000 and state["frame"].tolist() == [0, 1, 2] and len(replay2) == len(replay)
    for a, b in zip(expected, replay2.sample(64)):  # same contents and the same sampling RNG position
        np.testing.assert_array_equal(a, b)


def test_keeps_two_complete_checkpoints_and_prunes_the_rest(tmp_path):
    agent, replay = _parts()
    checkpointer = Checkpointer(tmp_path, agent, replay)
    for step in (1, 2, 3, 4):
        _fill(replay, step * 1000, 1000)
        checkpointer.save(step * 1000, {})
    assert complete_steps(tmp_path) == [4000, 3000]
    assert not list(tmp_path.glob("*-1000*")) and not list(tmp_path.glob("*-2000.*"))


@pytest.mark.parametrize("damage", ["truncate_tf", "corrupt_chunk", "delete_state"])
def test_a_broken_newest_checkpoint_falls_back_with_a_warning(tmp_path, capsys, damage):
    agent, replay = _parts()
    checkpointer = Checkpointer(tmp_path, agent, replay)
    _fill(replay, 0, 3000)
    checkpointer.save(3000, {"at": 3000})
    _fill(replay, 3000, 3000)
    checkpointer.save(6000, {"at": 6000})
    if damage == "truncate_tf":
        data = next(tmp_path.glob("ckpt-6000.data-*"))
        data.write_bytes(data.read_bytes()[:100])
    elif damage == "corrupt_chunk":
        (tmp_path / "chunk-00000-6000.npz").write_bytes(b"not a zip file")
    else:
        (tmp_path / "state-6000.pkl").unlink()
    before = files_and_hashes(tmp_path)
    agent2, replay2 = _parts()
    steps, state = Checkpointer(tmp_path, agent2, replay2).restore_latest()
    assert (steps, state) == (3000, {"at": 3000})
    warning = capsys.readouterr().err.strip().splitlines()
    assert len(warning) == 1 and "checkpoint at env step 6000" in warning[0] and "falling back" in warning[0]
    assert files_and_hashes(tmp_path) == before  # what could not be read is left as it is


def test_a_fallback_zeroes_the_chunks_a_failed_attempt_loaded(tmp_path):
    agent, replay = _parts()
    checkpointer = Checkpointer(tmp_path, agent, replay)
    _fill(replay, 0, CHUNK_SLOTS // 2)
    checkpointer.save(1, {})
    _fill(replay, CHUNK_SLOTS // 2, 2 * CHUNK_SLOTS)  # reaches chunk 2
    checkpointer.save(2, {})
    (tmp_path / "chunk-00002-2.npz").write_bytes(b"not a zip file")  # read after chunks 0 and 1
    agent2, replay2 = _parts()
    assert Checkpointer(tmp_path, agent2, replay2).restore_latest() == (1, {})
    for name, array in replay2.chunk_arrays(1).items():  # loaded by the failed attempt, cleared by the fallback
        assert not array.any(), name
    _, expected = _parts()
    _fill(expected, 0, CHUNK_SLOTS // 2)
    assert len(replay2) == len(expected)
    for a, b in zip(expected.chunk_arrays(0).values(), replay2.chunk_arrays(0).values()):
        np.testing.assert_array_equal(a, b)


def test_a_resumed_ring_commits_only_the_memory_its_restored_transitions_need(tmp_path):
    """A ring whose checkpoint holds 1 of its 12 chunks: restoring it commits about what filling it did,
    not the whole ring (zero-filling the chunks the checkpoint lacks would commit all 12)."""
    frame_shape = (48, 48)
    agent = make_agent(DQNConfig(), (4,), np.float32, 2)
    ring = ReplayRing(12 * CHUNK_SLOTS, frame_shape, np.uint8)
    process = psutil.Process()
    before = process.memory_info().rss
    for t in range(CHUNK_SLOTS - 100):
        frame = np.full((1, *frame_shape), t % 251, np.uint8)
        ring.add(frame, [0], [1.0], [False], [False], frame)
    filled = process.memory_info().rss - before
    Checkpointer(tmp_path, agent, ring).save(1, {})
    restored = ReplayRing(12 * CHUNK_SLOTS, frame_shape, np.uint8)
    before = process.memory_info().rss
    Checkpointer(tmp_path, agent, restored).restore_latest()
    grown = process.memory_info().rss - before
    frames_written = (CHUNK_SLOTS - 100) * np.prod(frame_shape)  # 37.5 MB of a 453 MB ring
    # Filling committed about the frames it wrote (RSS moves by pages, and the process may free a little meanwhile).
    assert 0.9 * frames_written <= filled and grown < 1.5 * filled < restored.nbytes / 4, (grown, filled)
    assert len(restored) == len(ring)


def test_a_checkpoint_without_its_marker_does_not_exist(tmp_path):
    agent, replay = _parts()
    checkpointer = Checkpointer(tmp_path, agent, replay)
    _fill(replay, 0, 100)
    checkpointer.save(100, {"at": 100})
    checkpointer.save(200, {"at": 200})
    (tmp_path / "ckpt-200.complete").unlink()  # as if killed before the marker was written
    assert Checkpointer(tmp_path, *_parts()).restore_latest()[0] == 100


def test_saving_a_step_again_and_leftovers_of_a_killed_save(tmp_path):
    agent, replay = _parts()
    checkpointer = Checkpointer(tmp_path, agent, replay)
    _fill(replay, 0, 100)
    checkpointer.save(100, {"at": 100})
    (tmp_path / "ckpt-150_temp").mkdir()  # what TensorFlow leaves when killed mid-save
    (tmp_path / "state-150.pkl.tmp").write_bytes(b"half")
    checkpointer.save(200, {"at": "first"})
    checkpointer.save(200, {"at": "second"})  # a resumed run reaching a step it saved before
    assert not (tmp_path / "ckpt-150_temp").exists() and not (tmp_path / "state-150.pkl.tmp").exists()
    assert Checkpointer(tmp_path, *_parts()).restore_latest() == (200, {"at": "second"})


def test_a_save_that_failed_part_way_leaves_its_chunks_for_the_next_save(tmp_path, monkeypatch):
    agent, replay = _parts()
    checkpointer = Checkpointer(tmp_path, agent, replay)
    _fill(replay, 0, 2 * CHUNK_SLOTS)
    checkpointer.save(1000, {})
    _fill(replay, 2 * CHUNK_SLOTS, 2 * CHUNK_SLOTS)  # fills chunk 2 and wraps over chunk 0
    write, chunks_written = checkpoint_module.atomic_write, []

    def disk_full_at_the_second_chunk(path, data):
        if path.name.startswith("chunk-") and path.name.endswith("-2000.npz"):
            chunks_written.append(path.name)
            if len(chunks_written) == 2:
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return write(path, data)

    monkeypatch.setattr(checkpoint_module, "atomic_write", disk_full_at_the_second_chunk)
    with pytest.raises(OSError):
        checkpointer.save(2000, {})  # one chunk written, the next refused, no marker
    assert len(chunks_written) == 2
    monkeypatch.setattr(checkpoint_module, "atomic_write", write)
    checkpointer.save(3000, {})
    agent2, replay2 = _parts(seed=99)
    assert Checkpointer(tmp_path, agent2, replay2).restore_latest()[0] == 3000
    for chunk in range(replay.num_chunks):
        for name, saved in replay.chunk_arrays(chunk).items():
            np.testing.assert_array_equal(replay2.chunk_arrays(chunk)[name], saved, err_msg=f"chunk {chunk} {name}")
    assert replay2.counters() == replay.counters()
