"""The loop in-process, on real CartPole, for every update driver and batch source the config can ask for."""

import json
import pathlib
import threading

import pytest

from tfdqn import config as config_lib
from tfdqn.errors import RunFailure
from tfdqn.run.build import build_run
from tfdqn.run.drivers import (BackgroundDriver, DeviceReplayUpdates, HostReplayUpdates, InlineDriver,
                               PrefetchedHostReplayUpdates)
from tfdqn.run.loop import train
from tfdqn.telemetry.tensorboard import read_scalars

DATA = pathlib.Path(__file__).parent / "data"
SMALL = {"run.total_steps": 600, "run.learning_starts": 150, "run.log_every": 150, "run.checkpoint_every": 300,
         "run.eval_every": 300, "run.eval_episodes": 1, "run.final_eval_episodes": 1, "replay.capacity": 2000,
         "run.training_interval": 2}


def _config(**overrides):
    return config_lib.build_config([DATA / "cartpole_5000.yaml"], {**SMALL, **overrides})


def _run_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("tfdqn-")]


MODES = {  # (run.async_learner, replay.device, replay.prefetch) -> the driver and batch source build_run must pick
    "inline-host": (False, "host", False, InlineDriver, HostReplayUpdates),
    "inline-host-prefetched": (False, "host", True, InlineDriver, PrefetchedHostReplayUpdates),
    "inline-device": (False, "accelerator", False, InlineDriver, DeviceReplayUpdates),
    "background-host": (True, "host", False, BackgroundDriver, HostReplayUpdates),
    "background-host-prefetched": (True, "host", True, BackgroundDriver, PrefetchedHostReplayUpdates),
    "background-device": (True, "accelerator", False, BackgroundDriver, DeviceReplayUpdates),
}


@pytest.mark.parametrize("mode", MODES)
def test_every_driver_and_batch_source_trains_through_the_same_loop(mode, tmp_path):
    async_learner, device, prefetch, driver_type, source_type = MODES[mode]
    config = _config(**{"run.async_learner": async_learner, "replay.device": device, "replay.prefetch": prefetch})
    with build_run(config, tmp_path / "probe") as run:
        assert type(run.driver) is driver_type and type(run.driver._source) is source_type
    summary = train(config, tmp_path / "run", quiet=True)
    assert not _run_threads()  # learner thread and system monitor stopped
    assert summary["env_steps"] == 600 and summary["updates"] == (600 - 150) // 2
    assert sum(summary["phase_shares"].values()) == pytest.approx(1.0, abs=2e-3)  # the loop thread's time
    assert 0 < summary["learner_busy_share"] <= 1
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("*.complete")) == [
        "ckpt-300.complete", "ckpt-600.complete"]
    assert [step for step, _ in read_scalars(tmp_path / "run", "charts/eval_return")] == [300, 600]
    assert len(read_scalars(tmp_path / "run", "perf/env_steps_per_sec")) == 4
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["final_eval_episodes"] == 1


@pytest.mark.slow
def test_the_default_driver_repeats_the_episodes_recorded_before_the_redesign(tmp_path):
    """episodes.csv of CartPole seed 0, 5,000 env steps, recorded with the loop as it was before the
    collector/driver redesign (commit 7c38e4e), with the config that run saved.

    Until the first update only the env, the seeds and epsilon act, so those episodes match on any machine.
    After it, a CPU whose matmul kernels round differently (1 ulp, seen on an AMD EPYC host) drifts the
    network and, some episodes later, the play: there the recording holds only up to that drift."""
    # the final evaluation plays after the last training episode is recorded: one game of it is enough here
    config = config_lib.build_config([DATA / "cartpole_5000.yaml"], {"run.final_eval_episodes": 1})
    train(config, tmp_path / "run", quiet=True)
    recorded = (DATA / "cartpole_5000_seed0_episodes.csv").read_text().splitlines()
    played = (tmp_path / "run" / "episodes.csv").read_text().splitlines()
    if played != recorded:
        first_difference = next((i for i, (a, b) in enumerate(zip(played, recorded)) if a != b),
                                min(len(played), len(recorded)))
        assert int(recorded[first_difference - 1].split(",")[0]) > config.run.learning_starts, first_difference


@pytest.mark.slow
def test_periodic_evaluation_leaves_the_training_stream_alone(tmp_path):
    off = _config(**{"run.eval_every": 0, "run.training_interval": 1})
    on = _config(**{"run.eval_every": 200, "run.eval_episodes": 2, "run.training_interval": 1})
    train(off, tmp_path / "off", quiet=True)
    train(on, tmp_path / "on", quiet=True)
    assert len(read_scalars(tmp_path / "on", "charts/eval_return")) == 3
    assert (tmp_path / "on" / "episodes.csv").read_text() == (tmp_path / "off" / "episodes.csv").read_text()


@pytest.mark.parametrize("async_learner", [False, True])
def test_a_failing_env_stops_the_run_in_one_line_and_closes_every_part(async_learner, tmp_path):
    config = _config(**{"env.id": "tests.faulty_envs:CrashAfter-v0", "run.checkpoint_every": 500,
                        "run.total_steps": 1200, "run.async_learner": async_learner, "run.eval_every": 0})
    with pytest.raises(RunFailure) as failure:
        train(config, tmp_path / "run", quiet=True)
    assert "failed at env step 701" in str(failure.value) and "last checkpoint: env step 500" in str(failure.value)
    assert "\n" not in str(failure.value)
    assert not _run_threads()


def test_a_replay_that_does_not_fit_is_refused_before_the_run_folder_exists(tmp_path):
    config = _config(**{"env.id": "Breakout", "env.frame_stack": 4, "replay.capacity": 100_000_000})
    with pytest.raises(Exception, match="of host memory is available; allowed: replay.capacity <="):
        build_run(config, tmp_path / "run")
    assert not (tmp_path / "run").exists() and not _run_threads()
