"""How much memory the replay may take and how much there is: one figure for the start line, the check
before allocation and the ring's budget. Runs without TensorFlow (tools fill replays without it)."""

from __future__ import annotations

import math
import pathlib
import resource

import numpy as np
import psutil

from tfdqn.config import DQNConfig
from tfdqn.envs.spec import EnvSpec
from tfdqn.errors import UserError
from tfdqn.replay.frame_store import code_memory
from tfdqn.replay.ring import ReplayRing
from tfdqn.telemetry.system_monitor import gpu_free_bytes

CGROUP_ROOT = pathlib.Path("/sys/fs/cgroup")
WORST_CODE_OVERHEAD = 16  # what a codec adds to a frame it cannot shrink (zstd: a 13-byte header at most)


# (controller list in /proc/self/cgroup, folder under CGROUP_ROOT, limit file, usage file): v2, then v1's memory
CGROUP_FILES = (("", "", "memory.max", "memory.current"),
                ("memory", "memory", "memory.limit_in_bytes", "memory.usage_in_bytes"))
UNLIMITED = 2**62  # cgroup v1 writes "no limit" as a number near 2^63


def cgroup_memory_left(root: pathlib.Path = CGROUP_ROOT, membership: str | None = None) -> int | None:
    """Bytes this process's memory cgroup and its parents may still take (limit - usage, the least along the
    way up), under cgroup v2 or v1; None where no limit is set or none can be read. `membership`: the text
    of /proc/self/cgroup (read when None)."""
    try:
        lines = (pathlib.Path("/proc/self/cgroup").read_text() if membership is None else membership).splitlines()
    except OSError:
        return None
    left = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for names, folder, limit_file, usage_file in CGROUP_FILES:
            if controllers != names and names not in controllers.split(","):
                continue
            top = root / folder if folder else root
            group = top / path.lstrip("/")
            while True:
                room = _room(group, limit_file, usage_file)
                if room is not None:
                    left = room if left is None else min(left, room)
                if group == top or top not in group.parents:
                    break
                group = group.parent
    return left


def _room(group: pathlib.Path, limit_file: str, usage_file: str) -> int | None:
    try:
        limit = (group / limit_file).read_text().strip()
        if limit == "max" or int(limit) >= UNLIMITED:
            return None
        return int(limit) - int((group / usage_file).read_text())
    except (OSError, ValueError):
        return None


def host_memory_left() -> tuple[int, str]:
    """(bytes, what) this process may still take of the host's memory: what is available, within this
    cgroup's memory limit and this process's address-space limit (prlimit --as), whichever is least."""
    options = [(psutil.virtual_memory().available, "host memory")]
    cgroup = cgroup_memory_left()
    if cgroup is not None:
        options.append((cgroup, "memory under this cgroup's limit"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        options.append((soft - psutil.Process().memory_info().vms, "address space under this process's RLIMIT_AS"))
    return min(options)


def memory_for_replay(replay_device: str, nvml="auto") -> tuple[int, str]:
    """(free bytes, name) of the memory the replay will live in: the GPU's for `replay.device: accelerator`
    where there is an NVIDIA GPU (TensorFlow places its variables there), else the host's."""
    if replay_device == "accelerator":
        free = gpu_free_bytes(nvml)
        if free is not None:
            return free, "GPU memory"
    return host_memory_left()


def _ring_arguments(config: DQNConfig, spec: EnvSpec) -> dict:
    return {"capacity": config.replay.capacity, "frame_shape": spec.frame_shape, "frame_dtype": spec.frame_dtype,
            "stack_size": spec.stack_size, "num_streams": config.num_streams, "n_step": config.learner.n_step,
            "prioritized": config.replay.sampler == "prioritized"}


def _least_slots(config: DQNConfig) -> int:
    """Transitions a budget must hold however badly frames compress: a batch and each stream's stacks and
    look-ahead (the smallest capacity `tfdqn.config.validation` allows)."""
    return config.replay.batch_size + config.num_streams * (config.env.frame_stack + config.learner.n_step)


def check_memory(config: DQNConfig, spec: EnvSpec, nvml="auto") -> int:
    """Refuse a replay that cannot fit before it is allocated, naming both sizes and where; the ring's memory
    budget in bytes (0: none, the raw ring takes all of its memory up front)."""
    arguments = _ring_arguments(config, spec)
    up_front = ReplayRing.bytes_needed(**arguments, compression=config.replay.compression)
    raw = ReplayRing.bytes_needed(**arguments)
    available, where = memory_for_replay(config.replay.device, nvml)
    if config.replay.compression == "none":
        if raw > 0.9 * available:
            fits = int(config.replay.capacity * 0.9 * available / raw)
            raise UserError(f"replay.capacity = {config.replay.capacity:,} needs {raw / 2**30:.2f} GiB but only "
                            f"{available / 2**30:.2f} GiB of {where} is available; allowed: replay.capacity <= {fits:,}")
        return 0
    frame_bytes = math.prod(spec.frame_shape) * np.dtype(spec.frame_dtype).itemsize
    least = up_front + _least_slots(config) * code_memory(frame_bytes + WORST_CODE_OVERHEAD)
    budget = config.replay.memory_budget_gib * 2**30
    if budget == 0:
        budget = max(min(raw, available // 2), least)
    elif budget < least:
        raise UserError(f"config key replay.memory_budget_gib = {config.replay.memory_budget_gib:g} cannot hold the "
                        f"replay's records ({up_front / 2**30:.3f} GiB up front: {up_front / config.replay.capacity:.0f} "
                        f"bytes a slot) and {_least_slots(config):,} frames "
                        f"that do not compress; allowed: replay.memory_budget_gib >= {least / 2**30:.3f}")
    if budget > 0.9 * available:
        allowed = ("replay.memory_budget_gib <= " f"{0.9 * available / 2**30:.2f}" if config.replay.memory_budget_gib
                   else "replay.memory_budget_gib set to what fits, or a smaller replay.capacity")
        raise UserError(f"the replay's memory budget of {budget / 2**30:.2f} GiB is more than the "
                        f"{available / 2**30:.2f} GiB of {where} available; allowed: {allowed}")
    return int(budget)


def replay_line(replay: ReplayRing) -> str:
    """The start line's size of the replay: all of it up front, or with compression its budget, what is
    allocated up front and what the frames would take raw."""
    capacity = replay.capacity
    if replay.compression == "none":
        return (f"replay: {capacity:,} transitions, {replay.nbytes / 2**30:.2f} GiB ({replay.nbytes:,} bytes, "
                f"{replay.nbytes / capacity:.0f} per transition)")
    raw = replay.raw_nbytes
    return (f"replay: {capacity:,} transitions, frames compressed with {replay.compression} as they come, within "
            f"a budget of {replay.memory_budget / 2**30:.2f} GiB ({replay.nbytes / 2**20:.1f} MiB up front); raw: "
            f"{raw / 2**30:.2f} GiB ({raw / capacity:.0f} bytes per transition)")
