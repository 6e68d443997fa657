"""What a benchmark tool leaves behind: its JSON (with the command, the machine and the code that measured) and its
Markdown table."""

from __future__ import annotations

import os
import pathlib
import platform
import shlex
import sys

from tfdqn.atomic import atomic_write, write_json
from tfdqn.cli import run_cli
from tfdqn.run.provenance import provenance


def command_line(prog: str, argv: list[str] | None) -> str:
    """The command that ran this benchmark (`prog`, e.g. "tfdqn atari100k", and its arguments), as a user types it."""
    return shlex.join([*prog.split(), *(sys.argv[1:] if argv is None else argv)])


def run_benchmark(build_parser, body, argv: list[str] | None, prog: str) -> int:
    """A benchmark's command line, its body given the command as typed (`args.command`) for what it writes."""
    parser = build_parser(prog)
    parser.set_defaults(command=command_line(prog, argv))
    return run_cli(parser, body, argv)


def machine() -> dict:
    return {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "python": platform.python_version()}


def publish(results: dict, table: str, out: str, table_path: str | None) -> None:
    """Write `results` to `out`, with the version and commit of the code this process measured with (`code`), and
    the table to `table_path` (where given), atomically; print the table."""
    write_json(pathlib.Path(out), {**results, "code": provenance()})
    publish_table(table, table_path)


def publish_table(table: str, table_path: str | None) -> None:
    """Write the table to `table_path` (where given), atomically, and print it."""
    if table_path:
        atomic_write(pathlib.Path(table_path), table)
    print(table, end="")
