"""What every command's `main` shares as a console command: the name it is called by (`prog`, as the `tfdqn`
command calls it), a quiet end when the reader of its output goes away (`| head`), and a one-line error
before any work where the optional extra it needs is not installed."""

import contextlib
import importlib
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, TINY_RUN
from tfdqn.cli import SIGPIPE_EXIT

COMMANDS = ["train", "evaluate", "export", "tune"]


@pytest.mark.parametrize("command", COMMANDS)
def test_prog_names_the_command_in_its_errors_and_the_default_stays(command, capsys):
    main = importlib.import_module(f"tfdqn.{command}").main
    for prog, name in [("tfdqn " + command, "tfdqn " + command), (None, "python -m tfdqn." + command)]:
        with pytest.raises(SystemExit) as exited:
            main(["--no-such-flag"], prog=prog)
        assert exited.value.code == 2
        assert capsys.readouterr().err.startswith(f"{name}: error: ")


def test_prog_names_the_command_in_its_help(capsys):
    from tfdqn.train import main

    assert main(["--help"], prog="tfdqn train") == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: tfdqn train [-h]")
    assert "Another env's: tfdqn train --env Breakout --help" in " ".join(text.split())


@pytest.mark.parametrize("command", COMMANDS)
def test_help_wraps_to_the_terminal(command, monkeypatch, capsys):
    main = importlib.import_module(f"tfdqn.{command}").main
    monkeypatch.setenv("COLUMNS", "80")  # what argparse reads the terminal's width from
    with pytest.raises(SystemExit) if command != "train" else contextlib.nullcontext():
        main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 10 and max(len(line) for line in lines) <= 80


def _into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """`python -m args...` writing into a pipe whose reader has already gone, as `| head -1` leaves it once
    head has its line: the command's next write finds no reader."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", *args], stdout=write_end, stderr=subprocess.PIPE, text=True,
                              cwd=REPO, timeout=60)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [["--env", "CartPole", "--print-config"], ["--env", "Breakout", "--help"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(args):
    result = _into_a_closed_pipe("tfdqn.train", *args)
    assert (result.returncode, result.stderr) == (SIGPIPE_EXIT, "")


@pytest.mark.slow
def test_a_run_whose_reader_leaves_after_its_first_line_ends_quietly(tmp_path):
    """`python -m tfdqn.train ... | head -1`: head leaves after the run folder's line; the run's next line
    (the evaluation protocol, after TensorFlow's start-up) ends it with no traceback."""
    run = subprocess.Popen([sys.executable, "-m", "tfdqn.train", "--env", "CartPole", *TINY_RUN,
                            "--logdir", str(tmp_path), "--run-name", "r"],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline() == f"run folder: {tmp_path / 'r'}\n"
        run.stdout.close()
        stderr = run.stderr.read()
        assert (run.wait(timeout=120), stderr) == (SIGPIPE_EXIT, "")
    finally:
        run.kill()
        run.wait()


def test_tune_without_optuna_is_one_line_naming_the_extra_before_any_work(tmp_path, monkeypatch, capsys):
    from tfdqn.tune import main

    monkeypatch.setitem(sys.modules, "optuna", None)  # as if not installed
    code = main(["--env", "CartPole", "--trials", "2", "--param", "learner.learning_rate=loguniform:1e-4:1e-2",
                 "--logdir", str(tmp_path / "tune")])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == ('python -m tfdqn.tune: error: tuning needs optuna, which is not installed; allowed: '
                   'pip install "tfdqn[tune]"\n')
    assert list(tmp_path.iterdir()) == []
