"""tfdqn atari100k: scores against a NumPy reference, and the protocol end to end on a tiny budget: runs side by
side on the cores and as Ray tasks, named by their recipe, kept by the record."""

import contextlib
import hashlib
import itertools
import json
import pathlib
import shutil
import subprocess

import numpy as np
import pytest
import scipy.stats
from rliable import metrics

from tests.conftest import REPO, main_in_process
from tfdqn.bench.atari100k_scores import (DRQ_EPS_RUNS, DRQ_EPS_RUNS_SHA256, SCORES, drq_eps_mean, drq_eps_percentile,
                                    drq_eps_runs, human_normalized)

from tfdqn.bench import atari100k


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


# Runs as short as the protocol allows: a few updates (a run without one exports no policy and scores nothing) and
# games cut at 400 emulator frames
STEPS = 120
TINY = ["--preset", "drq_eps", "--games", "Pong", "--reps", "200", f"--set=run.total_steps={STEPS}",
        "--set=run.learning_starts=100", "--set=replay.capacity=500", "--set=run.final_eval_episodes=2",
        "--set=env.max_episode_frames=400"]


def _tfdqn(*args: str) -> subprocess.CompletedProcess:
    """`tfdqn args...` as the installed command runs it (`tfdqn.command.main`), in this process: the tool itself
    imports no TensorFlow, so its own interpreter would only cost start-up (its runs train in processes of
    their own either way)."""
    from tfdqn.command import main

    with contextlib.chdir(REPO):
        return main_in_process(main, *args)


def _atari100k(tmp_path, *args):
    return _tfdqn("atari100k", *TINY, "--logdir", str(tmp_path / "runs"), *args)


def _head_commit() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()


def _overlap(spans) -> bool:
    """Whether the runs' workers were all training at one moment."""
    return max(start for start, _ in spans) < min(end for _, end in spans)


