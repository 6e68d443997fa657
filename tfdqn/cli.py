"""What every tfdqn command line shares: one-line errors with exit code 2, tracebacks only on --debug."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile

from tfdqn import config as config_lib
from tfdqn.errors import RunFailure, UserError

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter off stderr


@contextlib.contextmanager
def _stderr_to_file():
    """Send file descriptor 2 to a temporary file, and yield that file; restore it afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)


# Optional packages that TensorFlow's import pulls in only for features tfdqn never uses, when they happen
# to be installed: tf.lite's JAX converter imports jax and Keras' image-gallery plots import matplotlib
# (their cost is in docs/cartpole.md, Start-up). Both guard the import with `except ImportError`.
UNUSED_BY_TENSORFLOW_IMPORT = ("jax", "matplotlib")


@contextlib.contextmanager
def _hidden_modules(names: tuple[str, ...]):
    """Make `import name` raise ImportError for modules not yet imported, then make them importable again."""
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]


def start_tensorflow() -> None:
    """Import TensorFlow and look for devices with its C++ start-up lines (oneDNN, CUDA probing)
    kept off stderr, so an error after start-up is still the one line on stderr; if start-up itself
    fails, what it printed is shown. The import skips the optional packages it would load for nothing
    (`UNUSED_BY_TENSORFLOW_IMPORT`); they stay importable afterwards."""
    with _stderr_to_file() as captured:
        try:
            with _hidden_modules(UNUSED_BY_TENSORFLOW_IMPORT):
                import tensorflow as tf

            tf.config.list_physical_devices()
            return
        except KeyboardInterrupt:  # Ctrl-C during the import: the user's doing, not a start-up failure to show
            raise
        except BaseException as error:  # noqa: B036 - shown below with what start-up printed
            failure = error
            captured.seek(0)
            printed = captured.read().decode(errors="replace")
    sys.stderr.write(printed)
    raise failure


def last_line(output: str) -> str:
    """The last line of a child process's output (where its one-line error is), or `?` if it printed none."""
    return (output.strip().splitlines() or ["?"])[-1]


def number(expected: type):
    """An argparse type reading a flag's value as `--set` reads a config value (`1e5` and `50_000` are
    integers), refusing others with the same words: `'ten' is not an integer; allowed: ...`."""

    def parse(text: str):
        value = config_lib.convert(config_lib.parse_value(text), expected)
        if value is None:
            raise argparse.ArgumentTypeError(config_lib.not_a(expected, text))
        return value

    parse.__name__ = expected.__name__  # argparse names the type in its own messages
    return parse


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
    except KeyboardInterrupt:  # Ctrl-C before a run's own stop handler is installed (start-up), or in a tool
        if getattr(args, "debug", False):
            raise
        print(f"{parser.prog}: interrupted by SIGINT", file=sys.stderr)
        return 130
