"""Hooks: the one "crossed a multiple" rule, and the profiler window in a real run."""

import pathlib

import pytest

from tfdqn import config as config_lib
from tfdqn.run.hooks import PeriodicHook, ProfilerHook
from tfdqn.run.loop import train

DATA = pathlib.Path(__file__).parent / "data"


@pytest.mark.parametrize("period, at_end, before, after, final, due", [
    (100, False, 96, 104, False, True),    # 8 envs step past a multiple without landing on it
    (100, False, 100, 108, False, False),
    (100, False, 90, 95, True, False),     # the last step is not a period's end
    (100, True, 90, 95, True, True),       # ... unless the hook also runs at the end
    (0, True, 0, 1000, False, False),      # period 0: never, except at the end
])
def test_a_hook_is_due_when_its_period_is_crossed_or_at_the_end(period, at_end, before, after, final, due):
    assert PeriodicHook(period, at_end).due(before, after, final) is due


def test_the_profiler_starts_inside_its_window_and_stops_at_its_end(tmp_path):
    hook = ProfilerHook((50, 80), tmp_path)
    assert not hook.due(0, 49, final=False) and hook.due(49, 50, final=False)
    hook(50)
    assert not hook.due(50, 79, final=False) and hook.due(79, 80, final=False)
    hook(80)
    assert not hook.due(80, 200, final=False)  # one window per run
    assert list(tmp_path.rglob("*.xplane.pb"))


def test_a_run_with_a_profiler_window_writes_a_trace(tmp_path):
    config = config_lib.build_config([DATA / "cartpole_5000.yaml"], {"run.total_steps": 600,
                                                                     "run.learning_starts": 300,
                                                                     "run.final_eval_episodes": 1})
    train(config, tmp_path / "run", quiet=True, profile_steps=(400, 500))
    assert list((tmp_path / "run" / "profile").rglob("*.xplane.pb"))
