"""What every command line shares: one-line errors (exit 2), failures (exit 1), tracebacks only on
--debug, and TensorFlow's C++ start-up lines kept off stderr. Exit codes are those of real processes."""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO, TINY, train_in_process
from tfdqn import config as config_lib
from tfdqn.cli import OneLineErrorParser, number, run_cli
from tfdqn.command import SUBCOMMANDS
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


START_UP = textwrap.dedent("""
    import sys
    from tfdqn.cli import start_tensorflow
    try:
        start_tensorflow()
    except ImportError as error:
        print("start-up failed:", error)
        sys.exit(3)
""")
AFTER_START_UP = textwrap.dedent("""
    import tensorflow as tf
    print(int(tf.constant(2) + 1))
    print("the one line after start-up", file=sys.stderr)
""")
START = START_UP + AFTER_START_UP
SKIPPED = textwrap.dedent("""
    from tfdqn.cli import UNUSED_BY_TENSORFLOW_IMPORT
    print(sorted(name for name in UNUSED_BY_TENSORFLOW_IMPORT if name in sys.modules))
""")
# Run after START's stderr line: what stderr gets from here on (a GPU host's jax warning, a traceback) goes to
# the file sys.argv[1], so that START's stderr stays what start-up and one TensorFlow op left there.
SKIPPED_STAY_IMPORTABLE = textwrap.dedent("""
    import os
    sys.stderr.flush()
    os.dup2(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    import jax, matplotlib.pyplot, pandas  # still importable afterwards
    print(jax.numpy.add(1, 2), matplotlib.pyplot.figure is not None, len(pandas.DataFrame({"a": [1, 2]})))
    import importlib.util
    if importlib.util.find_spec("IPython"):  # no dependency of tfdqn's: where installed, importable afterwards too
        import IPython
        print(IPython.get_ipython())
""")


@pytest.fixture(scope="module")
def started_tensorflow(tmp_path_factory):
    """One fresh process (a TensorFlow start-up costs seconds of CPU) for the two tests below: start_tensorflow
    at TF_CPP_MIN_LOG_LEVEL=0, the most it ever prints, then what it imported, a TensorFlow op and one stderr
    line, then the optional packages it skipped imported, their stderr kept in a file of its own."""
    later_stderr = tmp_path_factory.mktemp("start_tensorflow") / "stderr_after_the_one_line"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"}
    result = _python(START_UP + SKIPPED + AFTER_START_UP + SKIPPED_STAY_IMPORTABLE, str(later_stderr), env=env)
    return result, later_stderr.read_text() if later_stderr.exists() else ""


def test_start_tensorflow_keeps_its_cpp_start_up_lines_off_stderr(started_tensorflow):
    result, _ = started_tensorflow
    assert (result.returncode, result.stdout.splitlines()[1:2], result.stderr) == (0, ["3"],
                                                                                   "the one line after start-up\n")


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


def test_start_tensorflow_skips_optional_packages_it_would_import_for_nothing_and_leaves_them_importable(
        started_tensorflow):
    result, later_stderr = started_tensorflow
    assert result.returncode == 0, result.stderr + later_stderr
    lines = result.stdout.splitlines(keepends=True)  # [what start-up imported, the op's 3, the packages' lines]
    assert "".join([lines[0], *lines[2:]]) == "[]\n3 True 2\n" + ("None\n" if importlib.util.find_spec("IPython")
                                                                 else "")


@pytest.mark.parametrize("text, expected, value", [
    ("1e5", int, 100_000), ("50_000", int, 50_000), ("3", int, 3), ("2.0", int, 2), ("1e-3", float, 0.001),
    ("5", float, 5.0), ("0.5", float, 0.5)])
def test_a_number_flag_reads_its_value_as_set_does(text, expected, value):
    section, key = ("run", "total_steps") if expected is int else ("learner", "learning_rate")
    via_set = config_lib.build_config([], config_lib.parse_set([f"{section}.{key}={text}"]))
    assert number(expected)(text) == getattr(getattr(via_set, section), key) == value


@pytest.mark.parametrize("text, expected", [("ten", int), ("1.5", int), ("", int), ("x", float), ("true", float)])
def test_a_number_flag_refuses_what_set_refuses_with_the_same_words(text, expected):
    with pytest.raises(argparse.ArgumentTypeError) as flag:
        number(expected)(text)
    key = "run.total_steps" if expected is int else "learner.learning_rate"
    with pytest.raises(UserError) as via_set:
        config_lib.build_config([], config_lib.parse_set([f"{key}={text}"]))
    assert str(via_set.value).endswith(str(flag.value).split(" is not ", 1)[1])
    assert "; allowed: " in str(flag.value)


