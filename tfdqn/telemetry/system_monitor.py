"""Background sampling of process CPU, resident memory and, when visible, NVIDIA GPU load.

This module must not import TensorFlow: it runs on machines without it (and starting TensorFlow
would itself change what it measures). Without a GPU the GPU figures are absent, never zero.
"""

from __future__ import annotations

import threading
import time

import psutil

NO_GPU = "no GPU"


def _load_nvml():
    """The NVML bindings (nvidia-ml-py) initialised, or None when no NVIDIA driver or package is present."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    return pynvml


def gpu_free_bytes(nvml="auto") -> int | None:
    """Free memory of the first NVIDIA GPU (where TensorFlow places the replay), or None without one."""
    nvml = _load_nvml() if nvml == "auto" else nvml
    if nvml is None or nvml.nvmlDeviceGetCount() == 0:
        return None
    return int(nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(0)).free)


class SystemMonitor:
    """Samples every `period` seconds on a daemon thread; `drain()` returns means since the last drain.

    CPU utilisation is the process's CPU time over wall time, divided by the cores it may run on,
    so 1.0 means every allowed core was busy. `nvml` may be given (a fake in tests); by default the
    real NVML is loaded if a driver is present, and `gpu` names what was found."""

    def __init__(self, period: float = 1.0, nvml="auto"):
        self.period = period
        self._process = psutil.Process()
        self._cores = len(self._process.cpu_affinity()) if hasattr(self._process, "cpu_affinity") else psutil.cpu_count()
        self._nvml = _load_nvml() if nvml == "auto" else nvml
        self._handles = []
        if self._nvml is not None:
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self._nvml.nvmlDeviceGetCount())]
        names = [self._nvml.nvmlDeviceGetName(h) for h in self._handles]
        self.gpu = ", ".join(n.decode() if isinstance(n, bytes) else str(n) for n in names) or NO_GPU
        self._lock = threading.Lock()
        self._samples: list[dict] = []
        self._totals: dict[str, list] = {}  # key -> [sum, count, max] over the whole run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tfdqn-system-monitor", daemon=True)
        self._last_cpu = self._cpu_seconds()
        self._last_time = time.perf_counter()

    def _cpu_seconds(self) -> float:
        times = self._process.cpu_times()
        return times.user + times.system

    def sample(self) -> dict:
        """One reading: CPU share since the previous reading, RSS now, and GPU utilisation and memory."""
        now, cpu = time.perf_counter(), self._cpu_seconds()
        elapsed = max(now - self._last_time, 1e-9)
        reading = {"system/cpu_util": (cpu - self._last_cpu) / elapsed / self._cores,
                   "system/rss_bytes": float(self._process.memory_info().rss)}
        self._last_cpu, self._last_time = cpu, now
        if self._handles:
            try:
                util = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
                memory = [self._nvml.nvmlDeviceGetMemoryInfo(h).used for h in self._handles]
            except Exception:  # NVMLError (e.g. NotSupported on MIG slices): no GPU figure, never a made-up one
                return reading
            reading["system/gpu_util"] = sum(util) / len(util) / 100.0
            reading["system/gpu_mem_bytes"] = float(sum(memory))
        return reading

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            reading = self.sample()
            with self._lock:
                self._samples.append(reading)
                for key, value in reading.items():
                    total = self._totals.setdefault(key, [0.0, 0, value])
                    total[0], total[1], total[2] = total[0] + value, total[1] + 1, max(total[2], value)

    def start(self) -> "SystemMonitor":
        self._last_cpu, self._last_time = self._cpu_seconds(), time.perf_counter()
        self._thread.start()
        return self

    def drain(self) -> dict:
        """Mean of each figure over the samples since the last drain (empty if none was taken)."""
        with self._lock:
            samples, self._samples = self._samples, []
        keys = samples[0].keys() if samples else ()
        return {key: sum(s[key] for s in samples) / len(samples) for key in keys}

    def run_figures(self) -> dict:
        """Since start: mean CPU (and GPU) utilisation and the highest RSS, for a run's summary.json."""
        with self._lock:
            totals = {key: list(value) for key, value in self._totals.items()}
        figures = {"cpu_util": totals["system/cpu_util"][0] / totals["system/cpu_util"][1] if totals else None,
                   "rss_bytes_max": totals["system/rss_bytes"][2] if totals else None}
        if "system/gpu_util" in totals:
            figures["gpu_util"] = totals["system/gpu_util"][0] / totals["system/gpu_util"][1]
        return figures

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def main(argv: list[str] | None = None) -> int:
    """`python -m tfdqn.telemetry.system_monitor [SECONDS]`: print one JSON line per second (checks a GPU host without TensorFlow)."""
    import json

    from tfdqn.cli import OneLineErrorParser, number  # no TensorFlow either

    parser = OneLineErrorParser(prog="python -m tfdqn.telemetry.system_monitor",
                                description="Print the readings training logs under system/ (CPU share, resident "
                                            "memory, NVIDIA GPU load where NVML sees one), one JSON line per second, "
                                            "without TensorFlow.")
    parser.add_argument("seconds", nargs="?", type=number(float), default=10.0, metavar="SECONDS",
                        help="how long to sample (default 10)")
    seconds = parser.parse_args(argv).seconds
    if not seconds > 0:
        parser.error(f"SECONDS {seconds:g} is not positive; allowed: a number of seconds > 0")
    sampler = SystemMonitor(period=0.25).start()
    print(json.dumps({"gpu": sampler.gpu}), flush=True)
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(1.0)
        print(json.dumps(sampler.drain()), flush=True)
    sampler.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
