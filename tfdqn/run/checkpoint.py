"""Complete, atomic checkpoints: TensorFlow state, the replay ring and the collector's state.

Files in `checkpoints/`, for a checkpoint at env step S:
  ckpt-S.index, ckpt-S.data-*   `Agent.checkpointables()`: nets, optimizer, the run's two counters, the
                                actor's RNG (TensorFlow)
  replay-S.json                 the ring's counters and sampling-RNG state, and which chunk file holds
                                each chunk of slots as of step S
  chunk-C-S.npz                 slots of chunk C written since the previous checkpoint (only those:
                                the cost of a save follows the new data, not the ring's size)
  state-S.pkl                   the collector's state (run.collectors.CollectorState): envs mid-episode
                                where they pickle, newest frames, frame stack
  ckpt-S.complete               the marker, written last: a checkpoint without it does not exist
  best-B.index, best-B.data-*   with periodic evaluation: the online network at env step B, whose mean
                                evaluation return is the best so far (acting needs nothing else)
  best.json                     its record (env step, returns), written last, read again on resume
Every file is written to a temporary name, flushed to disk and renamed. Older checkpoints are deleted
only after a newer one is complete, so a crash or a full disk mid-save leaves the previous one usable.
"""

from __future__ import annotations

import io
import json
import pathlib
import pickle
import shutil
import sys
import time
import zipfile

import numpy as np
import tensorflow as tf

from tfdqn.agent.agent import Agent
from tfdqn.atomic import atomic_write, write_json
from tfdqn.errors import RunFailure, UserError
from tfdqn.run.markers import complete_steps, marker_path
from tfdqn.replay.ring import ReplayRing
from tfdqn.sources import BEST_FILE, read_best

# What a checkpoint that cannot be read raises, from TensorFlow's reader, NumPy, pickle or a missing file.
BROKEN = (tf.errors.OpError, ValueError, OSError, KeyError, IndexError, EOFError, AssertionError,
          AttributeError, ImportError, zipfile.BadZipFile, pickle.UnpicklingError)


def write_failure(error: BaseException) -> str:
    """The first line of why a file could not be written (a full disk, a missing folder)."""
    reason = getattr(error, "strerror", None) or getattr(error, "message", None) or str(error)
    return reason.splitlines()[0]


def _npz_bytes(arrays: dict) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


