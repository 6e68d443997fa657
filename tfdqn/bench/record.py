"""A benchmark's record: one JSON file holding every run it has recorded, each with its recipe.

A run enters the record as it ends and stays there until a flag that names it removes it: a report over a
subset of games or seeds, or a lost run folder, keeps every other run. Each run carries its RunKey (config
hash and seed), its resolved config, the tfdqn version and the git commit that trained it, so runs of two
recipes in one file are told apart and never pooled. Every write is atomic, and each change is made to the
file as it is on disk at that moment, under a lock on its folder, so two sweeps sharing one record keep each
other's runs.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import fcntl
import json
import os
import pathlib

from tfdqn.atomic import write_json
from tfdqn.errors import UserError

FORMAT = 2  # 1: the results files of tools/atari100k.py and tools/bench_atari.py, keyed by preset name only


class Record:
    """The runs of one benchmark in `path`, identified by `identity` (field names, the config hash and seed
    among them)."""

    def __init__(self, path: pathlib.Path, tool: str, identity: tuple[str, ...], writes: bool = True):
        self.path, self.tool, self.identity = pathlib.Path(path), tool, identity
        self.writes = writes  # False: every change stays in memory (a report no one asked to store)
        self.data = {"tool": tool, "format": FORMAT, "runs": [], "reports": {}}
        if self.path.exists():
            self.data = self._read()

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
            fits = data["tool"] == self.tool and data["format"] == FORMAT and isinstance(data["runs"], list)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise UserError(f"--out {self.path} is not a record of tfdqn {self.tool} ({error!r}); allowed: a record "
                            f"it wrote, or a new file") from None
        if not fits:
            raise UserError(f"--out {self.path} is a record of tfdqn {data['tool']}, format {data['format']}, not of "
                            f"{self.tool}, format {FORMAT}; allowed: a record it wrote, or a new file")
        return data

    @property
    def runs(self) -> list[dict]:
        return self.data["runs"]

    @property
    def reports(self) -> dict[str, dict]:
        """The newest report of each recipe, by config hash (`report`)."""
        return self.data["reports"]

    def _id(self, run: dict) -> tuple:
        return tuple(run[name] for name in self.identity)

    def get(self, **identity) -> dict | None:
        wanted = tuple(identity[name] for name in self.identity)
        return next((run for run in self.runs if self._id(run) == wanted), None)

    def of_recipe(self, recipe: str, field: str = "config_hash") -> list[dict]:
        """The runs of one recipe: those whose `field` (the config hash, or a suite's hash) is `recipe`."""
        return [run for run in self.runs if run.get(field) == recipe]

    def put(self, run: dict) -> None:
        """Record a finished run (replacing the entry with its identity) in the file at once; the run brings
        the provenance of the code that trained it (`runs.code_of`)."""
        stamped = {**run, "recorded_at": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
        with self._change():
            self.data["runs"] = [kept for kept in self.runs if self._id(kept) != self._id(run)] + [stamped]

    def remove(self, identities: list[dict]) -> None:
        """Take out the runs with these identities (a user's explicit request) in one write; a one-line error,
        and nothing written, if one is not there."""
        with self._change():
            for identity in identities:
                run = self.get(**identity)
                if run is None:
                    named = ", ".join(f"{name} {value}" for name, value in identity.items())
                    raise UserError(f"--remove: the record {self.path} holds no run with {named}; allowed: a run it "
                                    f"holds")
                self.data["runs"].remove(run)

    def report(self, config_hash: str, report: dict) -> None:
        """Keep the newest report of a recipe beside the runs (the runs stay the record), in the file at once."""
        with self._change():
            self.data["reports"][config_hash] = report

    @contextlib.contextmanager
    def _change(self):
        """Hold the folder's lock, bring `data` up to the file (another sweep may have written it since), let the
        caller change it, then write it: a change that raises writes nothing. A record that `writes` nothing
        changes only in memory."""
        if not self.writes:
            yield
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        folder = os.open(self.path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)
            if self.path.exists():
                self.data = self._read()
            yield
            write_json(self.path, self.data)
        finally:
            os.close(folder)  # closing the descriptor releases the lock

    def other_recipes(self, recipe: str, field: str = "config_hash") -> dict[str, int]:
        """Runs per recipe (by `field`) that is not `recipe`, so a report can say what else the file holds."""
        return dict(collections.Counter(run.get(field) for run in self.runs if run.get(field) != recipe))
