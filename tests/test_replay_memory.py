"""What the replay may take and what there is: the GPU's or the host's memory, within a cgroup's limit and an
RLIMIT_AS; one budget for the check and the ring; a 1M Atari replay filled under a 2 GiB limit."""

import json
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tfdqn import config as config_lib
from tfdqn.envs.make import make_env
from tfdqn.errors import UserError
from tfdqn.run.replay_memory import cgroup_memory_left, check_memory

DATA = pathlib.Path(__file__).parent / "data"
GIB = 2**30


def _config(**overrides):
    return config_lib.build_config([DATA / "cartpole_5000.yaml"], {"env.id": "Breakout", "env.frame_stack": 4,
                                                                   "replay.capacity": 1_000_000, **overrides})


def _spec(config):
    env, spec = make_env(config.env, seed=0)
    env.close()
    return spec


class _OneGpu:
    """NVML's answers for one GPU with 2 GiB free: an NVIDIA GPU cannot exist on this machine."""

    class _Memory:
        free = 2 * GIB

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetMemoryInfo(self, handle):
        return self._Memory()


@pytest.mark.parametrize("device, nvml, where", [("accelerator", _OneGpu(), "GPU memory"),
                                                 ("accelerator", None, "host memory"),
                                                 ("host", _OneGpu(), "host memory")])
def test_the_memory_check_reads_the_memory_the_replay_will_live_in(device, nvml, where):
    """A device replay lives in the GPU's memory where there is one (host memory otherwise, as on a CPU)."""
    config = _config(**{"replay.device": device})
    if where == "GPU memory":  # 1M Atari frames need about 7 GiB: more than the GPU's 2 GiB
        with pytest.raises(UserError, match=r"needs \d+\.\d+ GiB but only 2\.00 GiB of GPU memory is available"):
            check_memory(config, _spec(config), nvml=nvml)
    else:
        assert check_memory(config, _spec(config), nvml=nvml) == 0  # this machine's host memory holds it


def test_a_compressed_replay_gets_a_budget_the_memory_holds():
    config = _config(**{"replay.compression": "zstd"})
    budget = check_memory(config, _spec(config))
    assert 0 < budget <= 7_098_000_352  # at most the raw ring, at most half the memory available
    chosen = _config(**{"replay.compression": "zstd", "replay.memory_budget_gib": 1.5})
    assert check_memory(chosen, _spec(chosen)) == int(1.5 * GIB)


@pytest.mark.parametrize("budget, message", [
    (0.01, r"^config key replay.memory_budget_gib = 0.01 cannot hold the replay's records \(0.047 GiB up front: 50 "
           r"bytes a slot\) and \d+ frames that do not compress; allowed: replay.memory_budget_gib >= 0.047$"),
    (100_000, r"^the replay's memory budget of 100000.00 GiB is more than the [\d.]+ GiB of host memory available; "
              r"allowed: replay.memory_budget_gib <= [\d.]+$"),
])
def test_a_budget_too_small_or_too_large_is_refused_in_one_line(budget, message):
    config = _config(**{"replay.compression": "zstd", "replay.memory_budget_gib": budget})
    with pytest.raises(UserError, match=message):
        check_memory(config, _spec(config))


@pytest.mark.parametrize("membership, files, left", [
    ("0::/job/run\n", {"memory.max": "max", "job/memory.max": "3000", "job/memory.current": "1000",
                       "job/run/memory.max": "5000", "job/run/memory.current": "1000"}, 2000),  # the parent's is less
    ("0::/\n", {"memory.max": "max"}, None),
    ("4:memory:/box\n0::/\n", {"memory/memory.limit_in_bytes": "9223372036854771712",
                               "memory/box/memory.limit_in_bytes": "8000", "memory/box/memory.usage_in_bytes": "500"},
     7500),  # cgroup v1
    ("4:memory:/box\n", {"memory/box/memory.limit_in_bytes": "9223372036854771712"}, None),  # v1 without a limit
])
def test_the_cgroup_limit_is_read_up_the_tree_in_v2_and_v1(tmp_path, membership, files, left):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text + "\n")
    assert cgroup_memory_left(tmp_path, membership) == left


def _fill(*args, limit: int | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "tools.fill_replay", "--num-envs", "4", *args]
    if limit is not None:
        command = ["prlimit", f"--as={limit}", *command]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_million_transition_replay_fills_under_a_2_gib_address_space_limit(tmp_path):
    """Breakout through the trainer's envs into a 1M-slot compressed ring, in a process whose address space
    is capped at 2 GiB (the raw ring alone would need 6.6 GiB): it fills, within its budget; a budget the
    limit cannot hold is refused before filling, in one line naming both figures. The whole 1M fill is
    docs/experiments/replay.md's (tools/fill_replay.py); here the first 12,000 transitions."""
    result = _fill("--transitions", "12000", "--out", str(tmp_path / "fill.json"), limit=2 * GIB)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "fill.json").read_text())
    assert report["capacity"] == 1_000_000 and report["slots_held"] >= 12_000 and report["fewest_held"] is None
    assert report["memory_bytes"] <= report["memory_budget_bytes"] < 2 * GIB and report["raw_bytes"] > 6 * GIB
    assert report["code_bytes_per_slot"] < 1000 and report["peak_rss_bytes"] < 2 * GIB
    assert result.stdout.startswith("replay: 1,000,000 transitions, frames compressed with zstd as they come")
    refused = _fill("--transitions", "10", "--memory-budget-gib", "3", limit=2 * GIB)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith(
        "python -m tools.fill_replay: error: the replay's memory budget of 3.00 GiB is more than the ")
    assert "GiB of address space under this process's RLIMIT_AS available; allowed: " in refused.stderr
