"""Prioritized replay (Schaul et al. 2016) on both rings: draw frequencies against p^alpha by a chi-square
test, refused slots never drawn, importance weights and priority updates against a brute-force reference,
and the device ring's fused updates against single ones."""

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from tfdqn.replay.device import DeviceReplay
from tfdqn.replay.ring import ReplayRing
from tfdqn.replay.graph_samplers import GraphPrioritizedSampler
from tfdqn.replay.samplers import PrioritizedSampler

ALPHA, EPSILON = 0.6, 1e-6


def _filled(kind, capacity=1000, stack_size=1, seed=0):
    """A ring of `capacity` slots, written past its capacity by 2 streams with episodes of 1..30 steps
    (so it holds final-frame slots and slots whose history was evicted), every transition's priority then
    set from a random loss."""
    ring_type, sampler = (ReplayRing, PrioritizedSampler) if kind == "host" else (DeviceReplay, GraphPrioritizedSampler)
    ring = ring_type(capacity, (1,), np.int32, stack_size, num_streams=2, seed=seed,
                     sampler=sampler(ALPHA, EPSILON))
    rng = np.random.default_rng(seed)
    remaining = rng.integers(1, 30, 2)
    for t in range(capacity + 300):
        remaining -= 1
        ended = remaining == 0
        remaining[ended] = rng.integers(1, 30, ended.sum())
        ring.add(np.full((2, 1), t), [0, 1], [1.0, 1.0], ended & (t % 2 == 0), ended & (t % 2 == 1), np.zeros((2, 1)))
    if kind == "accelerator":
        ring.flush()
    sampleable = np.flatnonzero(ring.is_sampleable(np.arange(capacity)))
    losses = rng.exponential(size=len(sampleable))
    ring.update_priorities(sampleable, losses, ring.drawn(sampleable))
    return ring, sampleable, losses


def _leaves(ring):
    return ring.sampler.tree.leaves() if isinstance(ring.sampler, PrioritizedSampler) else ring.sampler.arrays()["priorities"]


@pytest.mark.parametrize("kind", ["host", "accelerator"])
def test_draw_frequencies_match_p_alpha_and_refused_slots_are_never_drawn(kind):
    ring, sampleable, losses = _filled(kind)
    if kind == "host":
        drawn = np.concatenate([ring.sample_indices(32, draws=32 * 625) for _ in range(10)])
    else:
        sample = tf.function(lambda: ring.sample_in_graph(4000)[-1], autograph=False)
        drawn = np.concatenate([sample().numpy() for _ in range(50)])
    assert np.isin(drawn, sampleable).all()  # refused (final-only, newest, evicted history) never drawn
    expected = (losses + EPSILON) ** ALPHA
    counts = np.bincount(np.searchsorted(sampleable, drawn), minlength=len(sampleable))
    assert scipy.stats.chisquare(counts, expected / expected.sum() * len(drawn)).pvalue > 0.01


@pytest.mark.parametrize("kind", ["host", "accelerator"])
def test_importance_weights_and_priority_updates_match_a_brute_force_reference(kind):
    ring, sampleable, losses = _filled(kind, capacity=200)
    leaves = _leaves(ring)
    np.testing.assert_allclose(leaves[sampleable], (losses + EPSILON) ** ALPHA, rtol=1e-5)
    indices = ring.sample_indices(16, draws=32)
    weights = ring.stack(indices, 2, beta=0.4).weight
    probability = leaves[indices] / leaves.sum()
    reference = (len(ring) * probability.reshape(2, 16)) ** -0.4
    np.testing.assert_allclose(weights, reference / reference.max(axis=1, keepdims=True), rtol=1e-4)
    # A transition added now enters at the running maximum; a final frame at 0.
    top = float(np.max((losses + EPSILON) ** ALPHA))
    drawn = ring.drawn(sampleable[:4])
    ring.add(np.full((2, 1), -1), [0, 0], [0.0, 0.0], [False, True], [False, False], np.zeros((2, 1)))
    if kind == "accelerator":
        ring.flush()
    newest = [(ring._cursor[0] - 3) % ring.capacity, (ring._cursor[0] - 2) % ring.capacity]
    final = (ring._cursor[0] - 1) % ring.capacity
    after = _leaves(ring)
    np.testing.assert_allclose(after[newest], top, rtol=1e-5)
    assert after[final] == 0.0
    # A slot rewritten since it was drawn keeps its new priority: the stale loss is dropped.
    rewritten = np.isin(sampleable[:4], [*newest, final])
    ring.update_priorities(sampleable[:4], np.full(4, 50.0), drawn)
    after = _leaves(ring)
    np.testing.assert_allclose(after[sampleable[:4][~rewritten]], (50.0 + EPSILON) ** ALPHA, rtol=1e-5)


def test_each_update_of_a_fused_device_call_samples_with_the_priorities_the_previous_one_wrote():
    """One call of k in-graph updates leaves the weights, priorities and RNGs that k calls of one leave."""
    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent

    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"],
                                     {"replay.sampler": "prioritized", "compute.update_jit_compile": False})
    finals = []
    for calls in ([4], [1, 1, 1, 1]):
        agent = make_agent(config, (4,), np.float32, 2)
        ring = DeviceReplay(500, (4,), np.float32, sampler=GraphPrioritizedSampler(ALPHA, EPSILON))
        rng = np.random.default_rng(0)
        for t in range(400):
            ring.add(rng.normal(size=(1, 4)), [t % 2], [1.0], [t % 37 == 36], [False], rng.normal(size=(1, 4)))
        ring.flush()
        update = agent.learner.make_replay_update(lambda: ring.sample_in_graph(16, 0.4), 16,
                                                  ring.sampler.write_in_graph)
        for k in calls:
            update(tf.constant(k, tf.int32))
        assert update.experimental_get_tracing_count() == 1
        finals.append((agent.online.get_weights(), ring.sampler.arrays()["priorities"],
                       float(ring.sampler.max_priority.numpy())))
    for a, b in zip(finals[0][0], finals[1][0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(finals[0][1], finals[1][1], rtol=1e-5)
    assert finals[0][2] == pytest.approx(finals[1][2]) and finals[0][2] > 1.0
