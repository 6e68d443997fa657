import time

import pytest
import tensorflow as tf

from tfdqn.telemetry.tensorboard import read_events, read_scalars
from tfdqn.telemetry.phase_timer import PhaseTimer


def test_phase_shares_add_up_and_split_known_sleeps():
    timer = PhaseTimer()
    t = time.perf_counter()
    time.sleep(0.05)
    t = timer.add("env_step", t)
    time.sleep(0.15)
    timer.add("update", t)
    time.sleep(0.05)  # in no phase: other
    shares = timer.window_shares()
    assert sum(v for k, v in shares.items() if k.startswith("share_")) == pytest.approx(1.0, abs=1e-9)
    assert shares["share_update"] == pytest.approx(0.6, abs=0.08)
    assert shares["share_other"] == pytest.approx(0.2, abs=0.08)
    assert timer.window_shares()["share_update"] < 0.5  # a new window starts empty


@pytest.mark.slow
def test_phase_shares_of_a_real_run_sum_to_one(cartpole_run):
    events = read_events(cartpole_run[0])
    share_tags = [tag for tag in events.Tags()["tensors"] if tag.startswith("perf/share_")]
    assert {"perf/share_env_step", "perf/share_act", "perf/share_update", "perf/share_other"} <= set(share_tags)
    per_step = {}
    for tag in share_tags:
        for event in events.Tensors(tag):
            per_step.setdefault(event.step, 0.0)
            per_step[event.step] += float(tf.make_ndarray(event.tensor_proto))
    assert len(per_step) >= 3
    for total in per_step.values():
        assert total == pytest.approx(1.0, abs=0.02)
    busy = [value for _, value in read_scalars(cartpole_run[0], "perf/learner_busy_share")]
    assert all(0.0 <= b <= 1.0 for b in busy) and max(busy) > 0.05
    assert {"system/cpu_util", "system/rss_bytes"} <= set(events.Tags()["tensors"])
