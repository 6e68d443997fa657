"""`python -m tools.bench_cartpole` on a real (short) CartPole run: what it times and the JSON it writes."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, main_in_process
from tools.bench_cartpole import main as bench_main


@pytest.mark.slow
def test_the_bench_times_a_real_run_and_writes_every_evaluation(tmp_path):
    out = tmp_path / "bench.json"
    args = ["--seeds", "1", "--first-seed", "3", "--total-steps", "1000", "--eval-every", "500",
            "--set", "run.learning_starts=300", "--out", str(out)]
    # The bench's own main in this process: the training run it times is a process of its own either way
    result = main_in_process(bench_main, *args)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    (run,) = report["runs"]
    assert run["impl"] == "tfdqn" and run["seed"] == 3 and report["overrides"] == ["run.learning_starts=300"]
    assert report["command"].startswith("python -m tools.bench_cartpole --seeds 1 --first-seed 3 ")
    assert [steps for steps, _ in run["evaluations"]] == [504, 1000]  # 8 envs: the first step past 500
    solved = [mean >= 475 for _, mean in run["evaluations"]]
    assert run["solved"] == any(solved)  # 1,000 steps rarely solve; the rule holds either way
    assert 0 < run["startup_seconds"] < run["total_wall_seconds"] and run["final_eval_return"] >= 8
    best = max(run["evaluations"], key=lambda e: (e[1], -e[0]))
    assert run["final_network"]["env_steps"] == best[0]  # the best-evaluated network is what the run reports
    assert report["summary"]["tfdqn"]["runs"] == 1 and "| tfdqn | " in result.stdout
    assert report["summary"]["tfdqn"]["final_eval_solved"] == int(run["final_eval_return"] >= 475)
    assert f"| 3 | {run['solve_env_steps'] or 'never'}" in result.stdout.replace(",", "")


def test_bad_input_is_one_line():
    result = subprocess.run([sys.executable, "-m", "tools.bench_cartpole", "--seeds", "0"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith("python -m tools.bench_cartpole: error: --seeds 0 is out of range; "
                                    "allowed: an integer >= 1")


@pytest.mark.slow
def test_sb3s_product_is_the_model_its_eval_callback_kept_on_the_same_cadence(tmp_path):
    pytest.importorskip("stable_baselines3")  # the compare extra
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, "-m", "tools.bench_cartpole", "--seeds", "1", "--no-tfdqn", "--peer",
                             "sb3", "--total-steps", "3000", "--eval-every", "1000", "--out", str(out)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["impl"] == "sb3" and [steps for steps, _ in run["evaluations"]] == [1000, 2000, 3000]
    assert run["best_evaluation"] == max(mean for _, mean in run["evaluations"])  # the kept model is the best
    summary = json.loads(out.read_text())["summary"]["sb3"]
    assert summary["final_eval_solved"] == int(run["final_eval_return"] >= 475)
    assert summary["last_network_solved"] == int(run["last_network_eval_return"] >= 475)
    assert "| product (best-evaluated network): final eval" in result.stdout
