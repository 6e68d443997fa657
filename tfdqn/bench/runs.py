"""The training runs a benchmark starts: each a `python -m tfdqn.train` process as a user would run it, several at
once on this machine's cores or as Ray tasks on a cluster.

A run's folder is named by its RunKey and checked against it before anything is read; a stopped run resumes from
its checkpoint, and one whose process was killed (the OOM killer, a lost node) is resumed once more at once. Each
process's TensorFlow thread pools are sized to its share of the CPUs (`--cpus-per-run`), so no `taskset` is
needed. The benchmark records each run as it ends, from the figures `collect` takes from its folder where it
trained. On a cluster the run folders must live on a filesystem every node mounts at the same path (a run may
resume on another node than the one it started on): a task on each node looks for a file written here before
any run starts, and a node that cannot see it stops the benchmark in one line. A run's process dies with the Ray
worker that started it, so a retried task never finds the folder held by an orphan of its node.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import os
import pathlib
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

from tfdqn.run.provenance import code_now, provenance
from tfdqn.bench.runkey import RunKey, check_folder
from tfdqn.errors import UserError, one_line
from tfdqn.extras import require
from tfdqn.run.markers import complete_steps
from tfdqn.run.run_dir import finished_summary, read_summary
from tfdqn.tuning.parent_death import child_environment

THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS")
KILLED_RETRIES = 1  # a run whose process a signal killed is resumed this many times before it counts as failed


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    game: str
    key: RunKey
    run_dir: pathlib.Path
    arguments: tuple[str, ...]  # tfdqn.train's arguments for a new run of the key's recipe and seed
    what: str  # how the sweep's lines name it: "Pong seed 0"


def finished(run_dir: pathlib.Path) -> dict | None:
    """The run's summary where it ended by itself (no stop signal), at its total steps or its target, else None."""
    return finished_summary(run_dir, total_steps=0)


def stopped(run_dir: pathlib.Path) -> dict | None:
    """The summary of a run a stop signal ended (it resumes from its checkpoint), else None."""
    summary = read_summary(run_dir)
    return summary if summary is not None and "stopped_by" in summary else None


def code_of(run_dir: pathlib.Path) -> dict:
    """The version and commit of the code whose process ended the run (its summary's `code`); for a summary
    written before summaries carried it, this process's. A run writes its summary only when it finishes or a
    signal stops it, so the summary as it is serves both."""
    return read_summary(run_dir).get("code") or provenance()


def train_command(run_dir: pathlib.Path, arguments: tuple[str, ...]) -> tuple[list[str], str]:
    """The command that takes the run on (`--resume` where it holds a checkpoint) and how it starts."""
    train = [sys.executable, "-m", "tfdqn.train", "--quiet"]
    saved = complete_steps(run_dir / "checkpoints")
    if saved:
        return [*train, "--resume", str(run_dir)], f"resumed from env step {saved[0]}"
    return [*train, "--logdir", str(run_dir.parent), "--run-name", run_dir.name, *arguments], "new"


def thread_environment(cpus: float, die_with_parent: bool = False) -> dict:
    """This process's environment with TensorFlow's and OpenMP's thread pools sized to `cpus`; with
    `die_with_parent`, the run's process dies with this one (`tfdqn.tuning.parent_death`). Only a Ray task asks
    for it: here runs start from a pool's threads, and Linux's parent-death signal follows the thread."""
    threads = str(max(1, int(cpus)))
    base = child_environment() if die_with_parent else os.environ
    return {**base, **dict.fromkeys(THREAD_VARIABLES, threads), "TF_CPP_MIN_LOG_LEVEL": "2"}


_live: set[subprocess.Popen] = set()  # this process's training runs, told to stop when the sweep is interrupted
_live_lock = threading.Lock()


def _run_process(command: list[str], log: pathlib.Path, environment: dict) -> int:
    with open(log, "a") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=environment)
        with _live_lock:
            _live.add(process)
        try:
            return process.wait()
        finally:
            with _live_lock:
                _live.discard(process)


