"""`python -m tools.bench_networks` end to end: every variant timed, its cost against the Nature CNN on
84x84."""

import json

import pytest

from tests.conftest import main_in_process
from tools import bench_networks


@pytest.mark.slow
def test_the_bench_times_every_network_and_frame_size(tmp_path):
    # Its main in this process: the timed networks and the Keras graphs are the same, and no second TensorFlow
    # starts up (seconds of CPU).
    result = main_in_process(bench_networks.main, "--seconds", "0.05", "--rounds", "1", "--variants", "small_42",
                             "small_42_bf16", "impala_42", "impala_42_qr", "impala_42_iqn8",
                             "--out", str(tmp_path / "n.json"), "--table", str(tmp_path / "n.md"))
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "n.json").read_text())
    assert written["command"].startswith("python -m tools.bench_networks --seconds 0.05 --rounds 1 ")
    figures = written["figures"]
    assert list(figures) == ["nature_84", "small_42", "small_42_bf16", "impala_42", "impala_42_qr",
                            "impala_42_iqn8"]  # the reference first
    assert figures["nature_84"]["update_against_nature_84"] == 1.0
    assert all(f["update_ms"] > 0 and f["act_ms"] > 0 for f in figures.values())
    # small_cnn on 42x42 for Pong's 6 actions, with atari_cpu's dueling head: conv 16x4x4 over 4 frames, conv 32x4x4,
    # dense 256 over the 11x11x32 map, then 6 advantages and 1 value
    params = (4 * 4 * 4 * 16 + 16) + (4 * 4 * 16 * 32 + 32) + (11 * 11 * 32 * 256 + 256) + (256 * 6 + 6) + (256 + 1)
    assert figures["small_42"]["params"] == params == figures["small_42_bf16"]["params"]
    # QR-DQN's dueling head: 200 quantiles for the value and for each of the 6 advantages, from the dense 512
    qr_head, q_head = (512 * 200 + 200) + (512 * 6 * 200 + 6 * 200), (512 + 1) + (512 * 6 + 6)
    assert figures["impala_42_qr"]["params"] - figures["impala_42"]["params"] == qr_head - q_head
    # IQN adds the fractions' embedding: cos(pi i tau) for i = 1..64, a dense layer onto the IMPALA torso's
    # 6x6x32 features at 42x42 (three stride-2 pools: 42, 21, 11, 6), whatever the number of fractions
    assert figures["impala_42_iqn8"]["params"] - figures["impala_42"]["params"] == 64 * 6 * 6 * 32 + 6 * 6 * 32
    table = (tmp_path / "n.md").read_text()
    assert "| small_cnn, 42x42, float32, huber |" in table
    assert "| impala, 42x42, float32, implicit_quantile (8 fractions) |" in table
