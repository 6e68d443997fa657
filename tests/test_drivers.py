"""Update drivers: the ratio gate with real threads, and a real async training run holding the replay ratio."""

import json
import threading
import time

import numpy as np
import pytest

from tests.conftest import TINY, train_in_process
from tfdqn.agent.counters import Counters
from tfdqn.run.drivers import RatioGate, WarmupNoise
from tfdqn.telemetry.tensorboard import read_scalars
from tfdqn.run.cadence import updates_due


def _counters(env_steps=0, updates=0):
    counters = Counters()
    counters.env_steps.assign(env_steps)
    counters.updates.assign(updates)
    return counters


@pytest.mark.parametrize("interval, steps_per_advance, slack", [(1, 1, 1), (4, 1, 1), (1, 8, 8), (2, 8, 4)])
def test_gate_holds_the_ratio_with_real_threads(interval, steps_per_advance, slack):
    counters = _counters()
    gate = RatioGate(counters, cadence=(20, interval), slack=slack)
    lags = []

    def learner():
        while k := gate.take(most=3):
            time.sleep(0.0005)  # a slow update: the actors must wait for it
            counters.updates.assign_add(k)  # as the update graph does
            gate.done()

    thread = threading.Thread(target=learner)
    thread.start()
    for _ in range(300):
        counters.env_steps.assign_add(steps_per_advance)  # as the loop does
        gate.advance(can_learn=True)
        env_steps, updates = counters.read()
        lags.append(updates_due(env_steps, 20, interval) - updates)
    gate.settle(can_learn=True)
    env_steps, final = counters.read()
    gate.close()
    thread.join()
    assert max(lags) <= slack  # the actors never ran ahead of the learner by more than the slack
    assert final == updates_due(env_steps, 20, interval)  # and settle() leaves nothing owed


def test_gate_never_holds_the_actors_while_the_learner_cannot_sample():
    gate = RatioGate(_counters(env_steps=50), cadence=(0, 1), slack=1)
    gate.advance(can_learn=False)  # no learner thread at all: this must return
    assert gate.owed() == 50


def _held_noise_warmup(resume_at=None) -> list:
    """Each env step's held acting noise over a warm-up of 10 steps at interval 4, then 3 steps of learning
    (whose updates would redraw it); with `resume_at`, the WarmupNoise is made anew there, as a resumed run's."""
    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent

    config = config_lib.resolve_config([], {"env.id": "CartPole", "network.noisy": True})
    agent = make_agent(config, (4,), np.float32, 2)
    cadence = (10, 4, 1)
    warmup, held, layer = WarmupNoise(agent.learner, agent.counters, cadence), [], agent.learner._holding_noise[0]
    for step in range(1, 14):
        agent.counters.env_steps.assign(step)
        if step == resume_at:
            warmup = WarmupNoise(agent.learner, agent.counters, cadence)
        warmup.after_collect()
        held.append(layer.acting_noise.numpy().copy())
    return held


def test_held_acting_noise_is_redrawn_in_the_warm_up_where_updates_would_fall_and_resumes_alike():
    held = _held_noise_warmup()
    redrawn = [step for step in range(2, 14) if (held[step - 1] != held[step - 2]).any()]
    assert redrawn == [4, 8]  # every 4 env steps until learning starts at 10; the updates redraw after it
    for mine, uninterrupted in zip(_held_noise_warmup(resume_at=6), held):
        np.testing.assert_array_equal(mine, uninterrupted)


@pytest.mark.slow
def test_async_run_holds_the_replay_ratio_within_five_percent(tmp_path):
    # Learning starts at 500; the windows after step 1000 (1500, 2000, 2500) are the ones checked.
    args = [*TINY, "--total-steps", "2500", "--training-interval", "2", "--set", "run.async_learner=true",
            "--logdir", str(tmp_path), "--run-name", "a"]
    result = train_in_process(*args)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["async_learner"] and summary["updates"] == (2500 - 500) // 2
    steps = read_scalars(tmp_path / "a", "perf/env_steps_per_sec")
    updates = dict(read_scalars(tmp_path / "a", "perf/updates_per_sec"))  # written from the first update on
    ratios = [updates[step] / s for step, s in steps if step > 1000]  # windows after learning starts
    assert ratios and all(abs(r * 2 - 1) <= 0.05 for r in ratios), ratios
    assert 0 < summary["learner_busy_share"] <= 1 and summary["final_eval_episodes"] == 2


