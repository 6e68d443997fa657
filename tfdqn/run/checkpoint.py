"""Complete, atomic checkpoints: TensorFlow state, the replay ring and the collector's state.

Files in `checkpoints/`, for a checkpoint at env step S:
  ckpt-S.index, ckpt-S.data-*   `Agent.checkpointables()`: nets, optimizer, the run's two counters, the
                                actor's RNG (TensorFlow)
  replay-S.json                 the ring's counters and sampling-RNG state, and which chunk file holds
                                each chunk of slots as of step S
  chunk-C-S.npz                 slots of chunk C written since the previous checkpoint (only those:
                                the cost of a save follows the new data, not the ring's size)
  sampler-S.npz                 with prioritized replay: every slot's priority (they change all over the
                                ring with each update, so they are saved whole, 8 bytes per slot)
  state-S.pkl                   the collector's state (run.collectors.CollectorState): envs mid-episode
                                where they pickle, newest frames, frame stack
  pending-S.npz                 with `replay.prefetch`: the next update's batches, drawn and assembled
                                before the save, which the resumed run trains on first
  audit-S.npz                   with `replay.audit`: its record of the transitions written (replay/audit.py)
  ckpt-S.complete               the marker, written last (with the versions that wrote the checkpoint):
                                a checkpoint without it does not exist
  best-B.index, best-B.data-*   with periodic evaluation: the online network at env step B, whose mean
                                evaluation return is the best so far (acting needs nothing else)
  best.json                     its record (env step, returns), written last, read again on resume
Every file is written to a temporary name, flushed to disk and renamed. Older checkpoints are deleted
only after a newer one is complete, so a crash or a full disk mid-save leaves the previous one usable.

Restore renames and deletes nothing. A checkpoint that names a class this install lacks (an upgrade
moved it) or whose TensorFlow objects differ from the program's stops the restore with a UserError; a
file the disk cannot read now (EIO, EMFILE, ...) is tried again a few times, then reported: falling
back would let the next save prune the newer checkpoint. Only a damaged or missing file makes restore
fall back to the checkpoint before it, and the damaged one stays on disk, outside the pruning.
"""

from __future__ import annotations

import errno
import io
import json
import os
import pathlib
import pickle
import re
import shutil
import sys
import time
import zipfile

import numpy as np
import tensorflow as tf

from tfdqn.agent.agent import Agent
from tfdqn.atomic import atomic_write, write_json
from tfdqn.errors import RunFailure, UserError, one_line
from tfdqn.run.markers import (BEST_FILE, complete_steps, installed_versions, marker_path, marker_record, read_best,
                                written_by)
from tfdqn.replay.ring import OPTIONAL_COUNTERS, ReplayRing

# What reading a damaged or missing checkpoint file raises, from TensorFlow's reader, NumPy, JSON or
# pickle. (An OSError with an errno other than ENOENT, or TensorFlow's equivalent, is the disk's doing:
# `_disk_failure` takes those first.)
DAMAGED = (tf.errors.OpError, ValueError, OSError, KeyError, IndexError, EOFError, zipfile.BadZipFile,
           pickle.UnpicklingError)
# Read errors that pass (a busy or flaky disk, a full table of open files): tried again, then reported.
TRANSIENT_ERRNOS = frozenset({errno.EIO, errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.EINTR, errno.ENOMEM,
                              errno.ETIMEDOUT, errno.EBUSY, errno.ENOBUFS, errno.ESTALE})
TF_TRANSIENT = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.ResourceExhaustedError,
                tf.errors.AbortedError)
RETRY_DELAYS = (0.2, 0.5, 1.0)  # seconds waited before each new try of a transient read error
_CHUNK_FILE = re.compile(r"chunk-\d+-(\d+)\.npz")


def write_failure(error: BaseException) -> str:
    """The first line of why a file could not be written (a full disk, a missing folder)."""
    reason = getattr(error, "strerror", None) or getattr(error, "message", None) or str(error)
    return reason.splitlines()[0]


def _npz_bytes(arrays: dict) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


class _Mismatch(Exception):
    """The checkpoint names what this install does not have (a class an upgrade moved or removed) or
    holds TensorFlow objects that differ from the program's: not damage, so nothing falls back."""

    def __init__(self, what: str, error: BaseException):
        super().__init__(what)
        self.what, self.detail = what, one_line(error)


class _StateUnpickler(pickle.Unpickler):
    """Reads a collector state, telling a class that cannot be found from damaged bytes."""

    def find_class(self, module: str, name: str):
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError) as error:
            raise _Mismatch(f"{module}.{name}", error) from error


def _load_state(path: pathlib.Path):
    with open(path, "rb") as f:
        try:
            return _StateUnpickler(f).load()
        except (ImportError, AttributeError) as error:  # raised while rebuilding an object it found
            raise _Mismatch(getattr(error, "name", None) or "a class whose attributes changed", error) from error


