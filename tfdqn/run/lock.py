"""One writer per run folder: `writer.lock`, flock-ed by the process that writes the folder, holds its PID.

Two processes writing one folder would interleave checkpoints and summaries, so a second writer is
refused with the holder's PID. The kernel drops an flock when its process dies, even by kill -9, so
a lock left behind is free: the next writer takes it over and says whose it was. A clean end deletes
the file. No TensorFlow here: the command line checks a folder before starting it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import sys
import time

from tfdqn.errors import UserError

LOCK_NAME = "writer.lock"


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def _in_use(run_dir: pathlib.Path, pid: int | None) -> UserError:
    who = f"process {pid}" if pid else "another process"
    return UserError(f"run folder {run_dir} is being written by {who}; allowed: a folder no running process "
                     f"writes (another --run-name, or --resume once {who} has ended)")


def refuse_if_held(run_dir: pathlib.Path) -> None:
    """A one-line UserError naming the PID of the live process that writes `run_dir`, if one does.
    Creates and changes nothing (the command line checks before starting TensorFlow)."""
    try:
        fd = os.open(pathlib.Path(run_dir) / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _in_use(pathlib.Path(run_dir), _read_pid(fd)) from None
    finally:
        os.close(fd)  # also drops the shared lock where it was taken


class RunLock:
    """Held from `acquire` to `release` (or through a `with` block) by the one process that writes `run_dir`."""

    # A refuse_if_held check holds a shared lock for microseconds: an exclusive try that meets one retries.
    ATTEMPTS, PAUSE = 20, 0.01

    def __init__(self, run_dir: pathlib.Path):
        self.path = pathlib.Path(run_dir) / LOCK_NAME
        self._fd = None

    def acquire(self) -> "RunLock":
        for attempt in range(self.ATTEMPTS):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = _read_pid(fd)
                os.close(fd)
                if attempt + 1 == self.ATTEMPTS:
                    raise _in_use(self.path.parent, pid) from None
                time.sleep(self.PAUSE)
                continue
            if _same_file(fd, self.path):  # not a file that its holder deleted between our open and flock
                break
            os.close(fd)
        else:
            raise _in_use(self.path.parent, None)
        previous = _read_pid(fd)
        if previous is not None and previous != os.getpid():
            print(f"warning: run folder {self.path.parent} was locked by process {previous}, which is no longer "
                  f"running; lock taken over", file=sys.stderr, flush=True)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Delete the lock file, then drop the lock (a writer that opened the old file sees it is gone)."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _same_file(fd: int, path: pathlib.Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False
