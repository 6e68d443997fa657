"""Ray actors (`actors.kind: ray`): the same `ActorWorker` as actor processes, on this machine or a cluster.

Only Ray core is used: `ray.remote` actors, one `ray.put` per weight sync (every actor reads that one
object), and `ray.wait` on the outstanding chunk requests. Ray queues an actor's method calls, so each
actor has two requests out: it starts its next chunk while the learner takes the last one, and no more
than two finished chunks per actor wait in the object store. `actors.ray_address` joins a running
cluster (`auto`: the one this machine joined with `ray start`); empty starts Ray here, with a small
object store, and shuts it down again at the end. Needs the `ray` extra (`pip install tfdqn[ray]`).
"""

from __future__ import annotations

import logging
import os

from tfdqn.actors.transport import ActorDied, ActorError, one_line
from tfdqn.errors import UserError

LOCAL_OBJECT_STORE_BYTES = 256 * 2**20  # chunks are small and short-lived; Ray's default takes 30% of memory


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("actors.kind = 'ray' needs Ray, which is not installed; allowed: pip install "
                        "'tfdqn[ray]', or actors.kind = process") from None
    return ray


class RayActors:
    """Starts, asks, waits on and stops Ray actors; `RemoteCollector` decides what to ask."""

    in_flight = 2

    def __init__(self, config):
        self._ray = ray = _import_ray()
        actors = config.actors
        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            if actors.ray_address:
                ray.init(address=actors.ray_address, logging_level=logging.ERROR, log_to_driver=False)
            else:  # the local scheduler must fit every actor's reservation, whatever the core count
                cpus = max(os.cpu_count() or 1, int(-(-actors.count * actors.cpus_per_actor // 1)))
                ray.init(num_cpus=cpus, object_store_memory=LOCAL_OBJECT_STORE_BYTES, include_dashboard=False,
                         logging_level=logging.ERROR, log_to_driver=False)
        from tfdqn.actors.worker import ActorWorker

        self._config = config
        self._class = ray.remote(ActorWorker).options(num_cpus=actors.cpus_per_actor, max_restarts=0)
        self._handles: dict = {}
        self._pids: dict[int, int] = {}
        self._pending: dict = {}  # ObjectRef -> actor index

    def start(self, index: int, seed: int) -> None:
        handle = self._class.remote(self._config, index, seed)
        self._handles[index] = handle
        self._pids[index] = handle.pid.remote()  # an ObjectRef until `pid` reads it

    def pid(self, index: int) -> int | None:
        """The actor's process id, or None where its process never answered."""
        pid = self._pids.get(index)
        if pid is not None and not isinstance(pid, int):
            try:
                pid = self._pids[index] = self._ray.get(pid, timeout=10)
            except self._ray.exceptions.RayError:
                return None
        return pid

    def publish(self, weights: list):
        """One object in Ray's store that every actor's next request reads."""
        return self._ray.put(weights)

    def request(self, index: int, weights, env_steps: int) -> None:
        self._pending[self._handles[index].collect.remote(weights, env_steps)] = index

    def wait(self) -> list[tuple[int, object]]:
        """Block until some request finishes; (index, Chunk, ActorError or ActorDied) for each."""
        ray = self._ray
        ready, _ = ray.wait(list(self._pending), num_returns=1)
        results = []
        for ref in ready:
            index = self._pending.pop(ref)
            try:
                results.append((index, ray.get(ref)))
            except ray.exceptions.ActorDiedError as error:
                cause = getattr(error, "cause", None)
                if isinstance(cause, ray.exceptions.RayTaskError):  # its __init__ raised
                    results.append((index, ActorError(one_line(cause.cause))))
                else:
                    results.append((index, ActorDied("died (its process ended)")))
            except ray.exceptions.RayActorError:
                results.append((index, ActorDied("became unreachable")))
            except ray.exceptions.RayTaskError as error:
                results.append((index, ActorError(one_line(error.cause))))
        return results

    def stop(self, index: int) -> None:
        """Stop one actor (it failed) and forget its outstanding requests."""
        self._ray.kill(self._handles.pop(index))
        self._pids.pop(index, None)
        self._pending = {ref: i for ref, i in self._pending.items() if i != index}

    def close(self) -> None:
        for index in list(self._handles):
            self.stop(index)
        if self._started_ray:
            self._ray.shutdown()