@pytest.mark.slow
def test_runs_go_two_at_once_another_set_is_another_recipe_and_the_record_keeps_every_run_it_holds(tmp_path):
    record = tmp_path / "a.json"
    result = _atari100k(tmp_path, "--seeds", "0", "1", "2", "--out", str(record))
    assert result.returncode == 0, result.stderr
    assert "3 runs to train, 2 at a time; no recorded run of this recipe yet" in result.stdout
    results = json.loads(record.read_text())
    runs = sorted(results["runs"], key=lambda run: run["seed"])
    assert [(r["game"], r["seed"], r["episodes"], r["env_steps"], r["starts"]) for r in runs] == [
        ("Pong", seed, 2, STEPS, ["new"]) for seed in range(3)]
    (recipe,) = {run["config_hash"] for run in runs}
    for run in runs:  # each run carries its recipe: hash, resolved config, version and commit
        assert run["commit"] == _head_commit() and run["tfdqn_version"] and run["config"]["run"]["total_steps"] == STEPS
        assert pathlib.Path(run["run_dir"]).name == f"Pong-drq_eps-{recipe}-seed{run['seed']}"
    assert _overlap([runs[0]["worker_unix_span"], runs[1]["worker_unix_span"]])  # one process per core, at once
    (report,) = results["reports"].values()
    normalized = [human_normalized(r["game"], r["score"]) for r in runs]
    assert report["aggregate"]["mean"] == pytest.approx(np.mean(normalized))
    assert report["aggregate"]["seeds"] == [0, 1, 2]
    pong = report["games"][0]
    assert pong["der"] == -19.3 and pong["drq_eps"] == pytest.approx(-9.1, abs=0.05)
    assert pong["drq_eps_percentiles"] == [drq_eps_percentile("Pong", r["score"]) for r in runs]
    assert "| Pong | 3 |" in result.stdout and "Over these 1 game, 3 runs each: IQM" in result.stdout
    assert "DrQ(ε)'s own 100 runs of these games: IQM" in result.stdout
    own = report["aggregate"]["drq_eps_own_iqm"]  # like with like: DrQ(ε)'s IQM from 3 of its runs of Pong
    assert own["runs_per_game"] == 3 and own["band95"][0] < own["mean"] < own["band95"][1]
    assert "Like with like: DrQ(ε)'s IQM over these games from 3 of its runs per game" in result.stdout
    assert 0.5 < report["aggregate"]["iqm_ci95_coverage"] < 0.95
    # another --set is another recipe: trained, not read back from seed 0's folder, and reported apart
    other = _atari100k(tmp_path, "--seeds", "0", "--out", str(record), "--set=learner.n_step=3")
    assert other.returncode == 0, other.stderr
    assert "1 run to train" in other.stdout and "| Pong | 1 |" in other.stdout
    held = json.loads(record.read_text())["runs"]
    assert len({run["config_hash"] for run in held}) == 2 and len({run["run_dir"] for run in held}) == 4
    for run in held:  # each label names its own recipe: drq_eps's 10-step returns, or the --set's 3
        assert run["config"]["learner"]["n_step"] == (3 if "learner.n_step=3" in run["set"] else 10)
    assert "The record also holds runs of other recipes, reported apart: 3 of" in other.stdout
    assert "(theirs -> this recipe's: learner.n_step 10 -> 3)" in other.stdout  # how the other recipe differs
    # a folder that holds another recipe under this one's name is refused, never read back or resumed as it
    (third,) = [pathlib.Path(run["run_dir"]) for run in held if "learner.n_step=3" in run["set"]]
    (third / "config.yaml").write_bytes(pathlib.Path(runs[0]["run_dir"], "config.yaml").read_bytes())
    (third / "summary.json").unlink()
    refused = _atari100k(tmp_path, "--seeds", "0", "--out", str(tmp_path / "b.json"), "--set=learner.n_step=3")
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1), refused.stderr
    assert f"run folder {third} holds recipe" in refused.stderr and "allowed: move the folder away" in refused.stderr
    assert not (tmp_path / "b.json").exists()
    # the folders gone, a report on seeds 0 and 1 trains nothing and keeps seed 2 in the record
    shutil.rmtree(tmp_path / "runs")
    subset = _atari100k(tmp_path, "--seeds", "0", "1", "--out", str(record))
    assert subset.returncode == 0 and "nothing to train" in subset.stdout and "| Pong | 2 |" in subset.stdout
    assert json.loads(record.read_text())["runs"] == held
    # a report-only look without --seeds reports the seeds the record holds, and writes nothing to it
    before = record.read_bytes()
    look = _atari100k(tmp_path, "--report-only", "--out", str(record))
    assert look.returncode == 0 and "| Pong | 3 |" in look.stdout, look.stdout + look.stderr
    assert record.read_bytes() == before
    # a run leaves the record only when a flag names it, and only the run of this recipe
    removed = _atari100k(tmp_path, "--seeds", "0", "--report-only", "--remove", "Pong:2", "--out", str(record))
    assert removed.returncode == 0, removed.stderr
    held = json.loads(record.read_text())["runs"]
    assert sorted((run["seed"], "learner.n_step=3" in run["set"]) for run in held) == [(0, False), (0, True), (1, False)]


@pytest.mark.slow
def test_an_out_file_this_tool_did_not_write_is_refused_and_left_as_it_was(tmp_path):
    out = tmp_path / "scores.json"
    out.write_text('{"scores": [1, 2]}\n')
    result = _tfdqn("atari100k", "--preset", "drq_eps", "--report-only", "--out", str(out))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert f"--out {out} is not a record of tfdqn atari100k" in result.stderr
    assert out.read_text() == '{"scores": [1, 2]}\n'


def test_a_game_outside_atari_100k_is_refused_in_one_line(tmp_path):
    result = _tfdqn("atari100k", "--preset", "der", "--games", "Tetris", "--out", str(tmp_path / "a.json"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--games 'Tetris' is not an Atari 100k game; allowed: Alien" in result.stderr
