"""The one way tfdqn writes a file: under a temporary name, synced, then renamed over the real one,
and the folder synced so the rename itself survives a power loss.

A reader (or a resumed run) therefore sees the old file or the new one, never half of either, and an
error or a full disk mid-write leaves the old file and no temporary one behind."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pathlib
import threading


@contextlib.contextmanager
def atomic_path(path: pathlib.Path, suffix: str = ".tmp"):
    """Yield a temporary path beside `path` for a writer that needs a file name (a video encoder);
    on success it is synced and renamed to `path`, on any error deleted. The name is the writer's own
    (process and thread), so writers racing for one file (tuning workers ending a study together) each
    rename a whole file and the last one wins."""
    path = pathlib.Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}{suffix}")
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sync_directory(path.parent)


def sync_directory(directory: pathlib.Path) -> None:
    """fsync a folder, making the renames and deletions in it durable (Linux syncs a folder opened
    read-only; a filesystem that cannot sync folders answers EINVAL, and has nothing more to do)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def atomic_write(path: pathlib.Path, data: bytes | str) -> int:
    """Write `data` (text is UTF-8 encoded) atomically to `path`; returns the bytes written."""
    data = data.encode() if isinstance(data, str) else data
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return len(data)


def write_json(path: pathlib.Path, data) -> int:
    """Indented JSON with a final newline, written atomically."""
    return atomic_write(path, json.dumps(data, indent=2) + "\n")