def train_to_end(planned: PlannedRun, cpus: float, collect, on_ray: bool = False) -> dict:
    """Train (or resume) the run to its end unless it ended already; its outcome with `collect(run_dir, key)`'s
    figures. Runs in a worker thread here or as a Ray task on a cluster node (`on_ray`)."""
    run_dir = planned.run_dir
    check_folder(run_dir, planned.key)
    starts, stretches, code, began = [], [], 0, time.time()
    log = run_dir.parent / f"{run_dir.name}.log"
    if finished(run_dir) is None:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(1 + KILLED_RETRIES):
            command, start = train_command(run_dir, planned.arguments)
            starts.append(start)
            stretches.append(stretch(start))
            print(f"{planned.what}: {start}, log {log}\n", end="", flush=True)  # one write: runs start in threads
            code = _run_process(command, log, thread_environment(cpus, die_with_parent=on_ray))
            if code >= 0:  # an exit of its own (0, or a one-line error); negative: a signal killed it
                break
        check_folder(run_dir, planned.key)  # the run trained the recipe it is recorded as
    outcome = {"exit_code": code, "starts": starts, "stretches": stretches, "host": socket.gethostname(),
               "log": str(log),
               "worker_unix_span": [round(began, 3), round(time.time(), 3)]}  # when its worker began and ended
    if code != 0:
        return {**outcome, "last_line": _last_line(log)}
    return {**outcome, **code_of(run_dir), **collect(run_dir, planned.key)}


def stretch(start: str) -> dict:
    """One process's stretch of a run as it starts: how (`starts`' text), when, and the commit it imports and
    whether the tree had changes, read now rather than from this process's cached provenance: a sweep lasts
    hours, and a commit made meanwhile is what its later processes train."""
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return {"start": start, "began": now, **code_now()}