class Checkpointer:
    """Saves and restores everything a run needs to continue as if it had never stopped."""

    def __init__(self, directory: pathlib.Path, agent: Agent, replay: ReplayRing | None = None, keep: int = 2):
        self.directory = pathlib.Path(directory)
        self._replay = replay
        self._keep = keep
        self._chunk_files: dict[int, str] = {}  # chunk -> file holding its newest saved contents
        self._tf = tf.train.Checkpoint(**agent.checkpointables())
        self._manager = tf.train.CheckpointManager(self._tf, str(self.directory), max_to_keep=None)

    def save(self, env_steps: int, loop_state) -> dict:
        """Write checkpoint `env_steps`; returns {"seconds", "bytes"} of the save."""
        started, written = time.perf_counter(), 0
        # Saving a step that was saved before (a resume that repeats steps): it stops counting first.
        marker_path(self.directory, env_steps).unlink(missing_ok=True)
        prefix = self._manager.save(checkpoint_number=env_steps)
        written += sum(p.stat().st_size for p in self.directory.glob(f"{pathlib.Path(prefix).name}.*"))
        if self._replay is not None:
            for chunk in self._replay.take_dirty_chunks():
                name = f"chunk-{chunk:05d}-{env_steps}.npz"
                written += atomic_write(self.directory / name, _npz_bytes(self._replay.chunk_arrays(chunk)))
                self._chunk_files[chunk] = name
            manifest = {"counters": self._replay.counters(), "chunks": self._chunk_files}
            written += atomic_write(self.directory / f"replay-{env_steps}.json", json.dumps(manifest).encode())
        written += atomic_write(self.directory / f"state-{env_steps}.pkl", pickle.dumps(loop_state))
        written += atomic_write(marker_path(self.directory, env_steps), json.dumps({"env_steps": env_steps}).encode())
        self._prune()
        return {"seconds": time.perf_counter() - started, "bytes": written}

    def _prune(self) -> None:
        """Delete every file that no kept complete checkpoint needs (old ones, half-written ones,
        temporary files of an interrupted save). Markers go first, so an interrupted prune never
        leaves a marker whose files are gone; a file that will not go is left for the next save."""
        complete = complete_steps(self.directory)
        kept = complete[: self._keep]
        for step in complete[self._keep:]:
            marker_path(self.directory, step).unlink(missing_ok=True)
        needed = {marker_path(self.directory, s).name for s in kept} | {f"replay-{s}.json" for s in kept}
        needed |= {f"state-{s}.pkl" for s in kept} | {"checkpoint", BEST_FILE}
        best = read_best(self.directory)
        if best is not None:
            needed |= {p.name for p in self.directory.glob(f"best-{best['env_steps']}.*")}
        for s in kept:
            needed |= {p.name for p in self.directory.glob(f"ckpt-{s}.*")}
            manifest = self.directory / f"replay-{s}.json"
            if manifest.exists():
                needed |= set(json.loads(manifest.read_text())["chunks"].values())
        for path in self.directory.iterdir():
            if path.name in needed:
                continue
            try:
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
            except OSError as error:
                print(f"warning: could not delete old checkpoint file {path}: {error.strerror}", file=sys.stderr)

    def restore_latest(self) -> tuple[int, object]:
        """Restore the newest complete checkpoint that loads; warn about each broken one skipped and
        rename its marker so it stops counting.

        Returns (env_steps, loop_state); raises UserError when no complete checkpoint loads. (Acting
        needs only the online network: `restore_online`.)"""
        return _newest_that_loads(self.directory, self._restore, mark_broken=True)

    def _restore(self, env_steps: int):
        """Small files are read before anything is changed; the ring is rewritten whole (chunks the
        checkpoint lists are loaded, the others zeroed), so a failed attempt leaves nothing stale."""
        with open(self.directory / f"state-{env_steps}.pkl", "rb") as f:
            loop_state = pickle.load(f)
        manifest = json.loads((self.directory / f"replay-{env_steps}.json").read_text()) if self._replay is not None else None
        self._tf.restore(str(self.directory / f"ckpt-{env_steps}")).expect_partial().assert_existing_objects_matched()
        if self._replay is not None:
            chunks = {int(c): name for c, name in manifest["chunks"].items()}
            for chunk in range(self._replay.num_chunks):
                if chunk not in chunks:
                    self._replay.clear_chunk(chunk)
                    continue
                with np.load(self.directory / chunks[chunk]) as arrays:
                    self._replay.load_chunk(chunk, arrays)
            self._replay.load_counters(manifest["counters"])
            self._chunk_files = chunks
        return loop_state


def _newest_that_loads(directory: pathlib.Path, restore, mark_broken: bool) -> tuple[int, object]:
    """(env step, `restore(env step)`) of the newest complete checkpoint that loads; each broken one on
    the way is reported in one warning line and, with `mark_broken`, its marker renamed."""
    for env_steps in complete_steps(directory):
        try:
            return env_steps, restore(env_steps)
        except BROKEN as error:
            print(f"warning: checkpoint at env step {env_steps} in {directory} is broken "
                  f"({error.__class__.__name__}); falling back to the one before it", file=sys.stderr)
            if mark_broken:
                marker = marker_path(directory, env_steps)
                try:
                    marker.replace(marker.with_suffix(".broken"))  # pruned by the next save
                except OSError:
                    pass
    raise UserError(f"no complete checkpoint in {directory}; allowed: a run folder written by tfdqn.train "
                    f"that saved at least one checkpoint")


def restore_online(directory: pathlib.Path, network, checkpoint: str | int = "latest") -> int:
    """Load only the online network, all that acting needs, from checkpoint "latest" (the newest complete
    one that loads), "best" or an env step of `directory`; returns its env step. The run folder is left
    as it is."""
    directory = pathlib.Path(directory)
    reader = tf.train.Checkpoint(online=network)

    def read(prefix: str) -> None:
        reader.read(str(directory / prefix)).expect_partial().assert_existing_objects_matched()

    if checkpoint == "latest":
        return _newest_that_loads(directory, lambda step: read(f"ckpt-{step}"), mark_broken=False)[0]
    step = read_best(directory)["env_steps"] if checkpoint == "best" else int(checkpoint)
    try:
        read(f"best-{step}" if checkpoint == "best" else f"ckpt-{step}")
    except BROKEN as error:
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