def _cartpole_rings(count: int):
    """`count` identical host rings (same seed) holding the same 600 CartPole-like transitions."""
    import numpy as np

    from tfdqn.replay.ring import ReplayRing

    rings = [ReplayRing(1000, (4,), np.float32, seed=5, n_step=3, gamma=0.9) for _ in range(count)]
    rng = np.random.default_rng(0)
    for t in range(600):
        frame = rng.normal(size=(1, 4)).astype(np.float32)
        for ring in rings:
            ring.add(frame, [t % 2], [1.0], [t % 50 == 49], [False], frame + 1)
    return rings


def test_a_prefetched_call_gets_the_batches_drawn_as_the_previous_call_went_to_the_update():
    import numpy as np

    from tfdqn.agent.agent import make_agent
    from tfdqn.config import DQNConfig
    from tfdqn.run.drivers import PrefetchedHostReplayUpdates

    ring, twin = _cartpole_rings(2)
    agent = make_agent(DQNConfig(), (4,), np.float32, 2)
    source = PrefetchedHostReplayUpdates(agent.learner, ring, 32, lambda: 0.4, threading.Lock())
    expected_first = twin.stack(twin.sample_indices(32, draws=64), 2)
    first = source.prepare(2)
    source.run(first)
    drawn_during_the_update = twin.sample_indices(32, draws=64)
    second = source.prepare(2)
    for got, want in [(first[0], expected_first), (second[0], twin.stack(drawn_during_the_update, 2))]:
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert any(t.name.startswith("tfdqn-prefetch") for t in threading.enumerate())
    source.run(second)
    twin.sample_indices(32, draws=64)  # prefetched for a call of 2, then discarded: the next call asks for 1
    third = source.prepare(1)
    for a, b in zip(third[0], twin.stack(twin.sample_indices(32), 1)):
        np.testing.assert_array_equal(a, b)
    source.close()
    assert not any(t.name.startswith("tfdqn-prefetch") for t in threading.enumerate())


@pytest.mark.slow
def test_prefetched_runs_repeat_themselves_with_compressed_frames_or_raw(tmp_path):
    runs = {}
    for name, compression in (("raw", "none"), ("zstd", "zstd")):
        # 500 prefetched updates after learning starts at 500 and one final evaluation episode: the runs compared
        result = train_in_process(*TINY, "--seed", "4", "--total-steps", "1000", "--set",
                                  "run.final_eval_episodes=1", "--set", "replay.prefetch=true", "--set",
                                  f"replay.compression={compression}", "--logdir", str(tmp_path), "--run-name", name)
        assert result.returncode == 0, result.stderr
        runs[name] = ((tmp_path / name / "episodes.csv").read_text(),
                      json.loads((tmp_path / name / "summary.json").read_text())["final_eval_returns"])
    assert runs["raw"] == runs["zstd"] and len(runs["raw"][0].splitlines()) > 10


def test_a_prefetched_batch_is_made_of_transitions_as_they_are_while_an_actor_adds_beside_it():
    """The async learner's race: an actor thread adds (and evicts) between a batch's draw and its assembly in the
    prefetch thread. Each frame is its step's number and each reward too, so a whole transition has a next
    observation one above its observation and a reward equal to it: on a 64-slot ring, none of the 12,800
    transitions assembled while the actor writes breaks that (a slot rewritten after its draw did, before)."""
    import numpy as np

    from tfdqn.agent.agent import make_agent
    from tfdqn.config import DQNConfig
    from tfdqn.replay.ring import ReplayRing
    from tfdqn.run.drivers import PrefetchedHostReplayUpdates

    ring, lock = ReplayRing(64, (1,), np.float32, seed=1), threading.Lock()
    written, stop = [0], threading.Event()

    def add_one():
        t = written[0]
        with lock:
            ring.add(np.array([[t]], np.float32), [0], [float(t)], [False], [False], np.array([[t + 1]], np.float32))
        written[0] += 1

    for _ in range(64):
        add_one()

    def actor():
        while not stop.is_set():
            add_one()

    source = PrefetchedHostReplayUpdates(make_agent(DQNConfig(), (1,), np.float32, 2).learner, ring, 32, lambda: 1.0,
                                         lock)
    thread = threading.Thread(target=actor)
    thread.start()
    assembled = []
    try:
        for _ in range(200):
            prepared = source.prepare(2)
            assembled.append(prepared[0])
            source.run(prepared)
    finally:
        stop.set()
        thread.join()
        source.close()
    observation = np.concatenate([batch.observation.reshape(-1) for batch in assembled])
    next_observation = np.concatenate([batch.next_observation.reshape(-1) for batch in assembled])
    reward = np.concatenate([batch.reward.reshape(-1) for batch in assembled])
    assert len(observation) == 12_800 and written[0] > 64 + 200  # the actor did write beside the updates
    assert np.array_equal(next_observation, observation + 1) and np.array_equal(reward, observation)
