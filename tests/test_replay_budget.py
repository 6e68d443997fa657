"""The ring's memory budget: frames that compress worse than the budget allows cost transitions held, never
memory beyond it; what is held samples exactly as the unbudgeted ring samples the same slots."""

import json
import sys

import numpy as np
import pytest

from tfdqn.replay.frame_store import EMPTY_CODE_BYTES, code_memory
from tfdqn.replay.ring import ReplayRing
from tfdqn.replay.samplers import PrioritizedSampler, UniformSampler

SHAPE = (32, 32)  # 1,024 bytes a frame


def _rings(capacity, held_frames, prioritized, seed=0):
    """(budgeted zstd ring that can hold about `held_frames` incompressible frames, raw ring of the same size)."""
    def ring(compression, budget=0):
        sampler = PrioritizedSampler(0.6, 1e-6) if prioritized else UniformSampler()
        return ReplayRing(capacity, SHAPE, np.uint8, 4, num_streams=3, seed=seed, n_step=3, gamma=0.9,
                          sampler=sampler, compression=compression, memory_budget=budget)
    up_front = ring("zstd").nbytes
    return ring("zstd", up_front + held_frames * code_memory(1024 + 16)), ring("none")


def _step(rings, t, rng, noisy):
    streams = np.sort(rng.choice(3, size=rng.integers(1, 4), replace=False))
    frames = (rng.integers(0, 256, size=(len(streams), *SHAPE), dtype=np.uint8) if noisy
              else np.full((len(streams), *SHAPE), t % 7, np.uint8))
    terminated = rng.random(len(streams)) < 0.02
    truncated = (rng.random(len(streams)) < 0.02) & ~terminated
    for ring in rings:
        ring.add(frames, np.full(len(streams), t % 4), np.full(len(streams), t % 3 - 1.0), terminated, truncated,
                 frames[::-1], streams=streams)


def _check_held_transitions_match(budgeted, raw):
    everything = np.arange(budgeted.capacity)
    sampleable = np.flatnonzero(budgeted.is_sampleable(everything))
    assert len(sampleable) == len(budgeted) > 0
    assert set(sampleable) <= set(np.flatnonzero(raw.is_sampleable(everything)))
    for a, b in zip(budgeted.gather(sampleable), raw.gather(sampleable)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_incompressible_frames_cost_transitions_never_memory(prioritized, capsys):
    budgeted, raw = _rings(600, 200, prioritized)
    rng = np.random.default_rng(1)
    for t in range(900):
        _step([budgeted, raw], t, rng, noisy=True)
        assert budgeted.memory_bytes() <= budgeted.memory_budget
        if t % 150 == 149:
            _check_held_transitions_match(budgeted, raw)
            for _ in range(3):  # every draw is a held, sampleable transition
                drawn = budgeted.sample_indices(32, draws=64)
                assert budgeted.is_sampleable(drawn).all()
    assert 150 < budgeted.fewest_held < 230 and budgeted._held[0] < 230
    warning = capsys.readouterr().err.splitlines()
    assert len(warning) == 1 and warning[0].startswith("warning: replay frames take ")
    assert "more than the memory budget of" in warning[0] and "holding the newest" in warning[0]


def test_the_ring_fills_again_once_frames_compress(capsys):
    budgeted, raw = _rings(600, 200, prioritized=True)
    rng = np.random.default_rng(2)
    for t in range(400):
        _step([budgeted, raw], t, rng, noisy=True)
    assert budgeted._held[0] < 230
    for t in range(400, 1400):  # a plain screen: about 20 bytes a frame
        _step([budgeted, raw], t, rng, noisy=False)
    assert budgeted._held[0] == budgeted.capacity and len(budgeted) == len(raw)
    _check_held_transitions_match(budgeted, raw)
    for a, b in zip(budgeted.sample_stacked(2, 32, 0.5), raw.sample_stacked(2, 32, 0.5)):
        np.testing.assert_array_equal(a, b)  # the same sampler state and RNG: the same batches again
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_a_ring_that_vacated_slots_saves_and_restores_exactly(tmp_path):
    budgeted, raw = _rings(600, 200, prioritized=True)
    rng = np.random.default_rng(3)
    for t in range(700):
        _step([budgeted, raw], t, rng, noisy=t % 3 == 0)
    for chunk in range(budgeted.num_chunks):
        np.savez(tmp_path / f"{chunk}.npz", **budgeted.chunk_arrays(chunk))
    counters = json.loads(json.dumps(budgeted.counters()))
    restored = _rings(600, 200, prioritized=True, seed=9)[0]
    for chunk in range(restored.num_chunks):
        with np.load(tmp_path / f"{chunk}.npz") as arrays:
            restored.load_chunk(chunk, arrays)
    restored.load_counters(counters)
    restored.sampler.load_arrays(budgeted.sampler.arrays())
    assert restored.memory_bytes() == budgeted.memory_bytes() and len(restored) == len(budgeted)
    for a, b in zip(budgeted.sample_stacked(2, 32, 0.5), restored.sample_stacked(2, 32, 0.5)):
        np.testing.assert_array_equal(a, b)


def test_a_checkpoint_from_before_the_held_counter_restores_as_full():
    ring = ReplayRing(100, SHAPE, np.uint8, 4, seed=0)
    counters = json.loads(json.dumps(ring.counters()))
    del counters["held"]  # as an older release wrote it
    counters["filled"] = [40]
    ring.load_counters(counters)
    assert ring._held[0] == 40


def test_a_budget_needs_compression():
    with pytest.raises(ValueError, match="memory_budget = 5000000 needs compression"):
        ReplayRing(100, SHAPE, np.uint8, memory_budget=5_000_000)
    assert sys.getsizeof(b"") == EMPTY_CODE_BYTES