def _last_line(log: pathlib.Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "?"
    return lines[-1] if lines else "?"


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def estimate_line(to_train: int, at_once: int, recorded_seconds: list[float]) -> str:
    """What the sweep will cost, from the run clock of the runs of this recipe already recorded."""
    if to_train == 0:
        return "nothing to train: every run asked for is recorded or finished"
    line = f"{to_train} run{'s' * (to_train != 1)} to train, {at_once} at a time"
    if not recorded_seconds:
        return f"{line}; no recorded run of this recipe yet to estimate the cost from"
    each = statistics.median(recorded_seconds)
    waves = -(-to_train // at_once)
    return (f"{line}; the {len(recorded_seconds)} recorded run{'s' * (len(recorded_seconds) != 1)} of this recipe "
            f"took a median of {each / 60:.1f} min each: about {waves * each / 3600:.1f} h")


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the runs go: this machine's cores, or a Ray cluster (`ray_address`)."""
    cpus_per_run: float = 1.0
    gpus_per_run: float = 0.0
    ray_address: str | None = None

    def check(self) -> None:
        if not self.cpus_per_run > 0 or self.gpus_per_run < 0:
            raise UserError(f"--cpus-per-run {self.cpus_per_run:g} / --gpus-per-run {self.gpus_per_run:g}: allowed: "
                            f"CPUs > 0 and GPUs >= 0")
        if self.ray_address is None and self.gpus_per_run:
            raise UserError(f"--gpus-per-run {self.gpus_per_run:g} reserves GPUs on a Ray cluster; allowed: with "
                            f"--ray-address")
        if self.ray_address is not None:
            require("ray", "--ray-address")
        elif self.cpus_per_run > usable_cpus():
            raise UserError(f"--cpus-per-run {self.cpus_per_run:g} is more than this machine's {usable_cpus()} "
                            f"CPUs; allowed: 1 to {usable_cpus()}")


def run_all(planned: list[PlannedRun], placement: Placement, collect, on_finished, recorded_seconds) -> int:
    """Train every planned run, `on_finished(planned_run, outcome)` as each one ends (in this thread, so the
    record has one writer); 0, or the exit code of a run that failed (the others still run and are recorded)."""
    if not planned:
        print(estimate_line(0, 1, recorded_seconds), flush=True)
        return 0
    if placement.ray_address is not None:
        return _run_on_ray(planned, placement, collect, on_finished, recorded_seconds)
    at_once = max(1, int(usable_cpus() // placement.cpus_per_run))
    print(estimate_line(len(planned), min(at_once, len(planned)) or 1, recorded_seconds), flush=True)
    failed = 0
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=at_once)
    try:
        futures = {}
        for run in planned:
            futures[pool.submit(train_to_end, run, placement.cpus_per_run, collect)] = run
        for future in concurrent.futures.as_completed(futures):
            failed = _finish(futures[future], future.result(), on_finished) or failed
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_live_runs()
        raise
    finally:
        pool.shutdown(wait=True)
    return failed


def _stop_live_runs() -> None:
    """SIGINT to every training run still going (each checkpoints and exits), then wait for them."""
    with _live_lock:
        live = list(_live)
    for process in live:
        process.send_signal(signal.SIGINT)
    for process in live:
        process.wait()


def _finish(run: PlannedRun, outcome: dict, on_finished) -> int:
    """Report one run's end; record it where it finished; its exit code."""
    code = outcome["exit_code"]
    how = ", ".join(outcome["starts"]) or "read back"
    if code != 0:
        print(f"{run.what}: the run exited with {code} ({how}; log {outcome['log']}: {outcome['last_line']}); "
              f"run the same command again to resume it", file=sys.stderr, flush=True)
        return code
    on_finished(run, outcome)
    print(f"{run.what}: finished ({how}) on {outcome['host']}; recorded", flush=True)
    return 0


def _run_on_ray(planned, placement: Placement, collect, on_finished, recorded_seconds) -> int:
    """The same runs as Ray tasks, each reserving `cpus_per_run` CPUs (and `gpus_per_run` GPUs); a task whose
    worker died is retried by Ray and resumes from the run's checkpoint where the new node reaches its folder."""
    import ray

    from tfdqn.actors.ray_actors import join_cluster

    started = not ray.is_initialized()
    if started:
        join_cluster(ray, placement.ray_address, "--ray-address")
    try:
        for folder in sorted({run.run_dir.parent.resolve() for run in planned}):
            _check_every_node_sees(ray, folder)
        cluster_cpus = ray.cluster_resources().get("CPU", 1)
        at_once = max(1, int(cluster_cpus // placement.cpus_per_run))
        print(estimate_line(len(planned), min(at_once, len(planned)) or 1, recorded_seconds), flush=True)
        task = ray.remote(train_to_end).options(num_cpus=placement.cpus_per_run, num_gpus=placement.gpus_per_run,
                                                max_retries=KILLED_RETRIES)
        pending = {task.remote(dataclasses.replace(run, run_dir=run.run_dir.resolve()), placement.cpus_per_run,
                               collect, on_ray=True): run for run in planned}
        failed = 0
        while pending:
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            run = pending.pop(ready)
            try:
                outcome = ray.get(ready)
            except ray.exceptions.RayError as error:
                outcome = {"exit_code": 1, "starts": [], "stretches": [], "log": "-", "last_line": one_line(error)}
            failed = _finish(run, outcome, on_finished) or failed
        return failed
    finally:
        if started:
            ray.shutdown()



def _sees(path: str) -> bool:
    return os.path.exists(path)


def _check_every_node_sees(ray, folder: pathlib.Path) -> None:
    """A file written in `folder` here, looked for by a task pinned to each node with CPUs; a node that cannot see
    it stops the benchmark in one line (the module docstring says why)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".tfdqn-probe-{secrets.token_hex(8)}"
    probe.write_bytes(b"")
    try:
        nodes = [node for node in ray.nodes() if node["Alive"] and node["Resources"].get("CPU", 0) > 0]
        look = ray.remote(_sees)
        looks = {look.options(num_cpus=0,  # it runs beside a node's busy CPUs
                              scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
                 .remote(str(probe)): node for node in nodes}
        blind = [node for ref, node in looks.items() if not ray.get(ref)]
    finally:
        probe.unlink()
    if blind:
        names = ", ".join(f"{node['NodeManagerAddress']} (node {node['NodeID'][:12]})" for node in blind)
        raise UserError(f"--logdir {folder}: {len(blind)} of the cluster's {len(nodes)} nodes with CPUs cannot see "
                        f"it: {names}; allowed: a folder every node mounts at the same path (NFS, EFS, ...)")
