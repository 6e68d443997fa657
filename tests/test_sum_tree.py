"""The prioritized-replay sum trees: the NumPy tree against a brute-force prefix sum, its draw
frequencies against p^alpha, the tf.Variable tree against the NumPy tree, and the Python peer."""

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from tfdqn.replay.graph_sum_tree import GraphSumTree
from tfdqn.replay.sum_tree import SumTree
from tools.peer_sum_tree import PythonPrioritizedSampler


def reference_find(priorities: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The leaf whose [prefix, prefix + p) interval holds each value; a value at the total, the last positive leaf."""
    cumulative = np.cumsum(priorities)
    leaf = np.searchsorted(cumulative, values, side="right")
    return np.where(leaf >= len(priorities), np.flatnonzero(priorities)[-1], leaf)


def integer_priorities(rng, capacity: int) -> np.ndarray:
    """Small integers, a third of them 0: every prefix sum is exact in float32 and float64, so boundaries
    are exact and the trees must agree with the reference on them too."""
    priorities = rng.integers(1, 10, capacity).astype(np.float64) * (rng.random(capacity) > 1 / 3)
    priorities[rng.integers(capacity)] = 5.0  # at least one positive leaf
    return priorities


def probe_values(priorities: np.ndarray) -> np.ndarray:
    """Every interval boundary, the total itself, and points inside the intervals."""
    total = priorities.sum()
    boundaries = np.concatenate([[0.0], np.cumsum(priorities)])
    return np.concatenate([boundaries, boundaries[:-1] + 0.5, [total, np.nextafter(total, 0)]])


@pytest.mark.parametrize("capacity", [1, 7, 1000])
def test_numpy_tree_matches_brute_force(capacity):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    priorities = integer_priorities(rng, capacity)
    order = rng.permutation(capacity)
    tree.set(order, priorities[order])
    assert tree.total == priorities.sum()
    np.testing.assert_array_equal(tree.get(np.arange(capacity)), priorities)
    values = probe_values(priorities)
    found = tree.find(values)
    assert found.dtype == np.int64
    np.testing.assert_array_equal(found, reference_find(priorities, values))
    assert (priorities[found] > 0).all()

    floats = rng.random(capacity) * (rng.random(capacity) > 0.2) + (np.arange(capacity) == 0)
    tree.set(np.arange(capacity), floats)
    assert tree.total == pytest.approx(floats.sum(), rel=1e-12)
    values = np.concatenate([rng.random(5000) * tree.total, [0.0, tree.total]])
    found = tree.find(values)
    np.testing.assert_array_equal(found[:-2], reference_find(floats, values[:-2]))
    assert (floats[found] > 0).all()


def test_numpy_tree_duplicates_last_write_wins_and_refusals():
    tree = SumTree(10)
    tree.set([3, 4, 3, 3, 9], [1.0, 2.0, 7.0, 4.0, 0.5])
    np.testing.assert_array_equal(tree.get([3, 4, 9]), [4.0, 2.0, 0.5])
    assert tree.total == 6.5
    tree.set([4, 4], 0.0)  # a scalar broadcasts
    assert tree.total == 4.5 and tree.find([4.4999, 4.5]).tolist() == [9, 9]
    with pytest.raises(ValueError, match="nan"):
        tree.set([1, 2], [1.0, np.nan])
    with pytest.raises(ValueError, match="-1.0"):
        tree.set([1], [-1.0])
    with pytest.raises(IndexError):
        tree.set([10], [1.0])
    with pytest.raises(ValueError, match="every priority is 0"):
        SumTree(5).sample(4, np.random.default_rng(0))


def test_stratified_draws_follow_priorities_and_skip_zero_leaves():
    rng = np.random.default_rng(1)
    priorities = rng.random(1000) ** 0.6
    priorities[rng.choice(1000, 50, replace=False)] = 0.0
    tree = SumTree(1000)
    tree.set(np.arange(1000), priorities)
    draws = np.concatenate([tree.sample(32, rng) for _ in range(6250)])
    counts = np.bincount(draws, minlength=1000)
    positive = priorities > 0
    assert counts[~positive].sum() == 0
    expected = priorities[positive] / priorities.sum() * len(draws)
    assert scipy.stats.chisquare(counts[positive], expected).pvalue > 0.01
    redrawn = tree.sample_proportional(20_000, rng)
    assert positive[redrawn].all()


def test_numpy_tree_load_leaves_round_trips():
    rng = np.random.default_rng(2)
    tree = SumTree(37)
    tree.set(rng.integers(0, 37, 100), rng.random(100))
    restored = SumTree(37)
    restored.load_leaves(tree.leaves())
    for restored_level, level in zip(restored._levels, tree._levels):  # the same sums: the same tree
        np.testing.assert_allclose(restored_level, level, rtol=1e-12)
    with pytest.raises(ValueError):
        restored.load_leaves(np.ones(36))


def test_graph_tree_matches_numpy_tree_inside_tf_function():
    rng = np.random.default_rng(3)
    capacity = 1000
    priorities = integer_priorities(rng, capacity)
    indices = np.concatenate([rng.permutation(capacity), rng.integers(0, capacity, 200)])
    last_write = {index: k for k, index in enumerate(indices)}
    writes = np.full(len(indices), 99.0)  # every earlier write of a repeated index is wrong; only the last is right
    writes[list(last_write.values())] = priorities[list(last_write.keys())]
    numpy_tree, graph_tree = SumTree(capacity), GraphSumTree(capacity)
    numpy_tree.set(indices, writes)

    set_fn = tf.function(graph_tree.set, autograph=False, jit_compile=False)
    set_fn(tf.constant(indices, tf.int64), tf.constant(writes, tf.float32))
    np.testing.assert_array_equal(graph_tree.leaves(), numpy_tree.leaves())
    assert float(graph_tree.total()) == numpy_tree.total == priorities.sum()
    np.testing.assert_array_equal(graph_tree.get(tf.constant([0, 5, 999], tf.int64)), priorities[[0, 5, 999]])

    values = probe_values(priorities)
    find_fn = tf.function(graph_tree.find, autograph=False, jit_compile=False)
    found = find_fn(tf.constant(values, tf.float32)).numpy()
    np.testing.assert_array_equal(found, numpy_tree.find(values))

    # Float priorities: any value well inside an interval lands on the same leaf in both trees.
    floats = rng.random(capacity) * (rng.random(capacity) > 0.2) + (np.arange(capacity) == 0)
    numpy_tree.set(np.arange(capacity), floats)
    set_fn(tf.constant(np.arange(capacity), tf.int64), tf.constant(floats, tf.float32))
    assert float(graph_tree.total()) == pytest.approx(numpy_tree.total, rel=1e-6)
    cumulative = np.cumsum(floats)
    values = rng.random(5000) * numpy_tree.total
    gap = np.abs(values[:, None] - cumulative[None, :]).min(axis=1)
    values = values[gap > 1e-3]
    np.testing.assert_array_equal(find_fn(tf.constant(values, tf.float32)).numpy(), numpy_tree.find(values))


def test_graph_tree_sampling_never_draws_zero_leaves_and_traces_once():
    capacity = 100
    priorities = np.where(np.arange(capacity) % 3 == 0, 0.0, np.linspace(0.1, 2.0, capacity))
    tree = GraphSumTree(capacity)
    tree.load_leaves(priorities)
    generator = tf.random.Generator.from_seed(4)

    @tf.function(autograph=False, jit_compile=False)
    def step(new_priorities):
        drawn = tree.sample(32, generator)
        redrawn = tree.sample_proportional(8, generator)
        tree.set(drawn, new_priorities)
        return drawn, redrawn

    for _ in range(5):
        leaves_before = tree.leaves()
        drawn, redrawn = step(tf.fill([32], 0.5))
        assert (leaves_before[drawn.numpy()] > 0).all() and (leaves_before[redrawn.numpy()] > 0).all()
    assert step.experimental_get_tracing_count() == 1
    assert drawn.dtype == tf.int64

    tree.load_leaves(np.zeros(capacity))
    with pytest.raises(tf.errors.InvalidArgumentError, match="every priority is 0"):
        step(tf.fill([32], 0.5))


def test_graph_tree_load_leaves_round_trips():
    rng = np.random.default_rng(5)
    tree = GraphSumTree(37)
    tree.set(tf.constant(rng.integers(0, 37, 100)), tf.constant(rng.random(100), tf.float32))
    restored = GraphSumTree(37)
    restored.load_leaves(tree.leaves())
    np.testing.assert_array_equal(restored.variable.numpy(), tree.variable.numpy())
    with pytest.raises(ValueError, match="inf"):
        restored.load_leaves(np.full(37, np.inf))


def test_python_peer_agrees_with_numpy_tree():
    """The bench's peer (tools.peer_sum_tree) finds the leaves the NumPy tree finds, and weights as it does."""
    rng = np.random.default_rng(6)
    priorities = integer_priorities(rng, 13)
    peer, tree = PythonPrioritizedSampler(13, alpha=1.0), SumTree(13)
    peer.update(np.arange(13), priorities.astype(np.float64), epsilon=0.0)
    tree.set(np.arange(13), priorities)
    assert peer.sums.root() == tree.total
    values = np.cumsum(priorities)[priorities > 0] - 0.5  # inside each positive leaf's interval
    assert [peer.sums.retrieve(v) for v in values] == tree.find(values).tolist()
    indices, weights = peer.sample(8, beta=0.4)
    assert (priorities[indices] > 0).all()
    reference = (13 * priorities[indices] / priorities.sum()) ** -0.4
    np.testing.assert_allclose(weights, reference / reference.max(), rtol=1e-5)


def test_graph_tree_draws_a_million_slots_in_proportion_to_their_priorities():
    """2^20 slots, as `--preset rainbow --set replay.device=accelerator` holds on Atari. Every 97th slot has
    priority 0.01, a hundredth of an average slot: in float32 a draw lands on a grid of total x 2^-24, a
    sixteenth of an average slot, so too many such slots were never drawn (the float32 tree: 77% of them in these
    50M draws, against Poisson's 62%)."""
    capacity, draws_per_call, calls = 2 ** 20, 2 ** 20, 48
    rng = np.random.default_rng(0)
    priorities = 0.5 + rng.random(capacity)
    small = np.arange(capacity) % 97 == 0
    priorities[small] = 0.01
    tree = GraphSumTree(capacity)
    tree.load_leaves(priorities)
    generator = tf.random.Generator.from_seed(7)
    draw = tf.function(lambda: tree.sample(draws_per_call, generator), autograph=False)
    counts = np.zeros(capacity, np.int64)
    for _ in range(calls):
        counts += np.bincount(draw().numpy(), minlength=capacity)
    draws, total = draws_per_call * calls, priorities.sum()
    deciles = np.array_split(np.argsort(priorities, kind="stable"), 10)
    observed = np.array([counts[slots].sum() for slots in deciles])
    expected = np.array([priorities[slots].sum() for slots in deciles]) * draws / total
    assert scipy.stats.chisquare(observed, expected).pvalue > 1e-3
    never = (counts[small] == 0).mean()
    poisson = np.exp(-draws * 0.01 / total)
    assert abs(never - poisson) < 0.03, (never, poisson)
