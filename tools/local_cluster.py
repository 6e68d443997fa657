"""A Ray cluster of several nodes on this machine, for the multi-node tests and measurements.

A head and N worker nodes, each its own raylet and object store, all bound to 127.0.0.1, with Ray's token
authentication. Built with `ray.cluster_utils.Cluster`, the tool Ray's own multi-node tests use: it starts
each node's processes as `ray start` would and knows their pids, so a test can kill one node's raylet and
workers with SIGKILL; several `ray start` commands give the same processes but no handle on which process
is which node's. The head offers Ray no CPUs, so actors and benchmark runs go to the worker nodes while the
learner, a driver started on this machine, stays on the head.

    python -m tools.local_cluster --workers 2 --cpus-per-worker 2

prints one JSON line (the address, the token, each node's id and pids), then adds a worker node for each line
`add` on its stdin (printing the new node's line), and holds the cluster until SIGTERM, SIGINT or the end of
its stdin, then shuts every node down. `--join ADDRESS` instead starts one worker node of a running cluster, with
the token of its environment (`RAY_AUTH_TOKEN`), and says in one line why not where the cluster refuses it.
`hosted()` runs the cluster for a test or a benchmark.

A learner or a benchmark joins it with `--set actors.ray_address=<address>` (`--ray-address`) in the environment
`LocalCluster.joining_environment()` gives: the token, and `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, without which
Ray rewrites a driver's 127.0.0.1 to the machine's interface address, where nothing of this cluster listens (on
Linux that variable only keeps the loopback address; Cluster's nodes do not read it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import secrets
import select
import signal
import subprocess
import sys
import threading
import time

import psutil

OBJECT_STORE_BYTES = 100 * 2**20  # per node: chunks are small; Ray's default takes 30% of memory per node
# The head's checks of each raylet, as Ray's own multi-node tests shorten them: a killed node is known dead after
# 3 failed checks a second apart (Ray's defaults: 5 checks 3 s apart, 15 s that a test would only wait). A check
# fails on an answer refused at once, or on none within Ray's 10 s: a raylet alive on loaded cores is not lost.
HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
NODE = {"node_ip_address": "127.0.0.1", "object_store_memory": OBJECT_STORE_BYTES}
WAIT_SECONDS = 120  # for a node to register: the suite's other tests may hold both cores


def _node(node) -> dict:
    """A node's id and the pids of its processes (raylet first where it has one)."""
    processes = sorted(node.all_processes.items(), key=lambda item: item[0] != "raylet")
    return {"node_id": node.node_id, "pids": [info.process.pid for _, infos in processes for info in infos]}


def _add_worker(cluster, cpus: float) -> dict:
    """A new worker node, once it has registered; `Cluster.wait_for_nodes` would also wait for the nodes a test
    killed behind its back."""
    node = cluster.add_node(**NODE, num_cpus=cpus, wait=False)
    cluster._wait_for_node(node, timeout=WAIT_SECONDS)
    return _node(node)


def _host(workers: int, cpus_per_worker: float, token: str, stop: threading.Event) -> None:
    """Start the cluster, print it, serve `add` lines until `stop` or the end of stdin, shut it down. The token is
    set in this process's environment, which every node's processes inherit."""
    os.environ["RAY_AUTH_MODE"], os.environ["RAY_AUTH_TOKEN"] = "token", token
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, shutdown_at_exit=True,
                      head_node_args={**NODE, "num_cpus": 0, "include_dashboard": False,
                                      "_system_config": HEALTH_CHECKS})
    try:
        nodes = [_add_worker(cluster, cpus_per_worker) for _ in range(workers)]
        print(json.dumps({"address": cluster.address, "token": token, "head": _node(cluster.head_node),
                          "workers": nodes}), flush=True)

        def on_line(line: str) -> None:
            if line == "add":
                print(json.dumps(_add_worker(cluster, cpus_per_worker)), flush=True)

        _wait(stop, on_line)
    finally:
        cluster.shutdown()


