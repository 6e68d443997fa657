"""Actor processes on this machine, one duplex pipe each (`actors.kind: process`).

Processes start with multiprocessing's `spawn`: a fresh interpreter, so no TensorFlow state is forked.
A request carries new weights (or None) and the run's env step count; the reply is one chunk. The
learner asks for an actor's next chunk as soon as it takes one, so the actor steps while the learner
adds and updates; an actor whose chunk the learner has not taken yet waits for its next request, so
no more than one finished chunk per actor is ever waiting. One request at a time also means a
large weights message always finds the actor reading, so neither side can block the other on a full pipe.

Endings: the learner's `close()` closes its ends of the pipes, which stops every actor at its next read
or write, then terminates what is left. An actor ignores
SIGINT (Ctrl-C reaches the whole process group; the learner decides) and exits by itself when the learner
is gone: a closed pipe on its next read or write, or a new parent process id.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal

from tfdqn.actors.transport import ActorDied, ActorError, describe_exit
from tfdqn.errors import one_line

STOP_SECONDS = 5.0  # an actor whose pipe closed gets this long to exit before it is terminated


def actor_main(conn, config, index: int, seed: int, parent: int) -> None:
    """An actor process: answer each request with a chunk until the learner closes the pipe or is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        from tfdqn.actors.worker import ActorWorker

        worker = ActorWorker(config, index, seed)
    except Exception as error:  # a bad env or network: the learner reports it in one line
        conn.send(("error", one_line(error)))
        return
    try:
        while os.getppid() == parent:
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

    def pid(self, index: int) -> int:
        return self._processes[index].pid

    def publish(self, weights: list) -> list:
        """What a request carries to hand the actors new weights: here the arrays themselves."""
        return weights

    def request(self, index: int, weights, env_steps: int) -> None:
        try:
            self._pipes[index].send((weights, env_steps))
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
        _reap(self._processes.pop(index))

    def close(self) -> None:
        """Stop every actor, all pipes closed first so that they exit together: no process outlives the run."""
        for pipe in self._pipes.values():
            pipe.close()
        for process in self._processes.values():
            _reap(process)
        self._pipes.clear()
        self._processes.clear()


def _reap(process) -> None:
    """Give an actor whose pipe closed `STOP_SECONDS` to exit, then terminate it, then kill it."""
    process.join(timeout=STOP_SECONDS)
    for end in (process.terminate, process.kill):
        if process.is_alive():
            end()
            process.join(timeout=STOP_SECONDS)
