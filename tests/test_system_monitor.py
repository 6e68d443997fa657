import json
import subprocess
import sys
import threading
import time
import types

import pytest

from tfdqn.telemetry.system_monitor import NO_GPU, SystemMonitor


def _busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_cpu_utilisation_under_a_known_busy_loop():
    sampler = SystemMonitor(period=0.1, nvml=None)
    cores = sampler._cores
    sampler.start()
    time.sleep(0.6)
    idle = sampler.drain()["system/cpu_util"]
    _busy(1.0)  # one thread spinning: one core of `cores`
    busy = sampler.drain()["system/cpu_util"]
    sampler.stop()
    assert 0.0 <= idle < 0.3
    assert 0.4 / cores <= busy <= 1.05 / cores + 0.05
    assert busy > idle


def test_two_busy_threads_use_more_of_the_machine():
    sampler = SystemMonitor(period=0.1, nvml=None).start()
    threads = [threading.Thread(target=_busy, args=(1.0,)) for _ in range(2)]
    sampler.drain()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reading = sampler.drain()
    sampler.stop()
    assert 0.0 < reading["system/cpu_util"] <= 1.05  # the GIL may serialise them; never above all cores
    assert reading["system/rss_bytes"] > 10 * 2**20


def test_without_a_gpu_the_gpu_figures_are_absent_not_zero():
    sampler = SystemMonitor(period=0.05, nvml=None).start()
    time.sleep(0.2)
    reading = sampler.drain()
    sampler.stop()
    assert sampler.gpu == NO_GPU
    assert "system/gpu_util" not in reading and "system/gpu_mem_bytes" not in reading


class _FakeNvml:
    """Stands in for pynvml where no NVIDIA GPU can exist: two devices with known load."""

    def __init__(self):
        self.handles = [types.SimpleNamespace(index=0), types.SimpleNamespace(index=1)]

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.handles[index]

    def nvmlDeviceGetName(self, handle):
        return b"Fake H100" if handle.index == 0 else "Fake H100"

    def nvmlDeviceGetUtilizationRates(self, handle):
        return types.SimpleNamespace(gpu=[40, 80][handle.index], memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return types.SimpleNamespace(used=[2**30, 3 * 2**30][handle.index], total=80 * 2**30)


def test_nvml_path_reads_utilisation_and_memory_from_handles():
    sampler = SystemMonitor(period=0.05, nvml=_FakeNvml()).start()
    time.sleep(0.3)
    reading = sampler.drain()
    sampler.stop()
    assert sampler.gpu == "Fake H100, Fake H100"
    assert reading["system/gpu_util"] == pytest.approx(0.6)
    assert reading["system/gpu_mem_bytes"] == pytest.approx(4 * 2**30)


def test_sampler_module_runs_without_tensorflow(tmp_path):
    blocker = tmp_path / "tensorflow.py"
    blocker.write_text("raise ImportError('tensorflow is not importable here')\n")
    code = "import sys, tfdqn.telemetry.system_monitor; assert 'tensorflow' not in sys.modules; tfdqn.telemetry.system_monitor.main()"
    result = subprocess.run([sys.executable, "-c", code, "1.5"], capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": f"{tmp_path}:{__import__('pathlib').Path(__file__).parent.parent}"})
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0] == {"gpu": NO_GPU} and "system/cpu_util" in lines[1]