def _join(address: str, cpus: float, stop: threading.Event) -> int:
    """One worker node of the cluster at `address`, with the token of this process's environment, until `stop` or
    the end of stdin; 2 and one line where the cluster refuses it."""
    from ray._private.node import Node
    from ray._private.parameter import RayParams

    try:
        node = Node(RayParams(gcs_address=address, **NODE, num_cpus=cpus), head=False, shutdown_at_exit=True,
                    spawn_reaper=True)
    except Exception as error:  # the cluster refused it (ray.exceptions.AuthenticationError) or is not there
        print(f"python -m tools.local_cluster: could not join {address}: {str(error).strip().splitlines()[-1]}",
              file=sys.stderr)
        return 2
    try:
        print(json.dumps(_node(node)), flush=True)
        _wait(stop, lambda line: None)
    finally:
        node.kill_all_processes(check_alive=False, allow_graceful=True)
    return 0


def _wait(stop: threading.Event, on_line) -> None:
    """Until `stop` or the end of stdin, each line of stdin to `on_line`."""
    while not stop.is_set():
        if select.select([sys.stdin], [], [], 0.5)[0]:
            line = sys.stdin.readline()
            if not line:  # whoever started this process is gone
                return
            on_line(line.strip())


class LocalCluster:
    """A running cluster as `hosted()` hands it over: its address and token, its nodes, and a way to add one."""

    def __init__(self, host: subprocess.Popen, description: dict, log: pathlib.Path):
        self._host, self._log = host, log
        self.address, self.token = description["address"], description["token"]
        self.head, self.workers = description["head"], description["workers"]

    def joining_environment(self) -> dict:
        """What a learner or benchmark that joins needs in its environment (the module docstring)."""
        return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token,
                "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}

    def add_worker(self) -> dict:
        """A new worker node (its description, also appended to `workers`)."""
        self._host.stdin.write("add\n")
        self._host.stdin.flush()
        line = self._host.stdout.readline()
        if not line:
            raise RuntimeError(f"the local cluster's host ended: {self._log.read_text()[-2000:]}")
        node = json.loads(line)
        self.workers.append(node)
        return node

    def kill(self, node: dict) -> None:
        """SIGKILL a node's processes (its raylet first) and the workers they started: the node is lost, and no
        longer among `workers`. Returns once each has ended: the node's own stay zombies until the cluster's host,
        their parent, shuts down, as dead as a lost machine's."""
        processes = [psutil.Process(pid) for pid in node["pids"] if psutil.pid_exists(pid)]
        processes += [child for process in processes for child in process.children(recursive=True)]
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        deadline = time.monotonic() + 30
        while not all(map(_ended, processes)) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.workers.remove(node)


def _ended(process: psutil.Process) -> bool:
    """Gone, or a zombie its parent has not reaped: either way it runs nothing."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@contextlib.contextmanager
def hosted(log: pathlib.Path, workers: int = 2, cpus_per_worker: float = 2):
    """This module's cluster in a process of its own, as a `LocalCluster` while it runs; when it ends, every
    process it started is gone (checked)."""
    command = [sys.executable, "-m", "tools.local_cluster", "--workers", str(workers), "--cpus-per-worker",
               str(cpus_per_worker)]
    with open(log, "w") as err:
        host = subprocess.Popen(command, cwd=pathlib.Path(__file__).resolve().parent.parent, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, text=True)
    line = host.stdout.readline()
    try:
        if not line:
            host.wait(timeout=60)
            raise RuntimeError(f"the local cluster did not start: {log.read_text()[-2000:]}")
        yield LocalCluster(host, json.loads(line), log)
    finally:
        processes = psutil.Process(host.pid).children(recursive=True) if host.poll() is None else []
        host.terminate()
        host.wait(timeout=120)
        _, alive = psutil.wait_procs(processes, timeout=30)
        left = [process.pid for process in alive if not _ended(process)]
        if left:
            raise RuntimeError(f"the local cluster left processes behind: {left}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.local_cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="worker nodes (default 2)")
    parser.add_argument("--cpus-per-worker", type=float, default=2, help="CPUs each worker node offers (default 2)")
    parser.add_argument("--token", default=None, help="the cluster's token (default: a new random one)")
    parser.add_argument("--join", metavar="ADDRESS", help="start one worker node of the cluster at ADDRESS instead")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if args.join:
        return _join(args.join, args.cpus_per_worker, stop)
    _host(args.workers, args.cpus_per_worker, args.token or secrets.token_hex(32), stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