def _entry_points() -> list[list[str]]:
    """Every `python -m tfdqn.<x>` with a `__main__` block, and every maintainers' tool with one
    (`python -m tools.<x>`, run from the repository root)."""
    def has_main(path):
        return 'if __name__ == "__main__":' in path.read_text()

    return [["-m", ".".join(path.relative_to(REPO).with_suffix("").parts)]
            for folder in ("tfdqn", "tools") for path in sorted((REPO / folder).rglob("*.py")) if has_main(path)]


def test_the_entry_points_include_the_benchmarks_and_the_tools():
    modules = {argv[1] for argv in _entry_points()}
    assert {"tfdqn.train", "tfdqn.bench.compare", "tools.bench", "tools.run_programs"} <= modules
    assert not list((REPO / "tools").glob("compare_intervals.py"))  # moved into the package


def _run(argv: list[str], folder) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # as from the repository root, wherever the command runs
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # what a user's shell has: the entry point quiets TensorFlow itself
    return subprocess.run([sys.executable, *argv], cwd=folder, capture_output=True, text=True, timeout=120, env=env)


def _skip_without_optional_packages(argv: list[str]) -> None:
    text = REPO.joinpath(*argv[1].split(".")).with_suffix(".py").read_text()
    for package in ("torch", "stable_baselines3"):
        if f"\nimport {package}" in text or f"\nfrom {package}" in text:
            if importlib.util.find_spec(package) is None:
                pytest.skip(f"{argv[1]} needs {package} (the compare extra)")


@pytest.mark.parametrize("argv", _entry_points(), ids=lambda argv: argv[-1])
def test_every_entry_point_has_help_and_keeps_stderr_quiet(argv, tmp_path):
    _skip_without_optional_packages(argv)
    result = _run([*argv, "--help"], tmp_path)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert result.stdout.startswith(f"usage: python -m {argv[1]} " if argv[1].startswith("tools.") else "usage: ")
    assert list(tmp_path.iterdir()) == []
    if argv[1] in {module for module, _ in SUBCOMMANDS.values()}:  # a subcommand of tfdqn: a traceback on request
        assert "--debug" in result.stdout.split("options:")[1], result.stdout


@pytest.mark.parametrize("argv, fragment", [
    (["-m", "tfdqn.telemetry.system_monitor", "x"], "argument SECONDS: 'x' is not a number"),
    (["-m", "tfdqn.evaluate", "run", "--seed", "x"], "argument --seed: 'x' is not an integer"),
    (["-m", "tools.bench", "--num-envs", "x", "--out", "o.json"], "argument --num-envs: 'x' is not an integer"),
    (["-m", "tools.bench_ab", "--base", ".", "--rounds", "x", "--out", "o.json"], "argument --rounds: 'x'"),
    (["-m", "tools.bench_ab", "--variant", "a:b", "--variant", "c", "--out", "o.json"], "'a:b' is not a variant"),
    (["-m", "tools.bench_ab", "--variant", "raw", "--out", "o.json"], "is too few or repeats a label"),
    (["-m", "tools.checkpoint_cost", "--capacity", "x"], "argument --capacity: 'x' is not an integer"),
    (["-m", "tools.bench_replay", "--transitions", "10", "--out", "o.json"], "--transitions 10 / --batches 300 is out"),
    (["-m", "tools.fill_replay", "--transitions", "0"], "--transitions 0 is out of range"),
    (["-m", "tools.fill_replay", "--compression", "gzip"], "replay.compression = 'gzip' is out of range"),
    (["-m", "tools.checkpoint_cost", "--new", "0"], "--new [0] must list positive counts"),
    (["-m", "tfdqn.bench.compare", "--steps", "1e3", "--intervals", "x", "--out", "d"], "argument --intervals: 'x'"),
    (["-m", "tools.export_programs", "--fused-k", "x", "--out", "d"], "argument --fused-k: 'x' is not an integer"),
    (["-m", "tools.plot_learning_curve", "run", "--out", "c.png", "--window", "x"], "argument --window: 'x'"),
    (["-m", "tools.plot_learning_curve", "run", "--out", "c.png"], "RUN_DIR 'run' holds no episodes.csv"),
    (["-m", "tools.run_programs", "dir", "--seconds", "x"], "argument --seconds: 'x' is not a number"),
    (["-m", "tools.screenshot_tensorboard", "run", "--out", "t.png"], "RUN_DIR 'run' holds no TensorBoard events"),
    (["-m", "tools.soak", "--steps", "x", "--out", "d"], "argument --steps: 'x' is not an integer"),
    (["-m", "tools.soak", "--steps", "0", "--out", "d"], "config key run.total_steps = 0 is out of range"),
    (["-m", "tools.peer_sb3", "1e3", "500", "x"], "argument CAPACITY: 'x' is not an integer"),
    (["-m", "tools.peer_torch", "x"], "argument SECONDS: 'x' is not a number"),
    (["-m", "tools.peer_jax", "x"], "argument SECONDS: 'x' is not a number"),
], ids=lambda value: value if isinstance(value, str) else " ".join(value))
def test_bad_input_to_any_entry_point_is_one_line_and_exit_2(argv, fragment, tmp_path):
    _skip_without_optional_packages(argv)
    result = _run(argv, tmp_path)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.count("\n") == 1 and fragment in result.stderr and "; allowed: " in result.stderr
    if argv[1].startswith("tools."):  # a maintainers' tool is named as it is run
        assert result.stderr.startswith(f"python -m {argv[1]}: error: ")
    assert list(tmp_path.iterdir()) == []  # nothing half-made


