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
from tfdqn.atomic import atomic_write
from tfdqn.errors import UserError
from tfdqn.run.markers import complete_steps, marker_path
from tfdqn.replay.ring import ReplayRing


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
        needed |= {f"state-{s}.pkl" for s in kept} | {"checkpoint"}
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

    def restore_latest(self, with_loop_state: bool = True, mark_broken: bool = True) -> tuple[int, object]:
        """Restore the newest complete checkpoint that loads; warn about each broken one skipped.

        Returns (env_steps, loop_state); raises UserError when no complete checkpoint loads.
        Evaluation needs only the networks (`with_loop_state=False`, no replay) and leaves the run
        folder as it is (`mark_broken=False`); training renames a broken marker so it stops counting."""
        for env_steps in complete_steps(self.directory):
            try:
                return env_steps, self._restore(env_steps, with_loop_state)
            except (tf.errors.OpError, ValueError, OSError, KeyError, IndexError, EOFError, AssertionError,
                    AttributeError, ImportError, zipfile.BadZipFile, pickle.UnpicklingError) as error:
                print(f"warning: checkpoint at env step {env_steps} in {self.directory} is broken "
                      f"({error.__class__.__name__}); falling back to the one before it", file=sys.stderr)
                if mark_broken:
                    marker = marker_path(self.directory, env_steps)
                    try:
                        marker.replace(marker.with_suffix(".broken"))  # pruned by the next save
                    except OSError:
                        pass
        raise UserError(f"no complete checkpoint in {self.directory}; allowed: a run folder written by tfdqn.train "
                        f"that saved at least one checkpoint")

    def _restore(self, env_steps: int, with_loop_state: bool):
        """Small files are read before anything is changed; the ring is rewritten whole (chunks the
        checkpoint lists are loaded, the others zeroed), so a failed attempt leaves nothing stale."""
        loop_state = None
        if with_loop_state:
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
