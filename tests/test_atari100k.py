"""tools/atari100k.py: scores against a NumPy reference, and the protocol end to end on a tiny budget."""

import hashlib
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats
from rliable import metrics

from tests.conftest import REPO
from tfdqn.atari100k_scores import (DRQ_EPS_RUNS, DRQ_EPS_RUNS_SHA256, SCORES, drq_eps_mean, drq_eps_percentile,
                                    drq_eps_runs, human_normalized)

_spec = importlib.util.spec_from_file_location("atari100k", REPO / "tools" / "atari100k.py")
atari100k = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(atari100k)


def test_human_normalised_scores_are_zero_at_random_and_one_at_human():
    assert len(SCORES) == 26
    assert human_normalized("Pong", -20.7) == 0 and human_normalized("Pong", 14.6) == pytest.approx(1)
    assert human_normalized("Breakout", 19.8) == pytest.approx((19.8 - 1.7) / (30.5 - 1.7))


def test_drq_eps_runs_are_the_published_file_and_give_its_published_figures():
    # the per-game means and the 26-game aggregates (BBF Table A.1, rliable) that DrQ(epsilon)'s runs are cited for
    assert hashlib.sha256(DRQ_EPS_RUNS.read_bytes()).hexdigest() == DRQ_EPS_RUNS_SHA256
    runs = drq_eps_runs()
    assert set(runs) == set(SCORES) and {len(scores) for scores in runs.values()} == {100}
    published = {"Alien": 865.2, "Breakout": 19.8, "Krull": 4402.1, "Pong": -9.1, "Freeway": 20.3, "Hero": 4167.9}
    assert {game: round(drq_eps_mean(game), 1) for game in published} == published
    normalized = np.stack([human_normalized(game, runs[game]) for game in SCORES], axis=1)
    assert (round(metrics.aggregate_iqm(normalized), 3), round(metrics.aggregate_median(normalized), 3),
            round(metrics.aggregate_mean(normalized), 3)) == (0.280, 0.313, 0.465)


def test_percentiles_among_drq_eps_runs_count_ties_half():
    breakout = drq_eps_runs()["Breakout"]
    for score in (-1.0, 15.49, 16.0, 19.8, 200.0):
        assert drq_eps_percentile("Breakout", score) == pytest.approx(
            scipy.stats.percentileofscore(breakout, score, kind="mean"))
    assert drq_eps_percentile("Breakout", 0.0) == 0 and drq_eps_percentile("Breakout", 1e6) == 100


def test_how_often_drq_eps_clears_its_own_mean_against_an_exact_count():
    krull = drq_eps_runs()["Krull"]
    pairs = (krull[:, None] + krull[None, :]) / 2  # every ordered pair, as draws with replacement
    assert atari100k.drq_eps_clears_its_mean("Krull", 1) == pytest.approx(np.mean(krull >= krull.mean()), abs=0.01)
    assert atari100k.drq_eps_clears_its_mean("Krull", 2) == pytest.approx(np.mean(pairs >= krull.mean()), abs=0.01)


def test_games_at_or_above_against_enumeration():
    chances = [0.4, 0.2, 0.5, 0.9]
    exact = np.zeros(5)
    for outcome in itertools.product([0, 1], repeat=4):
        exact[sum(outcome)] += np.prod([c if hit else 1 - c for c, hit in zip(chances, outcome)])
    assert atari100k.games_at_or_above(chances) == pytest.approx(exact.tolist())


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
    assert pong["der"] == -19.3 and pong["drq_eps"] == pytest.approx(-9.1, abs=0.05)
    assert pong["at_or_above_drq_eps"] == (pong["mean"] >= pong["drq_eps"])
    assert pong["drq_eps_percentiles"] == [drq_eps_percentile("Pong", results["runs"][0]["score"])]
    against = results["aggregate"]["improvement_over_drq_eps"]
    assert against["probability"] == pytest.approx(pong["drq_eps_percentiles"][0] / 100)  # one run, one game
    assert results["aggregate"]["drq_eps"]["mean"] == pytest.approx(human_normalized("Pong", drq_eps_mean("Pong")))
    assert "| Pong | 1 |" in result.stdout and "Over these 1 game, 1 run each: IQM" in result.stdout
    assert "DrQ(ε)'s own 100 runs of these games: IQM" in result.stdout
    again = subprocess.run([*command, "--report-only"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "tfdqn.train" not in again.stdout
    assert json.loads((tmp_path / "a.json").read_text())["runs"] == results["runs"]
    # the results file is the record: with the run folders gone, its runs are kept and not trained again
    shutil.rmtree(tmp_path / "runs")
    kept = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert kept.returncode == 0 and "tfdqn.train" not in kept.stdout, kept.stderr
    assert json.loads((tmp_path / "a.json").read_text())["runs"] == results["runs"]
    # and another recipe's report never mixes into it nor overwrites it
    written = (tmp_path / "a.json").read_bytes()
    other = subprocess.run([*command[:3], "der", *command[4:], "--report-only"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600)
    assert other.returncode == 2 and other.stderr.count("\n") == 1
    assert f"--out {tmp_path / 'a.json'} holds results of --preset drq_eps with --set" in other.stderr
    assert (tmp_path / "a.json").read_bytes() == written


def test_an_out_file_this_tool_did_not_write_is_refused_and_left_as_it_was(tmp_path):
    out = tmp_path / "scores.json"
    out.write_text('{"scores": [1, 2]}\n')
    result = subprocess.run([sys.executable, "tools/atari100k.py", "--preset", "drq_eps", "--report-only",
                             "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert f"--out {out} is not an atari100k.py results file" in result.stderr
    assert out.read_text() == '{"scores": [1, 2]}\n'


def test_a_game_outside_atari_100k_is_refused_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "tools/atari100k.py", "--preset", "der", "--games", "Tetris",
                             "--out", str(tmp_path / "a.json")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--games 'Tetris' is not an Atari 100k game; allowed: Alien" in result.stderr
