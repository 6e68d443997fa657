import json
import os
import subprocess
import sys

from tools import bench_act

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench(*args):
    return subprocess.run([sys.executable, "-m", "tools.bench_act", *args], cwd=REPO, capture_output=True, text=True)


def test_each_arm_acts_in_its_own_process_under_its_thread_limit(tmp_path):
    """Two of the comparisons: a JAX arm and a tfdqn arm each pinned to one core, and the tfdqn arm on every core
    beside its noisy twin holding its noise (`--pairs`, so that 4 processes start rather than 7)."""
    out, table = tmp_path / "act.json", tmp_path / "act.md"
    pairs = [("tfdqn_one_core", "jax_one_core"), ("tfdqn", "tfdqn_noisy_held")]
    result = _bench("--rounds", "1", "--seconds", "0.05", "--batches", "1", "2", "--pairs",
                    *(f"{mine}/{theirs}" for mine, theirs in pairs), "--out", str(out), "--table", str(table))
    assert result.returncode == 0, result.stderr[-2000:]
    results = json.loads(out.read_text())
    (round_,) = results["rounds"]
    assert set(round_) == {arm for pair in pairs for arm in pair}
    for arm, figures in round_.items():
        assert figures["cores"] == (1 if arm.endswith("_one_core") else len(os.sched_getaffinity(0))), arm
        assert figures["1"] > 0 and figures["2"] > 0, arm  # calls/s per batch size; speed is the bench's to show
    assert set(pairs) <= set(bench_act.PAIRS)
    for mine, theirs in pairs:
        assert results["summary"]["ratios"][f"{mine}/{theirs}"]["1"] == [round_[mine]["1"] / round_[theirs]["1"]]
    rows = [line for line in table.read_text().splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert len(rows) == 2 * len(pairs) and table.read_text() in result.stdout


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "act.json"
    for args, message in ((("--rounds", "0"), "--rounds 0 is not allowed: it must be above 0"),
                          (("--batches", "1", "-8"), "--batches -8 is not allowed: it must be above 0")):
        result = _bench(*args, "--out", str(out))
        assert result.returncode == 2 and result.stderr.strip().endswith(message), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    result = _bench("--pairs", "jax/tfdqn", "--out", str(out))
    assert result.returncode == 2 and "--pairs: invalid choice: 'jax/tfdqn'" in result.stderr, result.stderr
    result = _bench("--seconds", "1")
    assert result.returncode == 2 and result.stderr.strip().endswith("--out FILE.json is required")
    assert not out.exists()
