"""Ray actors (`actors.kind: ray`): the same `ActorWorker` as actor processes, on this machine or a cluster.

Only Ray core is used: `ray.remote` actors, one `ray.put` per weight sync (every actor reads that one
object), and `ray.wait` on the outstanding chunk requests. Each actor has one request out, as actor
processes do: it is asked for its next chunk when the learner takes its last one, so a chunk acts on
weights and an epsilon clock at most one round of chunks old when the learner takes it (two requests
out would double that lag). `actors.ray_address` joins a running cluster (`auto`: the one this machine
joined with `ray start`, else any Ray running on it: Ray's own rule) and never starts one; an address where
nothing answers is one line at once (`ray.init` would wait minutes on it). Empty starts a Ray of the run's own
here, with a small object store and without the task events and metrics that only Ray's dashboard reads (they
cost CPU on every call), and shuts it down again at the end. That Ray listens on 127.0.0.1 alone: Ray turns a
node address of 127.0.0.1 into the machine's interface address unless `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER` is 0
when it is imported (on Linux that variable only keeps the loopback address), so it is 0 for that import
(where the process imported Ray before, Ray's rule stands). It never joins a cluster already running on the
machine, whatever `RAY_ADDRESS` or the address file an earlier cluster left in Ray's temp folder says
(`ray.init` would connect to those). Actors are spread over the cluster's nodes (Ray's SPREAD strategy), each
where its CPUs are free; `summary.json` lists the node each actor ran on. An actor started again after its
death prefers any node but the one it died on (Ray's label selector on `ray.io/node-id`, that node its
fallback): Ray goes on listing a killed node as alive until its health checks fail (by default 5 misses 3 s
apart), and an actor placed there meanwhile dies with it. Needs the `ray` extra (`pip install tfdqn[ray]`).

The Ray processes a learner starts share its process group, so a SIGTERM to the group (a terminal's job
control, `timeout`, a batch scheduler's cancel) would reach them too, and a raylet that dies first takes the
learner with it (exit 1, before its checkpoint). They are started with SIGTERM blocked, as Ray blocks SIGINT
for them: the learner alone takes the signal, checkpoints, stops its actors and shuts Ray down (which then
kills them, a few seconds slower than a SIGTERM would); they still die with the learner if it is killed
(Ray's parent-death fate sharing).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import socket
import time

from tfdqn.actors.transport import ActorDied, ActorError
from tfdqn.errors import UserError, one_line
from tfdqn.extras import require

LOCAL_OBJECT_STORE_BYTES = 256 * 2**20  # chunks are small and short-lived; Ray's default takes 30% of memory
NODE_ID_LABEL = "ray.io/node-id"  # the label Ray gives every node: its id
CONNECT_SECONDS = 10  # to reach a cluster's address before Ray is asked to join it
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # 0 while Ray is imported keeps 127.0.0.1 (the docstring)
LOCAL_SYSTEM_CONFIG = {"task_events_report_interval_ms": 0, "enable_metrics_collection": False, "event_stats": False}


def import_ray(own: bool):
    """Ray; `own`: for a Ray of this process's own, kept on 127.0.0.1 where this is its first import (the module
    docstring)."""
    require("ray", "actors.kind = ray", instead="actors.kind = process")
    previous = os.environ.get(LOOPBACK_ONLY)
    if own:
        os.environ[LOOPBACK_ONLY] = "0"
    try:
        import ray
    finally:
        if previous is None:
            os.environ.pop(LOOPBACK_ONLY, None)
        else:
            os.environ[LOOPBACK_ONLY] = previous
    return ray


def check_answers(address: str, named: str) -> None:
    """One line at once where nothing listens at a host:port address (`auto` is Ray's to find); `tfdqn train` asks
    before it starts TensorFlow, and `join_cluster` again as it joins."""
    if address == "auto":
        return
    host, _, port = address.rpartition("://")[2].rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS).close()
    except (OSError, ValueError) as error:
        raise _no_cluster(address, named, "not host:port" if isinstance(error, ValueError) else one_line(error)) \
            from None


def _no_cluster(address: str, named: str, reason: str) -> UserError:
    return UserError(f"{named} {address!r}: no Ray cluster answers there ({reason}); allowed: the address "
                     f"`ray start --head` printed, or auto")


def join_cluster(ray, address: str, named: str) -> None:
    """Join the running cluster at `address`, never starting one; where none answers, one line naming `named`, the
    option that gave the address."""
    check_answers(address, named)
    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise _no_cluster(address, named, one_line(error)) from None


def start_local_ray(ray, num_cpus: int) -> None:
    """A Ray of this process's own, on 127.0.0.1 where `import_ray(own=True)` imported it, that joins no running
    cluster (the module docstring)."""
    with _sigterm_blocked():  # the module docstring says why
        ray.init(address="local", num_cpus=num_cpus,
                 object_store_memory=LOCAL_OBJECT_STORE_BYTES, include_dashboard=False, logging_level=logging.ERROR,
                 log_to_driver=False, _system_config=LOCAL_SYSTEM_CONFIG)


@contextlib.contextmanager
def _sigterm_blocked():
    """SIGTERM blocked in this thread, so the processes it starts inherit the block (a signal mask survives fork
    and exec); a SIGTERM meant for this process meanwhile waits and is taken when the block lifts."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class RayActors:
    """Starts, asks, waits on and stops Ray actors; `RemoteCollector` decides what to ask."""

    in_flight = 1  # requests per actor at a time (the module docstring says why)

    def __init__(self, config):
        actors = config.actors
        self._ray = ray = import_ray(own=not actors.ray_address)
        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            if actors.ray_address:
                join_cluster(ray, actors.ray_address, "actors.ray_address")
            else:  # the local scheduler must fit every actor's reservation, whatever the core count
                start_local_ray(ray, max(os.cpu_count() or 1, int(-(-actors.count * actors.cpus_per_actor // 1))))
        from tfdqn.actors.ray_worker import RayActorWorker

        self._config = config
        self._class = ray.remote(RayActorWorker)
        self._options = {"num_cpus": actors.cpus_per_actor, "max_restarts": 0, "scheduling_strategy": "SPREAD"}
        self._cpus, self._placement_timeout = actors.cpus_per_actor, actors.ray_placement_timeout
        self._handles: dict = {}
        self._died_on: dict[int, str] = {}  # actor index -> the node its last stopped life ran on
        self._whereabouts: dict = {}  # actor index -> {"pid", "node"}, or an ObjectRef until read
        self._started_at: dict[int, float] = {}  # actor index -> when it was started (time.monotonic)
        self._pending: dict[int, collections.deque] = {}  # actor index -> its requests' ObjectRefs, oldest first

    def start(self, index: int, seed: int) -> None:
        node = self._died_on.get(index)
        elsewhere = {} if node is None else {"label_selector": {NODE_ID_LABEL: f"!{node}"},
                                             "fallback_strategy": [{"label_selector": {NODE_ID_LABEL: node}}]}
        handle = self._class.options(**self._options, **elsewhere).remote(self._config, index, seed)
        self._handles[index] = handle
        self._whereabouts[index] = handle.whereabouts.remote()
        self._started_at[index] = time.monotonic()

    def whereabouts(self, index: int) -> dict:
        """The actor's process id and Ray node id; {} where its process never answered."""
        where = self._whereabouts.get(index, {})
        if not isinstance(where, dict):
            try:
                where = self._whereabouts[index] = self._ray.get(where, timeout=10)
            except self._ray.exceptions.RayError:
                return {}
        return where

    def publish(self, weights: list):
        """One object in Ray's store that every actor's next request reads."""
        return self._ray.put(weights)

    def request(self, index: int, weights, weights_updates: int, env_steps: int) -> None:
        self._pending.setdefault(index, collections.deque()).append(
            self._handles[index].collect.remote(weights, weights_updates, env_steps))

    def wait(self, timeout: float | None = None) -> list[tuple[int, object]]:
        """Until some actor's oldest request finishes (at most `timeout` s): (index, Chunk, ActorError or ActorDied)."""
        ray = self._ray
        oldest = {queue[0]: index for index, queue in self._pending.items() if queue}
        ready, _ = ray.wait(list(oldest), num_returns=1, timeout=timeout)
        results = self._unplaced()
        for ref in ready:
            index = oldest[ref]
            self._pending[index].popleft()
            results.append((index, self._result(ref)))
            self.whereabouts(index)  # read while the actor answers: a dead actor can no longer be asked
        return results

    def _unplaced(self) -> list[tuple[int, ActorError]]:
        """Actors Ray has not placed `actors.ray_placement_timeout` s after their start: no node had their CPUs free
        (the nodes that had them are gone), or their process did not come up."""
        now = time.monotonic()
        late = {self._whereabouts[index]: index for index, started in self._started_at.items()
                if not isinstance(self._whereabouts.get(index, {}), dict) and now - started > self._placement_timeout}
        if not late:
            return []
        running, _ = self._ray.wait(list(late), num_returns=len(late), timeout=0)
        for ref in running:
            self.whereabouts(late[ref])
        return [(index, ActorError(f"not running {self._placement_timeout:g} s after its start "
                                   f"(actors.ray_placement_timeout): no node of the cluster has "
                                   f"actors.cpus_per_actor = {self._cpus:g} CPUs free for it"))
                for ref, index in late.items() if ref not in running]

    def _result(self, ref):
        """The chunk, or what became of the actor: an error in its own code, or its death."""
        errors = self._ray.exceptions
        try:
            return self._ray.get(ref)
        except errors.RayActorError as error:
            return ActorDied("died (its process ended)" if isinstance(error, errors.ActorDiedError)
                             else "became unreachable")
        except errors.RayTaskError as error:
            return ActorError(one_line(error.cause))
        except errors.RayError as error:  # the object store lost or could not hold the chunk
            return ActorError(one_line(error))

    def stop(self, index: int) -> None:
        """Stop one actor (it failed) and forget its outstanding requests; its next start prefers another node."""
        where = self._whereabouts.get(index)  # as read while it answered: never waits on a dead actor
        if isinstance(where, dict) and "node" in where:
            self._died_on[index] = where["node"]
        self._ray.kill(self._handles.pop(index))
        self._whereabouts.pop(index, None)
        self._started_at.pop(index, None)
        self._pending.pop(index, None)

    def close(self) -> None:
        for index in list(self._handles):
            self.stop(index)
        if self._started_ray:
            self._ray.shutdown()