def _load_matched(load, prefix: str) -> None:
    """`load(prefix)` (a tf.train.Checkpoint's restore or read) with every object of the program matched."""
    try:
        load(prefix).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:  # objects missing from it, or of other shapes
        raise _Mismatch("TensorFlow objects that differ from this program's", error) from error


class Checkpointer:
    """Saves and restores everything a run needs to continue as if it had never stopped."""

    def __init__(self, directory: pathlib.Path, agent: Agent, replay: ReplayRing | None = None, keep: int = 2):
        self.directory = pathlib.Path(directory)
        self._replay = replay
        self._keep = keep
        self._chunk_files: dict[int, str] = {}  # chunk -> file holding its newest saved contents
        self._damaged: set[int] = set()  # complete checkpoints that failed to load: never pruned nor counted
        self.pending: dict | None = None  # the restored checkpoint's batches drawn ahead (`pending-S.npz`)
        self._tf = tf.train.Checkpoint(**agent.checkpointables())
        self._manager = tf.train.CheckpointManager(self._tf, str(self.directory), max_to_keep=None)

    def save(self, env_steps: int, loop_state, pending: dict | None = None) -> dict:
        """Write checkpoint `env_steps` (with `pending`, the arrays of batches drawn ahead); returns
        {"seconds", "bytes"} of the save."""
        started, written = time.perf_counter(), 0
        # Saving a step that was saved before (a resume that repeats steps): it stops counting first.
        marker_path(self.directory, env_steps).unlink(missing_ok=True)
        self._damaged.discard(env_steps)  # this run's own checkpoint at that step replaces the damaged one
        prefix = self._manager.save(checkpoint_number=env_steps)
        written += sum(p.stat().st_size for p in self.directory.glob(f"{pathlib.Path(prefix).name}.*"))
        dirty = self._replay.dirty_chunks() if self._replay is not None else []
        if self._replay is not None:
            for chunk in dirty:
                name = f"chunk-{chunk:05d}-{env_steps}.npz"
                written += atomic_write(self.directory / name, _npz_bytes(self._replay.chunk_arrays(chunk)))
                self._chunk_files[chunk] = name
            sampler_arrays = self._replay.sampler.arrays()
            if sampler_arrays:
                written += atomic_write(self.directory / f"sampler-{env_steps}.npz", _npz_bytes(sampler_arrays))
            if self._replay.audit is not None:
                written += atomic_write(self.directory / f"audit-{env_steps}.npz",
                                        _npz_bytes(self._replay.audit.arrays()))
            manifest = {"counters": self._replay.counters(), "chunks": self._chunk_files}
            written += atomic_write(self.directory / f"replay-{env_steps}.json", json.dumps(manifest).encode())
        written += atomic_write(self.directory / f"state-{env_steps}.pkl", pickle.dumps(loop_state))
        if pending is not None:
            written += atomic_write(self.directory / f"pending-{env_steps}.npz", _npz_bytes(pending))
        written += atomic_write(marker_path(self.directory, env_steps), marker_record(env_steps))
        if self._replay is not None:
            self._replay.mark_saved(dirty)
        self._prune()
        return {"seconds": time.perf_counter() - started, "bytes": written}

    def _prune(self) -> None:
        """Delete every file that no kept complete checkpoint needs (old ones, half-written ones,
        temporary files of an interrupted save). A checkpoint that failed to load is neither deleted nor
        counted among the kept, so the one the run resumed from stays until newer ones replace it.
        Markers go first, so an interrupted prune never leaves a marker whose files are gone; a file
        that will not go is left for the next save."""
        complete = [step for step in complete_steps(self.directory) if step not in self._damaged]
        kept = complete[: self._keep]
        for step in complete[self._keep:]:
            marker_path(self.directory, step).unlink(missing_ok=True)
        needed = {"checkpoint", BEST_FILE}
        best = read_best(self.directory)
        if best is not None:
            needed |= {p.name for p in self.directory.glob(f"best-{best['env_steps']}.*")}
        for step in (*kept, *self._damaged):
            needed |= self._files_of(step)
        for path in self.directory.iterdir():
            if path.name in needed:
                continue
            try:
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
            except OSError as error:
                print(f"warning: could not delete old checkpoint file {path}: {error.strerror}", file=sys.stderr)

    def _files_of(self, env_steps: int) -> set[str]:
        """Names of the files checkpoint `env_steps` reads, its chunks from older saves included; where
        its manifest does not read, every chunk file up to its step."""
        names = {p.name for p in self.directory.glob(f"ckpt-{env_steps}.*")}
        names |= {f"replay-{env_steps}.json", f"state-{env_steps}.pkl", f"sampler-{env_steps}.npz",
                  f"pending-{env_steps}.npz", f"audit-{env_steps}.npz"}
        try:
            manifest = json.loads((self.directory / f"replay-{env_steps}.json").read_text())
            return names | set(manifest["chunks"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            chunks = (_CHUNK_FILE.fullmatch(p.name) for p in self.directory.glob("chunk-*.npz"))
            return names | {m.group(0) for m in chunks if m and int(m.group(1)) <= env_steps}

    def restore_latest(self) -> tuple[int, object]:
        """Restore the newest complete checkpoint that loads; warn about each damaged one skipped, which
        stays on disk and out of the pruning.

        Returns (env_steps, loop_state); raises UserError when no complete checkpoint loads or one names
        what this install lacks, RunFailure when the disk keeps failing a read. (Acting needs only the
        online network: `restore_online`.)"""
        env_steps, loop_state, self._damaged = _newest_that_loads(self.directory, self._restore)
        return env_steps, loop_state

    def _restore(self, env_steps: int):
        """Small files are read before anything is changed; the ring is rewritten whole (chunks the
        checkpoint lists are loaded, the others zeroed), so a failed attempt leaves nothing stale."""
        loop_state = _load_state(self.directory / f"state-{env_steps}.pkl")
        pending_file = self.directory / f"pending-{env_steps}.npz"
        pending = None
        if pending_file.exists():
            with np.load(pending_file) as arrays:
                pending = dict(arrays)
        manifest = json.loads((self.directory / f"replay-{env_steps}.json").read_text()) if self._replay is not None else None
        _load_matched(self._tf.restore, str(self.directory / f"ckpt-{env_steps}"))
        if self._replay is not None:
            _check_replay_layout(self._replay, manifest)
            chunks = {int(c): name for c, name in manifest["chunks"].items()}
            for chunk in range(self._replay.num_chunks):
                if chunk not in chunks:
                    self._replay.clear_chunk(chunk)
                    continue
                with np.load(self.directory / chunks[chunk]) as arrays:
                    self._replay.load_chunk(chunk, arrays)
            self._replay.load_counters(manifest["counters"])
            if self._replay.sampler.prioritized:
                with np.load(self.directory / f"sampler-{env_steps}.npz") as arrays:
                    self._replay.sampler.load_arrays(arrays)
            if self._replay.audit is not None:
                with np.load(self.directory / f"audit-{env_steps}.npz") as arrays:
                    self._replay.audit.load_arrays(arrays)
            self._chunk_files = chunks
        self.pending = pending
        return loop_state


def _check_replay_layout(replay: ReplayRing, manifest: dict) -> None:
    """A manifest written by another replay layout lacks this ring's counters: a version skew, not damage."""
    missing = sorted(set(replay.counters()) - set(manifest["counters"]) - set(OPTIONAL_COUNTERS))
    if missing:
        raise _Mismatch("a replay layout without " + ", ".join(missing), KeyError(missing[0]))


def _disk_failure(error: BaseException) -> tuple[str, bool] | None:
    """(errno name, whether it may pass) when reading failed for the disk's reason, not the file's
    bytes (EIO, EMFILE, EACCES, ...); None for a damaged or missing file."""
    if isinstance(error, OSError):
        if error.errno is None or isinstance(error, FileNotFoundError):
            return None
        return errno.errorcode.get(error.errno, str(error.errno)), error.errno in TRANSIENT_ERRNOS
    if not isinstance(error, tf.errors.OpError):
        return None
    for code in (*TRANSIENT_ERRNOS, errno.EACCES, errno.EPERM):
        if os.strerror(code) in error.message:
            return errno.errorcode[code], code in TRANSIENT_ERRNOS
    if isinstance(error, (*TF_TRANSIENT, tf.errors.PermissionDeniedError)):
        return error.__class__.__name__, isinstance(error, TF_TRANSIENT)
    return None


def _versions_text(directory: pathlib.Path, env_steps: int) -> str:
    """The versions that wrote checkpoint `env_steps`, and those installed here that differ."""
    written = written_by(directory, env_steps)
    if written is None:
        return "the versions that wrote it (not recorded with it)"
    differ = [f"{name} {version}" for name, version in installed_versions().items() if written.get(name) != version]
    here = f"; installed here: {', '.join(differ)}" if differ else ""
    return f"the versions that wrote it ({', '.join(f'{n} {v}' for n, v in written.items())}){here}"


def _retrying(where: str, read):
    """`read()`, tried again after each transient disk error; a disk error that stays is reported in
    one line (RunFailure) that names `where`. Other errors propagate as raised."""
    for delay in (*RETRY_DELAYS, None):
        try:
            return read()
        except Exception as error:
            failure = _disk_failure(error)
            if failure is None:
                raise
            if delay is None or not failure[1]:
                tries = f" after {len(RETRY_DELAYS) + 1} tries" if failure[1] else ""
                name = getattr(error, "filename", None) or "its TensorFlow files"
                raise RunFailure(f"{where} could not be read: {name}: {failure[0]} ({write_failure(error)}){tries}; "
                                 f"nothing was renamed or deleted; run the command again once it reads") from None
            time.sleep(delay)


def _read_checkpoint(directory: pathlib.Path, env_steps: int, restore):
    """`restore(env_steps)` with transient disk errors tried again; a mismatch (UserError) or a disk error
    that stays (RunFailure) is reported in one line. Damage propagates as raised."""
    where = f"checkpoint at env step {env_steps} in {directory}"
    try:
        return _retrying(where, lambda: restore(env_steps))
    except _Mismatch as mismatch:
        raise UserError(f"{where} names {mismatch.what}, which this install cannot load ({mismatch.detail}); "
                        f"nothing was changed; allowed: {_versions_text(directory, env_steps)}") from None


def _newest_that_loads(directory: pathlib.Path, restore) -> tuple[int, object, set[int]]:
    """(env step, `restore(env step)`, env steps of the damaged checkpoints skipped on the way) of the
    newest complete checkpoint that loads; each damaged one is reported in one warning line and left
    as it is."""
    damaged = set()
    for env_steps in _retrying(f"checkpoint folder {directory}", lambda: complete_steps(directory)):
        try:
            return env_steps, _read_checkpoint(directory, env_steps, restore), damaged
        except DAMAGED as error:
            print(f"warning: checkpoint at env step {env_steps} in {directory} is damaged ({one_line(error)}); "
                  f"left as it is, falling back to the one before it", file=sys.stderr)
            damaged.add(env_steps)
    found = f" that loads (damaged, left as they are: env steps {sorted(damaged)})" if damaged else ""
    raise UserError(f"no complete checkpoint{found} in {directory}; allowed: a run folder written by tfdqn.train "
                    f"that saved at least one checkpoint")


def restore_online(directory: pathlib.Path, network, checkpoint: str | int = "latest") -> int:
    """Load only the online network, all that acting needs, from checkpoint "latest" (the newest complete
    one that loads), "best" or an env step of `directory`; returns its env step. The run folder is left
    as it is."""
    directory = pathlib.Path(directory)
    reader = tf.train.Checkpoint(online=network)

    def read(step: int, name: str = "ckpt") -> None:
        _load_matched(reader.read, str(directory / f"{name}-{step}"))

    if checkpoint == "latest":
        return _newest_that_loads(directory, read)[0]
    step = read_best(directory)["env_steps"] if checkpoint == "best" else int(checkpoint)
    try:
        _read_checkpoint(directory, step, lambda s: read(s, "best" if checkpoint == "best" else "ckpt"))
    except DAMAGED as error:
        raise UserError(f"checkpoint {checkpoint} (env step {step}) in {directory} cannot be read "
                        f"({error.__class__.__name__}); allowed: latest or another saved env step") from None
    return step


class BestCheckpoint:
    """Keeps the online network with the best mean periodic evaluation return so far.

    Only the network is written (a few MB for the Nature CNN, no replay), and only when the return
    improves; its files carry the env step and `best.json`, written last, names them, so a crash mid-save
    leaves the previous best. The record is read back on resume, so a resumed run keeps beating it."""

    def __init__(self, directory: pathlib.Path, network):
        self.directory = pathlib.Path(directory)
        self._writer = tf.train.Checkpoint(online=network)
        self.record = read_best(self.directory)

    def offer(self, env_steps: int, returns: list[float]) -> bool:
        """Keep the network if the mean of `returns` beats the best so far; returns whether it did."""
        mean = float(np.mean(returns))
        if self.record is not None and mean <= self.record["return_mean"]:
            return False
        if self.record is not None and self.record["env_steps"] == env_steps:  # a resumed run, better at a
            (self.directory / BEST_FILE).unlink()  # step it kept before: never name files being rewritten
            self.record = None
        record = {"env_steps": env_steps, "return_mean": mean, "returns": [float(r) for r in returns]}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._writer.write(str(self.directory / f"best-{env_steps}"))
            write_json(self.directory / BEST_FILE, record)
        except (OSError, tf.errors.OpError) as error:
            kept = (f"the previous best (env step {self.record['env_steps']}) is intact" if self.record
                    else "no best checkpoint is kept")
            raise RunFailure(f"best checkpoint at env step {env_steps} could not be written "
                             f"({write_failure(error)}); {kept}") from None
        for path in self.directory.glob("best-*"):  # the previous best's files
            if path.is_file() and not path.name.startswith(f"best-{env_steps}."):
                path.unlink(missing_ok=True)
        self.record = record
        return True
