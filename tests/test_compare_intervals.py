import csv
import subprocess
import sys

import pytest

from tests.conftest import REPO, tensorboard_tags


@pytest.mark.slow
def test_sweep_writes_csv_table_plot_and_tensorboard_logs(tmp_path):
    out = tmp_path / "sweep"
    result = subprocess.run([sys.executable, "tools/compare_intervals.py", "--env", "CartPole", "--intervals", "1",
                             "4", "--steps", "4000", "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((out / "intervals.csv").open()))
    assert [int(r["training_interval"]) for r in rows] == [1, 4]
    for row in rows:
        ratio = float(row["updates_per_sec"]) / float(row["env_steps_per_sec"])
        assert ratio == pytest.approx(1 / int(row["training_interval"]), rel=0.3)
        assert 0.0 < float(row["cpu_util"]) <= 1.05
        assert "gpu_util" not in row  # no GPU here: absent, not zero
    assert float(rows[0]["learner_busy_share"]) > float(rows[1]["learner_busy_share"])
    assert "| training_interval |" in (out / "intervals.md").read_text() and "no GPU" in result.stdout
    assert (out / "intervals.png").read_bytes()[:4] == b"\x89PNG"
    for k in (1, 4):
        tags = tensorboard_tags(out / f"interval_{k}")
        assert {"perf/learner_busy_share", "perf/updates_per_sec", "system/cpu_util"} <= tags


def test_bad_interval_is_one_line(tmp_path):
    result = subprocess.run([sys.executable, "tools/compare_intervals.py", "--intervals", "0", "--out", str(tmp_path)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "run.training_interval = 0" in result.stderr or "--intervals [0]" in result.stderr
