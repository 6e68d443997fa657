"""What every tfdqn command line shares: one-line errors with exit code 2, tracebacks only on --debug."""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
import tempfile

from tfdqn import config as config_lib
from tfdqn.errors import RunFailure, UserError
from tfdqn.tuning.parent_death import die_with_parent

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
# to be installed: tf.lite's JAX converter imports jax, Keras' image-gallery plots import matplotlib, its
# array slicing for `fit` imports pandas and its file editor's notebook display imports IPython (their cost is
# in docs/experiments/cartpole.md, Start-up). Each guards the import with `except ImportError`; in a notebook
# IPython is already imported, so nothing is hidden from it there.
UNUSED_BY_TENSORFLOW_IMPORT = ("jax", "matplotlib", "pandas", "IPython")


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


SIGPIPE_EXIT = 128 + 13  # what a shell reports for a command that SIGPIPE ended (`seq 1 1000000 | head -1`)


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone (poll reports an error on it): a
    BrokenPipeError from anywhere else (an actor's pipe) is a failure, not the user's `| head`."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # no stdout, or one without a file descriptor (io.StringIO)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _discard_stdout() -> None:
    """Point stdout's file descriptor at os.devnull, so what is still buffered meets no closed pipe when
    Python flushes it at exit (Python's docs, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def run_cli(parser: argparse.ArgumentParser, body, argv: list[str] | None) -> int:
    """Parse `argv`, run `body(args)` and return its exit code; errors end in one line (`_errors_to_codes`),
    and a reader of stdout that goes away (`| head -3`) ends the command quietly with exit code 141, as
    SIGPIPE ends any Unix tool, instead of a BrokenPipeError traceback."""
    try:
        try:
            return _errors_to_codes(parser, body, argv)
        finally:
            sys.stdout.flush()  # here, not at exit: a reader gone is caught below, not printed as "Exception ignored"
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise
        _discard_stdout()
        return SIGPIPE_EXIT


def _errors_to_codes(parser: argparse.ArgumentParser, body, argv: list[str] | None) -> int:
    die_with_parent()  # a tuning worker or trial run goes with the process that started it
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


def add_import_option(parser: argparse.ArgumentParser) -> None:
    """`--import MODULE` (repeatable), for commands that remake a run's env: `import_modules` imports them."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE first (repeatable; the working folder is searched first): a module "
                             "that registers the run's env with gymnasium, as a script that trained through the "
                             "Python API on its own env did")


def import_modules(args: argparse.Namespace) -> None:
    """Import the modules `--import` names, each refused in one line where it cannot be imported."""
    from tfdqn.envs.names import import_user_module

    for module in args.imports:
        import_user_module(module, "--import", "a module that registers the run's env, importable from here")