@pytest.mark.slow
def test_the_learning_curve_plots_the_evaluations_tensorboard_shows_without_starting_tensorflow(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot needs the bench extra")
    from tfdqn.telemetry.tensorboard import read_scalars

    run_dir = tmp_path / "runs" / "a"
    trained = train_in_process(*TINY, "--total-steps", "1000", "--set", "run.eval_every=500",  # 2 evaluations
                               "--set", "run.eval_episodes=1", "--logdir", str(run_dir.parent), "--run-name", "a")
    assert trained.returncode == 0, trained.stderr
    probe = ("import json, pathlib, sys; from tools import plot_learning_curve as plot; "
             f"points = plot.eval_returns(pathlib.Path({str(run_dir)!r})); "
             "code = plot.run_cli(plot.build_parser(), plot._main, [sys.argv[1], '--out', 'curve.png']); "
             "print(json.dumps([points, code, 'tensorflow' in sys.modules]))")
    result = _run(["-c", probe, str(run_dir)], tmp_path)
    assert result.stderr == "" and result.stdout.startswith("curve.png\n"), result.stderr
    (steps, values), code, tensorflow_imported = json.loads(result.stdout.splitlines()[1])
    tagged = read_scalars(run_dir, "charts/eval_return")
    assert (code, tensorflow_imported) == (0, False) and len(steps) >= 2
    assert steps == [step for step, _ in tagged] and values == pytest.approx([value for _, value in tagged])
    assert (tmp_path / "curve.png").stat().st_size > 0 and len(values) == len(steps)


def _episodes_only_run(folder, config: str | None):
    folder.mkdir()
    (folder / "episodes.csv").write_bytes((REPO / "tests" / "data" / "cartpole_5000_seed0_episodes.csv").read_bytes())
    if config:
        (folder / "config.yaml").write_bytes((config_lib.CONFIG_DIR / config).read_bytes())
    return folder


def test_a_tool_missing_its_extra_says_so_in_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    from tools import plot_learning_curve

    run = _episodes_only_run(tmp_path / "run", "cartpole.yaml")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "matplotlib" else real_find_spec(name, *rest))
    monkeypatch.setattr(plot_learning_curve, "training_returns", lambda *_: pytest.fail("work started"))
    code = run_cli(plot_learning_curve.build_parser(), plot_learning_curve._main, [str(run), "--out", "c.png"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("python -m tools.plot_learning_curve: error: ")
    assert "needs matplotlib" in err and err.endswith('; allowed: pip install "tfdqn[bench]"\n')


@pytest.mark.parametrize("config, label", [("cartpole.yaml", "evaluation (epsilon 0)"),
                                           ("atari.yaml", "evaluation (epsilon 0.05)"), (None, "evaluation")])
def test_the_learning_curve_labels_evaluations_with_the_runs_own_epsilon(tmp_path, config, label):
    from tools.plot_learning_curve import eval_label

    assert eval_label(_episodes_only_run(tmp_path / "run", config)) == label
