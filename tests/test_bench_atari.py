"""tools/bench_atari.py end to end on a tiny Pong budget: a run that reaches its target ends there, and
the JSON, table and curves say when; a finished seed is read back, not rerun."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

TINY_PONG = ["--set=env.screen_size=42", "--set=replay.capacity=2000", "--set=run.learning_starts=300",
             "--set=run.eval_every=400", "--set=run.eval_episodes=1", "--set=run.final_eval_episodes=1",
             "--set=run.checkpoint_every=400", "--set=run.num_envs=2", "--set=env.max_episode_frames=2000"]


def _bench(tmp_path, *args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "tools/bench_atari.py", "--game", "Pong", "--logdir", str(tmp_path / "runs"),
                           "--out", str(tmp_path / "bench.json"), *TINY_PONG, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_run_ends_at_its_target_and_the_json_table_and_curves_say_when(tmp_path):
    # every Pong score reaches -21: the run ends at its first evaluation
    result = _bench(tmp_path, "--seeds", "0", "--target", "-21", "--total-steps", "4000",
                    "--table", str(tmp_path / "bench.md"), "--plot", str(tmp_path / "curves"))
    assert result.returncode == 0, result.stderr
    run = json.loads((tmp_path / "bench.json").read_text())["runs"][0]
    assert (run["game"], run["seed"], run["target"], run["solved"]) == ("Pong", 0, -21.0, True)
    assert run["solve_env_steps"] == 400 and run["env_steps"] == 400  # ended at the first evaluation, not at 4,000
    first = run["curve"][0]
    assert run["solve_wall_seconds"] == first["wall_seconds"] and 0 < first["wall_seconds"] <= run["run_seconds"]
    assert first["env_steps"] == 400 and first["return_mean"] >= -21
    assert run["final_eval_return"] is not None
    assert run["protocol"].startswith("protocol: ALE/Pong-v5, epsilon 0.05,") and "42x42 grayscale" in run["protocol"]
    summary = json.loads((tmp_path / "runs" / "Pong-config-seed0" / "summary.json").read_text())
    assert summary["reached_target"] is True and summary["target_return"] == -21.0
    assert "| Pong | config | 0 | -21 | yes | 400 |" in (tmp_path / "bench.md").read_text()
    assert (tmp_path / "curves.png").stat().st_size > 0 and (tmp_path / "curves.svg").stat().st_size > 0
    written = (tmp_path / "runs" / "Pong-config-seed0" / "summary.json").stat().st_mtime_ns
    again = _bench(tmp_path, "--seeds", "0", "--target", "-21", "--total-steps", "4000")
    assert again.returncode == 0, again.stderr
    assert "tfdqn.train" not in again.stdout  # read back, not rerun
    assert (tmp_path / "runs" / "Pong-config-seed0" / "summary.json").stat().st_mtime_ns == written


def test_bad_seeds_are_refused_in_one_line(tmp_path):
    result = _bench(tmp_path, "--seeds", "1", "1", "--target", "18")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "python tools/bench_atari.py: error: --seeds 1 1: allowed: distinct integers >= 0"]
