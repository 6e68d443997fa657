import csv
import subprocess
import sys

import pytest

from tests.conftest import REPO, main_in_process, tensorboard_tags
from tfdqn.bench.windows import steady_state

from tfdqn.bench import compare as compare_intervals
from tfdqn.command import main as command_main


def _windows(values: list[float], every: int = 100) -> list[tuple[int, float]]:
    return [(every * (i + 1), v) for i, v in enumerate(values)]


def test_steady_state_leaves_out_windows_before_learning_and_the_warm_up():
    # windows end at 100..800; learning starts at 250, so the windows ending at 100..300 began before it
    # (extreme: 1e6 steps/s with no updates), the one ending at 400 is the warm-up (compilation: very slow)
    series = {"perf/env_steps_per_sec": _windows([1e6, 1e6, 1e6, 1.0, 500, 510, 490, 500]),
              "perf/updates_per_sec": _windows([0, 0, 0, 0.1, 125, 130, 120, 125])}
    steady = steady_state(series, learning_starts=250, warmup=1)
    assert steady == {"perf/env_steps_per_sec": [500, 510, 490, 500], "perf/updates_per_sec": [125, 130, 120, 125]}
    assert steady_state(series, learning_starts=250, warmup=0)["perf/env_steps_per_sec"][0] == 1.0
    assert steady_state(series, learning_starts=800, warmup=1) == {}


def test_pooled_and_table_show_mean_and_spread_over_repeats_and_windows():
    runs = [{"perf/env_steps_per_sec": [500, 520]}, {"perf/env_steps_per_sec": [40, 40]},
            {"perf/env_steps_per_sec": [480, 500]}]
    stats = compare_intervals.pooled(runs, [1, 4, 1])
    assert list(stats) == [1, 4] and stats[1]["env_steps_per_sec"] == pytest.approx((500, 14.142), rel=1e-3)
    table = compare_intervals.markdown_table(stats, "note")
    assert "| 1 | 500 ± 14 |" in table and "GPU" not in table.splitlines()[0]


def test_repeats_are_interleaved():  # the sweep test runs one repeat: two would double its time
    assert compare_intervals.schedule([1, 4, 16], 2) == [(1, 0), (4, 0), (16, 0), (1, 1), (4, 1), (16, 1)]


@pytest.mark.slow
def test_sweep_writes_csv_table_figures_and_tensorboard_logs(tmp_path):
    out = tmp_path / "sweep"
    # in this process (the command's own main): the test reads back what it wrote and printed, and a fresh
    # process would only add a TensorFlow start-up; 400 steps leave six steady windows of 40 per interval
    result = main_in_process(command_main, "compare", "--env", "CartPole", "--intervals", "0.5", "4", "--steps", "400",
                             "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((out / "intervals.csv").open()))
    assert [(float(r["training_interval"]), int(r["repeat"])) for r in rows] == [(0.5, 0), (4, 0)]
    for row in rows:
        ratio = float(row["updates_per_sec"]) / float(row["env_steps_per_sec"])
        assert ratio == pytest.approx(1 / float(row["training_interval"]), rel=0.3)  # env_steps_per_round pinned to 1
        assert float(row["updates_per_sec_min"]) > 0  # no window from before learning starts
        if row.get("cpu_util"):  # system/ readings are 1 s samples: a short run's steady windows may hold none
            assert 0.0 < float(row["cpu_util"]) <= 1.05 and float(row["rss_gib"]) > 0
        assert "gpu_util" not in row  # no GPU here: absent, not zero
    header = (out / "intervals.md").read_text().splitlines()[0]
    assert header.startswith("| interval | env steps/s |") and header.count("|") - 1 <= 8
    assert (out / "intervals.png").read_bytes()[:4] == b"\x89PNG" and b"<svg" in (out / "intervals.svg").read_bytes()
    assert f"tensorboard --logdir {out}" in result.stdout
    tags = tensorboard_tags(out / "interval_4_r0")
    assert {"perf/learner_busy_share", "perf/updates_per_sec", "system/cpu_util"} <= tags
    again = subprocess.run([sys.executable, "-m", "tfdqn", "compare", "--intervals", "4", "--steps", "600", "--out",
                            str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (again.returncode, again.stderr.count("\n")) == (2, 1), again.stderr
    assert "already holds a comparison" in again.stderr and "allowed: a new --out" in again.stderr


def test_every_axis_of_the_figure_has_tick_labels():
    stats = {1: {"env_steps_per_sec": (500.0, 10.0), "updates_per_sec": (480.0, 9.0), "learner_busy_share": (0.6, 0.02),
                 "cpu_util": (0.5, 0.01), "share_update": (0.6, 0.0), "share_act": (0.4, 0.0)},
             4: {"env_steps_per_sec": (900.0, 20.0), "updates_per_sec": (220.0, 5.0), "learner_busy_share": (0.3, 0.02),
                 "cpu_util": (0.5, 0.01), "share_update": (0.3, 0.0), "share_act": (0.7, 0.0)}}
    fig = compare_intervals.build_figure(stats, "test")
    fig.draw_without_rendering()  # tick label texts are set when the figure is laid out
    assert len(fig.axes) == 3
    for ax in fig.axes:
        assert ax.get_xscale() == ax.get_yscale() == "linear"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4"]
        assert all(t.get_text() for t in ax.get_yticklabels()) and ax.get_yticklabels()


def test_bad_interval_is_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "tfdqn", "compare", "--intervals", "0", "--out", str(tmp_path)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--intervals 0: allowed:" in result.stderr and "intervals > 0" in result.stderr
