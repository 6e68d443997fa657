"""tools/bench_replay.py on real Breakout play: every codec's row, a full ring's bytes, a table."""

import json
import subprocess
import sys

from tests.conftest import REPO


def test_the_replay_bench_measures_each_codec_on_a_full_ring(tmp_path):
    result = subprocess.run([sys.executable, "-m", "tools.bench_replay", "--games", "Breakout", "--transitions",
                             "1500", "--batches", "5", "--out", str(tmp_path / "r.json"), "--table",
                             str(tmp_path / "r.md")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["command"].startswith("python -m tools.bench_replay --games Breakout ")
    rows = {row["codec"]: row for row in report["rows"]}
    assert set(rows) == {"none", "zstd", "lz4"} and {row["game"] for row in rows.values()} == {"ALE/Breakout-v5"}
    assert rows["none"]["bytes_per_frame"] == 7056 and rows["none"]["memory_vs_raw"] == 1.0
    assert 7056 < rows["none"]["bytes_per_transition"] < 7200  # the frame and the slot's records
    for codec in ("zstd", "lz4"):
        assert rows[codec]["bytes_per_frame"] < 1000 and rows[codec]["memory_vs_raw"] > 5, rows[codec]
        assert rows[codec]["decode_us"] > 0 and rows[codec]["batch_ms"] > 0
    assert (tmp_path / "r.md").read_text() == result.stdout and result.stdout.count("| ALE/Breakout-v5 |") == 3
