"""A run's CSV log (`episodes.csv`, `evaluations.csv`): one row per event, keyed by the env step it
happened at, appended a line at a time, and cut back to a checkpoint on resume.

On resume the file is rewritten (atomically) with the complete rows up to the checkpoint: the rows
written after it are dropped, so the file repeats the uninterrupted run's rows exactly, and so is a
last line a crash tore mid-write."""

from __future__ import annotations

import os
import pathlib
import sys

from tfdqn.atomic import atomic_write

# evaluations.csv: one row per periodic evaluation, with the run clock's reading (what time to a score is read from)
EVALUATIONS_HEADER = "env_steps,run_seconds,return_mean,return_std"


class CsvLog:
    """`header`'s columns, the first one the env step (an integer), the others numbers."""

    def __init__(self, path: pathlib.Path, header: str, resume_from: int | None = None):
        self.columns = len(header.split(","))
        self.rows = complete_rows(path, resume_from, self.columns) if resume_from is not None and path.exists() else []
        atomic_write(path, "".join(f"{line}\n" for line in [header, *self.rows]))
        self._file = path.open("a", buffering=1)

    def write(self, *values) -> None:
        self._file.write(",".join(f"{value:g}" if isinstance(value, float) else str(value) for value in values) + "\n")

    def sync(self) -> None:
        """Put every row written so far on disk: a checkpoint that survives a power loss keeps its rows."""
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _parses(row: str, columns: int) -> bool:
    """Whether `row` is whole: `columns` fields, an integer env step, then numbers."""
    fields = row.split(",")
    try:
        int(fields[0]), [float(field) for field in fields[1:]]
    except ValueError:
        return False
    return len(fields) == columns


def complete_rows(path: pathlib.Path, up_to: int, columns: int) -> list[str]:
    """The rows of `path` (header left out) of events by env step `up_to`. A line a crash tore
    mid-write (the last one, without its newline, or any that does not parse) is dropped with a
    one-line warning."""
    *lines, unfinished = path.read_text(errors="replace").split("\n")
    torn = ([unfinished] if unfinished else []) + [line for line in lines[1:] if not _parses(line, columns)]
    if torn:
        print(f"warning: {path}: dropped {len(torn)} line(s) torn by a crash mid-write (first: {torn[0]!r})",
              file=sys.stderr)
    return [row for row in lines[1:] if _parses(row, columns) and int(row.split(",")[0]) <= up_to]


def read_rows(path: pathlib.Path, header: str) -> list[dict]:
    """The whole rows of a CSV log as {column: number} (the env step an integer), for readers of a run that
    may still be writing it: a last line without its newline yet is left for the next read."""
    if not path.exists():
        return []
    columns = header.split(",")
    *lines, _ = path.read_text(errors="replace").split("\n")
    return [{name: int(field) if name == columns[0] else float(field) for name, field in zip(columns, line.split(","))}
            for line in lines[1:] if _parses(line, len(columns))]


def read_evaluations(run_dir: pathlib.Path) -> list[dict]:
    """A run's `evaluations.csv` rows (env_steps, run_seconds, return_mean, return_std), in env-step order."""
    return read_rows(pathlib.Path(run_dir) / "evaluations.csv", EVALUATIONS_HEADER)
