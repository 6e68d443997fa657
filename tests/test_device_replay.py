"""The tf.Variable replay's in-graph sampler against the host ring's predicate and gather."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO, TINY, train_in_process
from tests.test_replay import _all_sampleable, _play
from tfdqn.replay.device import DeviceReplay


@pytest.fixture(autouse=True)
def device_ring(monkeypatch):
    monkeypatch.setattr("tests.test_replay.ReplayRing", DeviceReplay)


@pytest.mark.parametrize("stack_size, num_streams", [(1, 1), (4, 1), (4, 3)])
def test_graph_gather_equals_host_gather_for_every_sampleable_slot(stack_size, num_streams):
    ring, _ = _play(stack_size, num_streams, slots=24, adds=70)
    indices = _all_sampleable(ring)
    host = ring.gather(indices)
    graph = ring.gather_in_graph(tf.constant(indices))
    for name, a, b in zip(host._fields, host, graph):
        np.testing.assert_array_equal(a, b.numpy(), err_msg=name)


@pytest.mark.parametrize("stack_size", [1, 4])
def test_graph_n_step_returns_with_clipped_rewards_equal_the_host_rings(stack_size):
    """n-step sums of rewards each clipped to its sign, the discount to bootstrap with and the next
    observation m steps on: rebuilt in the graph as the host ring rebuilds them."""
    from tests.test_replay import EPISODE_LENGTHS, FRAME_SHAPE, Reference, _rotations

    ring = DeviceReplay(3 * 24, FRAME_SHAPE, np.int32, stack_size, num_streams=3, seed=0, n_step=3, gamma=0.9,
                        clip_rewards=True)
    reference = Reference(stack_size, 3 * 24, _rotations(EPISODE_LENGTHS, 3), "mixed")
    for _ in range(70):
        reference.step(ring)
    indices = _all_sampleable(ring)
    host = ring.gather(indices)
    assert set(np.unique(host.reward)) - {0.0} and np.abs(host.reward).max() <= 1 + 0.9 + 0.81
    graph = ring.gather_in_graph(tf.constant(indices))
    for name, a, b in zip(host._fields, host, graph):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("stack_size, num_streams", [(4, 1), (4, 3)])
def test_graph_sampler_draws_only_sampleable_slots_and_repeats_for_a_seed(stack_size, num_streams):
    draws = []
    for _ in range(2):
        ring, _ = _play(stack_size, num_streams, slots=24, adds=70, seed=3)
        ring.flush()
        slot = ring.draw_uniform_in_graph(4000)
        accepted = ring._sampleable(slot).numpy()
        np.testing.assert_array_equal(accepted, ring.is_sampleable(slot.numpy()))
        batch = tf.function(lambda: ring.sample_in_graph(256))()
        draws.append([x.numpy() for x in batch])
        # Every sampled transition is one the host ring would rebuild the same way.
        observation = batch[0].numpy()
        sampleable = ring.gather(_all_sampleable(ring)).observation
        assert all((sampleable == row).all(axis=tuple(range(1, row.ndim + 1))).any() for row in observation[:32])
    for a, b in zip(*draws):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("loss", ["huber", "implicit_quantile"])
def test_replay_fed_fused_updates_trace_once(loss):
    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent

    config = config_lib.build_config([config_lib.CONFIG_DIR / "cartpole.yaml"], {"learner.loss": loss,
                                                                                 "learner.num_tau_samples": 8})
    agent = make_agent(config, (4,), np.float32, 2)
    ring = DeviceReplay(256, (4,), np.float32)
    rng = np.random.default_rng(0)
    for t in range(100):
        ring.add(rng.normal(size=(1, 4)), [t % 2], [1.0], [t % 30 == 29], [False], rng.normal(size=(1, 4)))
    ring.flush()
    update = agent.learner.make_replay_update(lambda: ring.sample_in_graph(16), 16)
    for k in (1, 3, 8):
        metrics = update(tf.constant(k, tf.int32))
        assert np.isfinite(metrics["td_loss"].numpy())
    assert int(agent.learner.updates.numpy()) == 12 and update.experimental_get_tracing_count() == 1



@pytest.mark.slow
def test_training_with_the_accelerator_replay(tmp_path):
    # Learning starts at 100 instead of TINY's 500: the same 1000 updates (with a checkpoint at 1000) in 1100 steps
    result = train_in_process(*TINY, "--total-steps", "1100", "--learning-starts", "100", "--set",
                              "run.final_eval_episodes=1", "--set", "replay.device=accelerator", "--logdir",
                              str(tmp_path), "--run-name", "a")
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["updates"] == 1000 and summary["replay_device"] == "accelerator"


def test_graph_sampler_follows_streams_that_add_at_unequal_rates():
    """Actors of unequal speed write one shared ring: the graph's gather follows each stream's links as the
    host's does, and its draws are spread over the streams as the held transitions are."""
    from tests.test_replay_streams import FRAME_SHAPE, STEPS_PER_STREAM, Trajectories
    from tests.test_replay_streams import _play as play_streams

    ring = DeviceReplay(300, FRAME_SHAPE, np.int64, 4, num_streams=3, seed=0)
    play_streams(ring, Trajectories(3), [8, 3, 1], 1500, np.random.default_rng(0), cut_every=97)
    indices = _all_sampleable(ring)
    host = ring.gather(indices)
    graph = ring.gather_in_graph(tf.constant(indices))
    for name, a, b in zip(host._fields, host, graph):
        np.testing.assert_array_equal(a, b.numpy(), err_msg=name)
    drawn = tf.function(lambda: ring.sample_in_graph(4000))()[0].numpy()[:, -1, 0]
    held = host.observation[:, -1, 0] // STEPS_PER_STREAM
    shares = [np.mean(drawn // STEPS_PER_STREAM == s) - np.mean(held == s) for s in range(3)]
    assert max(abs(share) for share in shares) < 0.04


PEAK_DURING_CONSTRUCTION = """
import resource, sys
import numpy as np, tensorflow as tf
from tfdqn.replay.device import DeviceReplay
tf.zeros([1])  # TensorFlow's own start-up is not the replay's
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
replay = DeviceReplay(100_000, (84, 84), np.uint8, stack_size=4)
built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
frame = np.full((1, 84, 84), 7, np.uint8)
replay.add(frame, [0], [1.0], [False], [False], frame)
replay.flush()  # the first write into the variable's frames
written = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((built - before) * 1024, (written - before) * 1024, replay.nbytes, replay.chunk_arrays(0)["frames"][0, 0, 0])
"""


def test_building_the_device_replay_needs_its_frames_once_not_twice():
    """The frames variable adopts the buffer of the zeros it is made from (TensorFlow's AssignVariableOp never
    copies its value, on any device: tensorflow/core/kernels/resource_variable_ops.cc), and the first write does
    not copy it either (copy-on-write copies only while another tensor shares the buffer, and an eager variable
    keeps no initial value): the process's peak resident memory grows by about the replay's own bytes (700 MB
    here), as the memory check assumes, once built and once written to. On a GPU the same kernels hold the frames
    in device memory."""
    result = subprocess.run([sys.executable, "-c", PEAK_DURING_CONSTRUCTION], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    built, written, nbytes, first = map(int, result.stdout.split())
    assert first == 7  # the write landed
    assert nbytes > 700_000_000 and built < 1.2 * nbytes and written < 1.2 * nbytes, (built, written, nbytes)
