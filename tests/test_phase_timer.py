"""PhaseTimer: window and run shares that add up to one, charged correctly from two threads."""

import sys
import threading
import time
import types

import pytest
import tensorflow as tf

from tfdqn.telemetry import phase_timer
from tfdqn.telemetry.phase_timer import PHASES, PhaseTimer
from tfdqn.telemetry.tensorboard import read_events, read_scalars


class Clock:
    """A perf_counter that moves only when the test moves it, so shares come out exact."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(phase_timer, "time", types.SimpleNamespace(perf_counter=clock))
    return clock


def _share_sum(shares: dict) -> float:
    return sum(value for key, value in shares.items() if key.startswith("share_"))


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


def test_a_window_has_a_share_per_phase_plus_other_summing_to_one(clock):
    timer = PhaseTimer()
    clock.now = 1.0
    t = timer.add("act", 0.0)
    clock.now = 4.0
    timer.add("env_step", t)
    clock.now = 8.0  # 4 s in no phase
    shares = timer.window_shares()
    assert set(shares) == {"wall_seconds"} | {f"share_{name}" for name in (*PHASES, "other")}
    assert shares["wall_seconds"] == 8.0
    assert (shares["share_act"], shares["share_env_step"], shares["share_other"]) == (0.125, 0.375, 0.5)
    assert _share_sum(shares) == 1.0
    clock.now = 10.0  # a window with nothing charged is all other
    shares = timer.window_shares()
    assert shares["wall_seconds"] == 2.0 and shares["share_other"] == 1.0 and _share_sum(shares) == 1.0


def test_a_phase_running_across_a_window_close_keeps_both_windows_at_one(clock):
    timer = PhaseTimer()
    clock.now = 8.0
    first = timer.window_shares()  # the learner thread is mid-update: started at 2, ends at 10
    clock.now = 10.0
    timer.add("update", 2.0)
    clock.now = 12.0
    second = timer.window_shares()
    assert first["share_update"] == 0.0 and first["share_other"] == 1.0
    # 2 of its 8 s lay in the second window (all 8 would make a share of 2 in a 4 s window)
    assert (second["share_update"], second["share_other"]) == (0.5, 0.5)
    assert _share_sum(first) == _share_sum(second) == 1.0
    assert timer.run_shares()["share_update"] == 8.0 / 12.0  # the run's totals keep every second


def test_run_shares_cover_the_whole_run_across_windows(clock):
    timer = PhaseTimer()
    clock.now = 2.0
    timer.add("checkpoint", 0.0)
    timer.window_shares()
    clock.now = 5.0
    timer.add("eval", 4.0)
    clock.now = 8.0
    shares = timer.run_shares()
    assert (shares["share_checkpoint"], shares["share_eval"], shares["share_other"]) == (0.25, 0.125, 0.625)
    assert _share_sum(shares) == 1.0


def test_restart_forgets_what_came_before_it(clock):
    timer = PhaseTimer()  # built at 0; the loop starts at 100
    clock.now = 50.0
    timer.add("log", 0.0)
    clock.now = 100.0
    timer.restart()
    clock.now = 104.0
    timer.add("act", 103.0)
    window, run = timer.window_shares(), timer.run_shares()
    assert window["wall_seconds"] == 4.0 and window["share_log"] == run["share_log"] == 0.0
    assert window["share_act"] == run["share_act"] == 0.25 and _share_sum(window) == _share_sum(run) == 1.0

def test_two_threads_adding_lose_no_time_while_a_third_reads(clock):
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: a lost update would show
    timer, adds, step = PhaseTimer(), 20000, 2.0 ** -7  # exact in binary: sums carry no rounding
    clock.now = 1000.0
    start = threading.Barrier(3)

    def charge(phase):
        start.wait()
        for _ in range(adds):
            timer.add(phase, clock.now - step)

    threads = [threading.Thread(target=charge, args=(phase,)) for phase in ("update", "update")]
    try:
        for thread in threads:
            thread.start()
        start.wait()
        seen = []
        while any(thread.is_alive() for thread in threads):
            seen.append(timer.run_shares()["share_update"])
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert seen == sorted(seen)  # the reader never saw time taken back
    charged = 2 * adds * step / 1000.0  # 312.5 s of a 1000 s window
    window = timer.window_shares()
    assert (window["share_update"], window["share_other"]) == (charged, 1.0 - charged)
    assert _share_sum(window) == 1.0
    assert timer.run_shares()["share_update"] == charged


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
