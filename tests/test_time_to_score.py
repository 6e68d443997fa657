"""tfdqn time-to-score end to end on a tiny Pong budget: a run that reaches its target ends there, and the
record, table and curves say when; a finished seed is read back, not rerun; another target is another run."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

TINY_PONG = ["--set=env.screen_size=42", "--set=replay.capacity=2000", "--set=run.learning_starts=300",
             "--set=run.eval_every=400", "--set=run.eval_episodes=1", "--product-episodes=1",
             "--confirm-episodes=2", "--set=run.checkpoint_every=400", "--set=run.num_envs=2", "--set=env.max_episode_frames=1000"]


def _bench(tmp_path, *args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", "tfdqn", "time-to-score", "--game", "Pong", "--logdir", str(tmp_path / "runs"),
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
    first, [confirmation] = run["curve"][0], run["confirmations"]
    assert run["first_hit_env_steps"] == confirmation["env_steps"] == 400 and run["confirm_episodes"] == 2
    assert run["first_hit_wall_seconds"] == first["wall_seconds"] <= run["solve_wall_seconds"]
    assert run["solve_wall_seconds"] == confirmation["wall_seconds"] and 0 < first["wall_seconds"] <= run["run_seconds"]
    assert run["final_eval_episodes"] == 1 and run["product_env_steps"] == 400
    assert first["env_steps"] == 400 and first["return_mean"] >= -21
    assert run["final_eval_return"] is not None
    assert run["protocol"].startswith("protocol: ALE/Pong-v5, epsilon 0.05,") and "42x42 grayscale" in run["protocol"]
    run_dir = pathlib.Path(run["run_dir"])
    assert run_dir.name == f"Pong-config-{run['config_hash']}-seed0" and run["config"]["run"]["target_return"] == -21
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["reached_target"] is True and summary["target_return"] == -21.0
    hit = f"400, {run['first_hit_wall_seconds'] / 60:.1f} min | 400, {run['solve_wall_seconds'] / 60:.1f} min"
    product = f"{run['final_eval_return']:.1f} on 1 (last network {run['last_network_eval_return']:.1f})"
    assert f"| Pong | config | 0 | -21 | yes, 2 games | {hit} | {product} |" in \
        (tmp_path / "bench.md").read_text()
    assert (tmp_path / "curves.png").stat().st_size > 0 and (tmp_path / "curves.svg").stat().st_size > 0
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert run["commit"] == summary["code"]["commit"] == head  # the code the training process imported
    # a finished run read back into a new record keeps the commit it trained at, not the one checked out now
    summary["code"]["commit"] = "f" * 40
    (run_dir / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "bench.json").unlink()
    written = (run_dir / "summary.json").stat().st_mtime_ns
    again = _bench(tmp_path, "--seeds", "0", "--target", "-21", "--total-steps", "4000")
    assert again.returncode == 0, again.stderr
    assert "nothing to train" in again.stdout and (run_dir / "summary.json").stat().st_mtime_ns == written
    assert json.loads((tmp_path / "bench.json").read_text())["runs"][0]["commit"] == "f" * 40
    # another target is another recipe: trained in its own folder, never the first run's result under its label
    higher = _bench(tmp_path, "--seeds", "0", "--target", "21", "--total-steps", "400",
                    "--sweep-table", str(tmp_path / "sweep.md"), "--plot", str(tmp_path / "beside"))
    assert higher.returncode == 0, higher.stderr
    # its curves, and the first recipe's dashed beside them, each under its hash
    svg = (tmp_path / "beside.svg").read_text()
    [other] = [r for r in json.loads((tmp_path / "bench.json").read_text())["runs"] if r["target"] == 21]
    assert f"Pong config {other['config_hash']} seed 0" in svg and f"Pong config {run['config_hash']} seed 0" in svg
    assert "1 run to train" in higher.stdout and "| Pong | config | 0 | 21 | no, 2 games | - | - |" in higher.stdout
    # the sweep table: both recipes as trials, the second with what it set otherwise than the first
    first, second = (row.split(" | ") for row in (tmp_path / "sweep.md").read_text().splitlines()[2:])
    assert first[:3] == ["| T1", run["config_hash"], "0"] and "--target -21 --total-steps 4000`" in first[3]
    assert first[7] == f"-21 at 400, {run['solve_wall_seconds'] / 60:.1f} min" and first[8].startswith("400, ")
    assert second[0] == "| T2" and second[7] == "21: no" and second[8].startswith("400, ")
    assert set(second[3].split("; ")) == {"run.target_return -21.0 -> 21.0", "run.total_steps 4000 -> 400"}
    runs = json.loads((tmp_path / "bench.json").read_text())["runs"]
    assert sorted((r["target"], r["solved"], r["env_steps"]) for r in runs) == [(-21, True, 400), (21, False, 400)]
    assert len({r["config_hash"] for r in runs}) == 2 and len({r["run_dir"] for r in runs}) == 2
    # A report for seed 0 alone still tables every seed of its recipe the record holds (here a seed 1 that an
    # earlier invocation recorded), and none of the other recipe's.
    record = json.loads((tmp_path / "bench.json").read_text())
    record["runs"].append({**run, "seed": 1, "run_dir": str(run_dir.with_name(run_dir.name[:-1] + "1"))})
    (tmp_path / "bench.json").write_text(json.dumps(record))
    before = (tmp_path / "bench.json").read_bytes()
    for seeds in (["--seeds", "0"], []):  # without --seeds, a report-only look takes the seeds the record holds
        report = _bench(tmp_path, *seeds, "--target", "-21", "--total-steps", "4000", "--report-only")
        assert report.returncode == 0, report.stderr
        rows = [line for line in report.stdout.splitlines() if line.startswith("| Pong |")]
        assert [row.split(" | ")[2:4] for row in rows] == [["0", "-21"], ["1", "-21"]], report.stdout
    assert (tmp_path / "bench.json").read_bytes() == before  # a look writes nothing to the record unless asked
    stored = _bench(tmp_path, "--target", "-21", "--total-steps", "4000", "--report-only", "--write-record")
    assert stored.returncode == 0, stored.stderr
    assert json.loads((tmp_path / "bench.json").read_text())["reports"][run["config_hash"]]["command"].endswith(
        "--report-only --write-record")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_a_trial_stopped_by_sigterm_enters_the_record_as_it_stands_and_is_not_resumed_then(tmp_path):
    args = ["--seeds", "0", "--target", "21", "--total-steps", "20000"]  # never reached: the run goes on until stopped
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen([sys.executable, "-m", "tfdqn", "time-to-score", "--game", "Pong", "--logdir",
                                str(tmp_path / "runs"), "--out", str(tmp_path / "bench.json"), *TINY_PONG, *args],
                               cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + 300
    while not [f for f in (tmp_path / "runs").glob("*/evaluations.csv") if len(f.read_text().splitlines()) > 1]:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGTERM)  # as a user gives a trial up: the run checkpoints and says it was stopped
    process.wait(timeout=120)
    while _group_alive(process.pid):  # the training process may still be writing its checkpoint
        assert time.monotonic() < deadline + 120
        time.sleep(0.5)
    [run_dir] = (tmp_path / "runs").glob("Pong-*-seed0")
    assert json.loads((run_dir / "summary.json").read_text())["stopped_by"] == "SIGTERM"
    recorded = _bench(tmp_path, *args, "--record-stopped", "--table", str(tmp_path / "bench.md"),
                      "--sweep-table", str(tmp_path / "sweep.md"))
    assert recorded.returncode == 0, recorded.stderr
    [run] = json.loads((tmp_path / "bench.json").read_text())["runs"]
    assert run["stopped_by"] == "SIGTERM" and run["solved"] is False and run["final_eval_return"] is None
    assert 400 <= run["env_steps"] < 20000 and run["curve"][0]["env_steps"] == 400
    assert "| Pong | config | 0 | 21 | no, 2 games (stopped) | - | - |" in (tmp_path / "bench.md").read_text()
    row = (tmp_path / "sweep.md").read_text().splitlines()[2].split(" | ")
    assert row[7] == "21: no" and row[8].endswith(f" {run['run_seconds'] / 60:.0f} min, stopped |")
    # the same command without the flag finds the trial recorded, and leaves its folder as it was
    written = (run_dir / "summary.json").stat().st_mtime_ns
    again = _bench(tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert "nothing to train" in again.stdout and (run_dir / "summary.json").stat().st_mtime_ns == written


def test_a_key_the_command_sets_from_its_own_flag_is_refused_as_a_set_in_one_line(tmp_path):
    result = _bench(tmp_path, "--seeds", "1", "--target", "18", "--set=run.final_eval_episodes=5")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "tfdqn time-to-score: error: --set run.final_eval_episodes=5: this command sets run.final_eval_episodes from "
        "--product-episodes; allowed: --product-episodes"]


def test_bad_seeds_are_refused_in_one_line(tmp_path):
    result = _bench(tmp_path, "--seeds", "1", "1", "--target", "18")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "tfdqn time-to-score: error: --seeds 1 1: allowed: distinct integers >= 0"]


def test_the_sweep_table_reads_each_curve_at_the_marks_it_passed_then_at_its_last_evaluation():
    from tfdqn.bench.sweep_table import curve_by_marks

    curve = [{"env_steps": steps, "return_mean": mean} for steps, mean in
             [(50_000, 1.0), (100_000, 2.0), (225_000, 3.0), (300_000, 4.0), (1_100_000, 40.0)]]
    # 250k reads the newest evaluation at or before it (225k); 2M is past the run's end, so it is left out
    assert curve_by_marks(curve) == "2.0 at 100k, 3.0 at 250k, 4.0 at 500k, 4.0 at 1M, 40.0 at 1.1M (last)"
    assert curve_by_marks(curve[:2]) == "2.0 at 100k" and curve_by_marks([]) == "no evaluation"


def test_the_sweep_table_gives_a_stopped_runs_steps_to_three_figures():
    from tfdqn.bench.sweep_table import steps

    assert [steps(count) for count in (400, 15_228, 150_000, 265_612, 999_600, 1_000_000, 1_234_567)] == [
        "400", "15.2k", "150k", "266k", "1M", "1M", "1.23M"]


def test_the_sweep_table_marks_the_breakout_trial_that_ran_munchausen_on_n_step_returns():
    """T3 of docs/sweep-breakout.json ran Munchausen's target on 3-step returns, which the config now refuses: its
    row says so, and no other trial's does."""
    from tfdqn.bench.sweep_table import sweep_table

    record = json.loads((REPO / "docs" / "sweep-breakout.json").read_text())
    rows = sweep_table([run for run in record["runs"] if run["game"] == "Breakout"], record["reports"]).splitlines()
    marked = [row.split("|")[1].strip() for row in rows if "an operator no source defines" in row]
    assert marked == ["T3"]
