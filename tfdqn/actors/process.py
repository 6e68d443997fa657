"""Actor processes on this machine, one duplex pipe each (`actors.kind: process`).

Processes start with multiprocessing's `spawn`: a fresh interpreter, so no TensorFlow state is forked.
A request carries new weights (or None), the update count they were read at and the env step the
chunk's epsilon clock starts from; the reply is one chunk. The
learner asks for an actor's next chunk as soon as it takes one, so the actor steps while the learner
adds and updates; an actor whose chunk the learner has not taken yet waits for its next request, so
no more than one finished chunk per actor is ever waiting. One request at a time also means a
large weights message always finds the actor reading, so neither side can block the other on a full pipe.

Endings: the learner stops its actors, whatever signal reached them. An actor ignores SIGINT and
SIGTERM, which reach the whole process group (Ctrl-C, systemd's KillMode, Slurm's scancel) while the
learner decides: it checkpoints, then `close()` closes every pipe, which stops each actor at its next
read or write, gives them all one deadline together and kills what is left. An actor exits by itself
when the learner is gone, even killed by SIGKILL: a closed pipe on its next read or write, or, checked
every `PARENT_POLL_SECONDS` by a thread of its own (an env step may take any time), a new parent process id.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time

from tfdqn.actors.transport import ActorDied, ActorError, describe_exit
from tfdqn.errors import one_line

STOP_SECONDS = 5.0  # actors whose pipes closed get this long, all together, to exit before they are killed
PARENT_POLL_SECONDS = 0.5  # how often an actor looks whether the learner is still its parent


def _exit_when_orphaned(parent: int) -> None:
    """End this process once `parent` (the learner) is gone: nothing else would stop a stuck env step."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(0)


def actor_main(conn, config, index: int, seed: int, parent: int) -> None:
    """An actor process: answer each request with a chunk until the learner closes the pipe or is gone."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    threading.Thread(target=_exit_when_orphaned, args=(parent,), name="tfdqn-orphan-check", daemon=True).start()
    try:
        from tfdqn.actors.worker import ActorWorker

        worker = ActorWorker(config, index, seed)
    except Exception as error:  # a bad env or network: the learner reports it in one line
        conn.send(("error", one_line(error)))
        return
    try:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return  # the learner closed the pipe or is gone
            try:
                chunk = worker.collect(*request)
            except Exception as error:
                conn.send(("error", one_line(error)))
                return
            try:
                conn.send(("chunk", chunk))
            except OSError:  # BrokenPipeError: the learner is gone
                return
    finally:
        worker.close()


class ProcessActors:
    """Starts, asks, waits on and stops actor processes; `RemoteCollector` decides what to ask."""

    in_flight = 1  # requests per actor at a time (the module docstring says why)

    def __init__(self, config):
        self._config = config
        self._context = multiprocessing.get_context("spawn")
        self._processes: dict[int, multiprocessing.Process] = {}
        self._pipes: dict[int, multiprocessing.connection.Connection] = {}

    def start(self, index: int, seed: int) -> None:
        mine, theirs = self._context.Pipe(duplex=True)
        process = self._context.Process(target=actor_main, args=(theirs, self._config, index, seed, os.getpid()),
                                        name=f"tfdqn-actor-{index}", daemon=True)
        process.start()
        theirs.close()  # only the actor holds its end: the learner's death closes the pipe for it
        self._processes[index], self._pipes[index] = process, mine

    def whereabouts(self, index: int) -> dict:
        """The actor's process id (on this machine, so no node)."""
        return {"pid": self._processes[index].pid}

    def publish(self, weights: list) -> list:
        """What a request carries to hand the actors new weights: here the arrays themselves."""
        return weights

    def request(self, index: int, weights, weights_updates: int, env_steps: int) -> None:
        try:
            self._pipes[index].send((weights, weights_updates, env_steps))
        except OSError:  # the actor died: `wait` reports it through its pipe's end of file
            pass

    def wait(self, timeout: float | None = None) -> list[tuple[int, object]]:
        """Until some actor answers or dies (at most `timeout` s): (index, Chunk, ActorError or ActorDied)."""
        by_pipe = {pipe: index for index, pipe in self._pipes.items()}
        results = []
        for pipe in multiprocessing.connection.wait(list(by_pipe), timeout=timeout):
            index = by_pipe[pipe]
            try:
                kind, payload = pipe.recv()
            except (EOFError, OSError):
                results.append((index, ActorDied(self._exit(index))))
                continue
            results.append((index, payload if kind == "chunk" else ActorError(payload)))
        return results

    def _exit(self, index: int) -> str:
        process = self._processes[index]
        process.join(timeout=STOP_SECONDS)
        return describe_exit(process.exitcode)

    def stop(self, index: int) -> None:
        """Stop one actor (it failed): close its pipe and reap its process."""
        self._pipes.pop(index).close()
        _reap([self._processes.pop(index)], STOP_SECONDS)

    def close(self, seconds: float = STOP_SECONDS) -> None:
        """Stop every actor: all pipes closed first, then one deadline of `seconds` for all of them
        together, then SIGKILL for what is left (they ignore SIGTERM): no process outlives the run."""
        for pipe in self._pipes.values():
            pipe.close()
        _reap(list(self._processes.values()), seconds)
        self._pipes.clear()
        self._processes.clear()


def _reap(processes: list, seconds: float) -> None:
    """Wait until `seconds` from now for `processes` to exit, then kill the rest and wait for them."""
    deadline = time.monotonic() + seconds
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join()
