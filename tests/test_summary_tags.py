"""Every perf/ and system/ tag a run writes can be nonzero in its mode, and the custom-scalars layout finds
each of its charts' tags in a real run."""

import re

import pytest
import tensorflow as tf

from tfdqn import config as config_lib
from tfdqn.run.hooks import idle_tags, in_gib
from tfdqn.telemetry.layout import CHARTS, run_layout
from tfdqn.telemetry.tensorboard import read_events

# Chart title -> tags a CPU-only CartPole run must draw on it (the GPU's appear only where there is one).
EXPECTED = {CHARTS[0][0]: {"perf/share_env_step", "perf/share_act", "perf/share_update", "perf/share_other"},
            CHARTS[1][0]: {"perf/env_steps_per_sec", "perf/updates_per_sec"},
            CHARTS[2][0]: {"perf/learner_busy_share", "system/cpu_util"},
            CHARTS[3][0]: {"system/rss_gib", "system/replay_gib"},
            CHARTS[4][0]: {"charts/episode_return", "losses/td_loss", "losses/q_values"}}


def _config(**run):
    return config_lib.resolve_config([], {"env.id": "CartPole", **{f"run.{k}": v for k, v in run.items()}})


def test_a_short_cartpole_run_writes_no_perf_or_system_tag_that_is_always_zero(cartpole_run):
    events = read_events(cartpole_run[0])
    tags = [tag for tag in events.Tags()["tensors"] if tag.startswith(("perf/", "system/"))]
    always_zero = [tag for tag in tags if all(float(tf.make_ndarray(e.tensor_proto)) == 0 for e in events.Tensors(tag))]
    assert tags and always_zero == []
    assert "perf/share_wait" not in tags and "perf/share_eval" not in tags


def test_the_layout_is_written_once_and_each_chart_finds_its_tags(cartpole_run):
    events = read_events(cartpole_run[0])
    written = events.Tensors("custom_scalars__config__")
    assert [e.step for e in written] == [0]
    assert tf.make_ndarray(written[0].tensor_proto).item() == run_layout().SerializeToString()
    tags = set(events.Tags()["tensors"])
    for title, regex in CHARTS:
        assert EXPECTED[title] <= {tag for tag in tags if re.match(regex, tag)}, title


def test_idle_tags_follow_the_mode():
    assert idle_tags(_config(total_steps=1500, learning_starts=500, checkpoint_every=1000), 0) == \
        {"perf/share_wait", "perf/share_eval"}
    assert idle_tags(_config(total_steps=1500, learning_starts=500, async_learner=True, eval_every=500,
                             checkpoint_every=0), 0) == \
        {"perf/share_replay_sample", "perf/share_update", "perf/share_checkpoint"}
    # resumed at 1000: the checkpoint at 2000 is the last step's, after the last summary
    assert "perf/share_checkpoint" in idle_tags(_config(total_steps=2000, checkpoint_every=1000), 1000)
    assert {"perf/updates_per_sec", "perf/learner_busy_share"} <= idle_tags(
        _config(total_steps=1000, learning_starts=2000, num_envs=1, update_every=1), 0)


@pytest.mark.parametrize("system, gib", [({"system/cpu_util": 0.5}, {}),
                                         ({"system/rss_bytes": 2**30, "system/gpu_mem_bytes": 2**29},
                                          {"system/rss_gib": 1.0, "system/gpu_mem_gib": 0.5})])
def test_byte_readings_are_also_given_in_gib(system, gib):
    assert in_gib(system) == gib
