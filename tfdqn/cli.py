"""What every tfdqn command line shares: one-line errors with exit code 2, tracebacks only on --debug."""

from __future__ import annotations

import argparse
import os
import sys

from tfdqn.errors import RunFailure, UserError

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter off stderr


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; a user error here is always one line."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def run_cli(parser: argparse.ArgumentParser, body, argv: list[str] | None) -> int:
    args = parser.parse_args(argv)
    try:
        return body(args)
    except (UserError, RunFailure) as error:
        if getattr(args, "debug", False):
            raise
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2 if isinstance(error, UserError) else 1
