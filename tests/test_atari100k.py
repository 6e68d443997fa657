"""tools/atari100k.py: scores against a NumPy reference, and the protocol end to end on a tiny budget."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO
from tfdqn.atari100k_scores import SCORES, human_normalized

_spec = importlib.util.spec_from_file_location("atari100k", REPO / "tools" / "atari100k.py")
atari100k = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(atari100k)


def test_human_normalised_scores_are_zero_at_random_and_one_at_human():
    assert len(SCORES) == 26
    assert human_normalized("Pong", -20.7) == 0 and human_normalized("Pong", 14.6) == pytest.approx(1)
    assert human_normalized("Breakout", 19.8) == pytest.approx((19.8 - 1.7) / (30.5 - 1.7))


@pytest.mark.slow
def test_the_protocol_runs_end_to_end_and_a_finished_run_is_not_rerun(tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, "tools/atari100k.py", "--preset", "drq_eps", "--games", "Pong",
               "--seeds", "0", "--logdir", str(tmp_path / "runs"), "--out", str(tmp_path / "a.json"), "--reps", "200",
               "--set=run.total_steps=400", "--set=run.learning_starts=300", "--set=replay.capacity=1000",
               "--set=run.final_eval_episodes=2", "--set=env.max_episode_frames=4000"]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    results = json.loads((tmp_path / "a.json").read_text())
    assert [(r["game"], r["episodes"], r["env_steps"]) for r in results["runs"]] == [("Pong", 2, 400)]
    normalized = [human_normalized(r["game"], r["score"]) for r in results["runs"]]
    assert results["aggregate"]["mean"] == pytest.approx(np.mean(normalized))
    assert results["aggregate"]["runs_per_game"] == 1
    pong = results["games"][0]
    assert (pong["der"], pong["drq_eps"]) == (-19.3, -9.1) and pong["at_or_above_drq_eps"] == (pong["mean"] >= -9.1)
    assert "| Pong | 1 |" in result.stdout and "Over these 1 game, 1 run each: IQM" in result.stdout
    again = subprocess.run([*command, "--report-only"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "tfdqn.train" not in again.stdout
    assert json.loads((tmp_path / "a.json").read_text())["runs"] == results["runs"]


def test_a_game_outside_atari_100k_is_refused_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "tools/atari100k.py", "--preset", "der", "--games", "Tetris",
                             "--out", str(tmp_path / "a.json")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--games 'Tetris' is not an Atari 100k game; allowed: Alien" in result.stderr
