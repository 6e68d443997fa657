"""Every perf/ and system/ tag a run writes can be nonzero in its mode, and each chart of the custom-scalars
layout finds its one tag in a real run."""

import re

import pytest
import tensorflow as tf
from tensorboard.plugins.custom_scalar import layout_pb2

from tfdqn import config as config_lib
from tfdqn.run.hooks import in_gib
from tfdqn.telemetry.layout import CHARTS, tag_regex
from tfdqn.telemetry.tensorboard import read_events

# The charts' tags a CartPole run without periodic evaluation or the async learner never writes (the GPU's on a
# machine without one): its layout leaves their charts out, and it writes every other chart's tag
UNWRITTEN = {"charts/eval_return", "perf/share_eval", "perf/share_wait", "system/gpu_util", "system/gpu_mem_gib"}


def _config(**run):
    return config_lib.resolve_config([], {"env.id": "CartPole", **{f"run.{k}": v for k, v in run.items()}})


def test_a_short_cartpole_run_writes_no_perf_or_system_tag_that_is_always_zero(cartpole_run):
    events = read_events(cartpole_run[0])
    tags = [tag for tag in events.Tags()["tensors"] if tag.startswith(("perf/", "system/"))]
    always_zero = [tag for tag in tags if all(float(tf.make_ndarray(e.tensor_proto)) == 0 for e in events.Tensors(tag))]
    assert tags and always_zero == []
    assert "perf/share_wait" not in tags and "perf/share_eval" not in tags


def test_the_layout_is_written_once_and_each_chart_finds_its_one_tag(cartpole_run):
    """The run's layout holds a chart for every tag its mode writes and none for a tag it never writes (this CPU
    CartPole run: no GPU, no async learner, no periodic evaluation): no chart of the first view stays blank."""
    events = read_events(cartpole_run[0])
    written = events.Tensors("custom_scalars__config__")
    assert [e.step for e in written] == [0]
    layout = layout_pb2.Layout.FromString(tf.make_ndarray(written[0].tensor_proto).item())
    charted = [chart.multiline.tag[0] for category in layout.category for chart in category.chart]
    tags = set(events.Tags()["tensors"])
    assert all(any(re.match(regex, tag) for tag in tags) for regex in charted), charted  # none stays blank
    assert {tag_regex(tag) for _, tag in CHARTS} - set(charted) == {tag_regex(tag) for tag in UNWRITTEN}
    assert not any(re.match(tag_regex(tag), written_tag) for tag in UNWRITTEN for written_tag in tags)


def test_a_run_writes_the_phases_it_charged_and_no_learner_figure_before_its_first_update(tmp_path):
    """A run that never reaches learning_starts charges no update phase: it writes neither the update's
    share, nor updates/s, nor the learner's busy share, nor a loss; a run with the async learner
    charges no update to the loop thread; evaluation off, no eval share."""
    from tfdqn.run.loop import train

    train(_config(total_steps=600, learning_starts=2000, log_every=200, num_envs=1, env_steps_per_round=1,
                  final_eval_episodes=1), tmp_path / "idle", quiet=True)
    train(_config(total_steps=1200, learning_starts=300, log_every=300, async_learner=True, final_eval_episodes=1),
          tmp_path / "async", quiet=True)
    idle = set(read_events(tmp_path / "idle").Tags()["tensors"])
    assert {"perf/share_env_step", "perf/share_act", "perf/env_steps_per_sec"} <= idle
    assert not idle & {"perf/share_update", "perf/share_replay_sample", "perf/updates_per_sec",
                       "perf/learner_busy_share", "losses/td_loss", "perf/share_eval"}
    busy = set(read_events(tmp_path / "async").Tags()["tensors"])
    assert {"perf/updates_per_sec", "perf/learner_busy_share", "losses/td_loss"} <= busy
    assert not busy & {"perf/share_update", "perf/share_replay_sample"}


@pytest.mark.parametrize("system, gib", [({"system/cpu_util": 0.5}, {}),
                                         ({"system/rss_bytes": 2**30, "system/gpu_mem_bytes": 2**29},
                                          {"system/rss_gib": 1.0, "system/gpu_mem_gib": 0.5})])
def test_byte_readings_are_also_given_in_gib(system, gib):
    assert in_gib(system) == gib


@pytest.mark.slow
def test_the_replay_chart_counts_the_compressed_frames_the_replay_holds(tmp_path):
    """With lz4 frames most of the replay's memory is the compressed frames: `system/replay_gib` at the run's end
    holds at least what summary.json gives for them (its memory less its fixed arrays)."""
    import tfdqn

    # the replay fills while acting: a run that never reaches learning_starts compiles no update, and games cut at
    # 1,000 frames keep the final evaluation short
    config = config_lib.resolve_config([], {"env.id": "Pong", "env.screen_size": 42, "replay.capacity": 20_000,
                                            "replay.compression": "lz4", "run.total_steps": 600,
                                            "run.learning_starts": 1000, "run.log_every": 300, "run.eval_every": 0,
                                            "run.final_eval_episodes": 1, "env.max_episode_frames": 1000})
    summary = tfdqn.train(config, tmp_path / "run", quiet=True)
    frames = summary["replay_memory_bytes"] - summary["replay_bytes"]
    last = read_events(tmp_path / "run").Tensors("system/replay_gib")[-1]
    assert frames > 0 and float(tf.make_ndarray(last.tensor_proto)) * 2**30 >= frames
