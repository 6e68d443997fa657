"""What every command line shares: one-line errors (exit 2), failures (exit 1), tracebacks only on
--debug, and TensorFlow's C++ start-up lines kept off stderr. Exit codes are those of real processes."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO
from tfdqn.cli import OneLineErrorParser, run_cli
from tfdqn.errors import RunFailure, UserError

# A command line built the way tfdqn.train and tfdqn.evaluate are.
DEMO = textwrap.dedent("""
    import sys
    from tfdqn.cli import OneLineErrorParser, run_cli
    from tfdqn.errors import RunFailure, UserError

    parser = OneLineErrorParser(prog="demo")
    parser.add_argument("outcome", choices=["ok", "user", "failure", "bug"])
    parser.add_argument("--debug", action="store_true")

    def body(args):
        if args.outcome == "user":
            raise UserError("--size 0 is out of range; allowed: an integer >= 1")
        if args.outcome == "failure":
            raise RunFailure("the TD loss is NaN at env step 1000")
        if args.outcome == "bug":
            raise ZeroDivisionError("a bug is never hidden")
        print("done")
        return 0

    sys.exit(run_cli(parser, body, None))
""")


def _python(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("outcome, code, line", [
    ("user", 2, "demo: error: --size 0 is out of range; allowed: an integer >= 1\n"),
    ("failure", 1, "demo: error: the TD loss is NaN at env step 1000\n"),
])
def test_user_errors_and_run_failures_are_one_stderr_line(outcome, code, line):
    result = _python(DEMO, outcome)
    assert (result.returncode, result.stdout, result.stderr) == (code, "", line)


@pytest.mark.parametrize("outcome, error", [("user", "tfdqn.errors.UserError: --size 0"),
                                            ("failure", "tfdqn.errors.RunFailure: the TD loss")])
def test_debug_shows_the_traceback_instead(outcome, error):
    result = _python(DEMO, outcome, "--debug")
    assert result.returncode == 1 and result.stderr.startswith("Traceback (most recent call last):")
    assert error in result.stderr and "demo: error" not in result.stderr


def test_a_bug_is_never_turned_into_a_one_line_error():
    result = _python(DEMO, "bug")
    assert result.returncode == 1 and "Traceback" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1] == "ZeroDivisionError: a bug is never hidden"


def test_success_returns_the_bodys_code():
    result = _python(DEMO, "ok")
    assert (result.returncode, result.stdout, result.stderr) == (0, "done\n", "")


def test_a_bad_argument_is_one_line_with_exit_code_2():
    result = _python(DEMO, "maybe")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("demo: error: argument outcome: invalid choice: 'maybe' "
                             "(choose from 'ok', 'user', 'failure', 'bug')\n")


@pytest.mark.parametrize("argv, message", [
    (["--size", "x"], "argument --size: invalid int value: 'x'"),
    ([], "the following arguments are required: name"),
    (["a", "--colour", "red"], "unrecognized arguments: --colour red"),
])
def test_the_parser_prints_one_line_and_exits_2(capsys, argv, message):
    parser = OneLineErrorParser(prog="python -m tfdqn.demo")
    parser.add_argument("name")
    parser.add_argument("--size", type=int)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    assert exited.value.code == 2
    assert capsys.readouterr() == ("", f"python -m tfdqn.demo: error: {message}\n")


def test_run_cli_in_process_maps_errors_to_codes(capsys):
    parser = OneLineErrorParser(prog="demo")
    parser.add_argument("--debug", action="store_true")

    def raising(error):
        def body(args):
            raise error
        return body

    assert run_cli(parser, raising(UserError("bad value")), []) == 2
    assert run_cli(parser, raising(RunFailure("it broke")), []) == 1
    assert capsys.readouterr().err == "demo: error: bad value\ndemo: error: it broke\n"
    with pytest.raises(UserError):
        run_cli(parser, raising(UserError("bad value")), ["--debug"])
    assert run_cli(OneLineErrorParser(prog="no-debug-flag"), raising(UserError("x")), []) == 2


START = textwrap.dedent("""
    import sys
    from tfdqn.cli import start_tensorflow
    try:
        start_tensorflow()
    except ImportError as error:
        print("start-up failed:", error)
        sys.exit(3)
    import tensorflow as tf
    print(int(tf.constant(2) + 1))
    print("the one line after start-up", file=sys.stderr)
""")


def test_start_tensorflow_keeps_its_cpp_start_up_lines_off_stderr():
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"}  # the most it ever prints
    result = _python(START, env=env)
    assert (result.returncode, result.stdout, result.stderr) == (0, "3\n", "the one line after start-up\n")


def _fake_tensorflow(folder, fails: bool) -> dict:
    """A `tensorflow` package that writes to file descriptor 2 from below Python, as the C++ one does."""
    package = folder / "tensorflow"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(f"""
        import os, types
        os.write(2, b"I0000 port.cc:153] oneDNN custom operations are on.\\n")
        if {fails}:
            raise ImportError("libcudart.so.12: cannot open shared object file")
        config = types.SimpleNamespace(list_physical_devices=lambda: [])
        constant = lambda value: value
    """))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)])}


def test_start_tensorflow_hides_what_a_successful_start_up_wrote(tmp_path):
    result = _python(START, env=_fake_tensorflow(tmp_path, fails=False))
    assert (result.returncode, result.stdout, result.stderr) == (0, "3\n", "the one line after start-up\n")


def test_a_failed_start_up_shows_what_it_wrote_and_raises(tmp_path):
    result = _python(START, env=_fake_tensorflow(tmp_path, fails=True))
    assert result.returncode == 3
    assert result.stdout == "start-up failed: libcudart.so.12: cannot open shared object file\n"
    assert result.stderr == "I0000 port.cc:153] oneDNN custom operations are on.\n"
