"""What `python -m tfdqn.train` says and leaves: start-up lines, a bar that moves every second, one final
line, --print-config, numbers read as --set reads them, the protocol an env id implies, a complete run
left byte for byte as it was, and --deterministic reaching TensorFlow."""

import hashlib
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO, run_module
from tfdqn import config as config_lib
from tfdqn.errors import UserError
from tfdqn.train import final_evaluation_line, significant


def _train_in(folder, *args: str) -> subprocess.CompletedProcess:
    """`python -m tfdqn.train args...` run from `folder` (so a default `runs/` would land there)."""
    return subprocess.run([sys.executable, "-m", "tfdqn.train", *args], cwd=folder, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"})


def test_print_config_prints_the_resolved_config_and_makes_no_folder(tmp_path):
    result = _train_in(tmp_path, "--env", "Breakout", "--print-config")  # --print-config, as the guides show it
    assert (result.returncode, result.stderr) == (0, "")
    expected = config_lib.resolve_config([], {"env.id": "Breakout"})
    assert yaml.safe_load(result.stdout) == config_lib.to_dict(expected)
    assert list(tmp_path.iterdir()) == []


def _help(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfdqn.train", *args, "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": str(columns)})


def _key_line(help_text: str, key: str) -> str:
    return next(line for line in help_text.splitlines() if line.startswith(f"  {key}: "))


def test_help_fits_the_terminal_and_shows_the_values_the_default_command_runs():
    result = _help()
    assert (result.returncode, result.stderr) == (0, "")
    assert max(len(line) for line in result.stdout.splitlines()) <= 80, result.stdout
    text = " ".join(result.stdout.split())  # the header, however it wrapped
    assert ("with the values of the config python -m tfdqn.train runs with no --env, --config, --preset or --set: "
            "env CartPole from tfdqn/configs/cartpole.yaml") in text
    assert "Another env's: python -m tfdqn.train --env Breakout --help, or --print-config." in text
    assert _key_line(result.stdout, "replay.capacity") == "  replay.capacity: 50000  [file cartpole.yaml]"
    assert _key_line(result.stdout, "env.noop_max") == "  env.noop_max: 30  [default]"
    assert _key_line(result.stdout, "env.id") == "  env.id: CartPole  [file cartpole.yaml]"
    lines = result.stdout.splitlines()  # each key's doc indented under it
    assert lines[lines.index(_key_line(result.stdout, "run.total_steps")) + 1] == "      env steps to train for"


@pytest.mark.parametrize("args", [["--env", "Breakout"], ["--set", "env.id=Breakout"]])
def test_help_with_an_env_shows_that_envs_config_and_where_each_value_comes_from(args):
    result = _help(*args, columns=200)
    assert (result.returncode, result.stderr) == (0, "")
    assert "the config this command line would run: env Breakout from tfdqn/configs/atari.yaml" in result.stdout
    assert _key_line(result.stdout, "replay.capacity") == "  replay.capacity: 1000000  [file atari.yaml]"
    assert _key_line(result.stdout, "env.repeat_action_probability").endswith("[implied by env Breakout]")
    assert "Another env's" not in result.stdout


def test_help_with_a_preset_shows_the_values_it_sets():
    result = _help("--env", "Breakout", "--preset", "rainbow", "--set", "replay.capacity=2e5", columns=200)
    assert result.returncode == 0, result.stderr
    assert _key_line(result.stdout, "network.noisy").startswith("  network.noisy: true  [preset ")
    assert _key_line(result.stdout, "replay.capacity") == "  replay.capacity: 200000  [--set or a flag]"


def test_help_with_an_unknown_env_is_a_one_line_error():
    result = _help("--env", "Brekout")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1 and "did you mean Breakout" in result.stderr


def test_flags_read_numbers_as_set_does(tmp_path):
    flags = _train_in(tmp_path, "--total-steps", "1e5", "--learning-starts", "2_000", "--seed", "1.0e0",
                      "--print-config")
    sets = _train_in(tmp_path, "--set", "run.total_steps=1e5", "--set", "run.learning_starts=2_000",
                     "--set", "run.seed=1.0e0", "--print-config")
    assert flags.returncode == sets.returncode == 0 and flags.stdout == sets.stdout
    run = yaml.safe_load(flags.stdout)["run"]
    assert (run["total_steps"], run["learning_starts"], run["seed"]) == (100_000, 2_000, 1)


@pytest.mark.parametrize("value", ["ten", "1.5", "1e400"])
def test_a_bad_number_is_the_same_one_line_error_from_a_flag_and_from_set(tmp_path, value):
    flag = _train_in(tmp_path, "--total-steps", value)
    via_set = _train_in(tmp_path, "--set", f"run.total_steps={value}")
    assert flag.returncode == via_set.returncode == 2 and flag.stderr == via_set.stderr
    assert flag.stderr.count("\n") == 1 and "allowed: an integer such as 50000, 5e4 or 50_000" in flag.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("env, sticky, frame_skip", [
    ("Breakout", 0.25, 4),                  # ALE/Breakout-v5: sticky actions, frame skip 4
    ("ALE/Breakout-v5", 0.25, 4),
    ("BreakoutNoFrameskip-v4", 0.0, 4),     # v4: no sticky actions; the wrapper skips frames
    ("PongNoFrameskip-v0", 0.25, 4),        # v0: sticky actions
])
def test_an_env_id_sets_the_protocol_it_implies(env, sticky, frame_skip):
    config = config_lib.resolve_config([], {"env.id": env})
    assert (config.env.repeat_action_probability, config.env.frame_skip) == (sticky, frame_skip)


def test_what_the_user_sets_wins_over_what_the_id_implies(tmp_path):
    v4 = {"env.id": "BreakoutNoFrameskip-v4"}
    assert config_lib.resolve_config([], {**v4, "env.repeat_action_probability": 0.1}).env.repeat_action_probability == 0.1
    own = tmp_path / "own.yaml"
    own.write_text("extends: atari.yaml\nenv:\n  id: BreakoutNoFrameskip-v4\n")
    assert config_lib.resolve_config([own], {}).env.repeat_action_probability == 0.0  # atari.yaml's 0.25 is inherited
    own.write_text("extends: atari.yaml\nenv:\n  id: BreakoutNoFrameskip-v4\n  repeat_action_probability: 0.25\n")
    assert config_lib.resolve_config([own], {}).env.repeat_action_probability == 0.25  # the file's own key


@pytest.mark.parametrize("env", ["Breakout-v4", "Pong-v0"])
def test_an_id_with_a_random_frame_skip_is_refused(env):
    with pytest.raises(UserError, match=r"skips a random 2 to 4 frames per step.*allowed: \w+NoFrameskip-v4"):
        config_lib.resolve_config([], {"env.id": env})


def test_a_v4_id_plays_without_sticky_actions_with_one_env_and_with_several():
    from tfdqn.envs.make import make_env
    from tfdqn.envs.vector import AtariVector

    config = config_lib.resolve_config([], {"env.id": "BreakoutNoFrameskip-v4"})
    env, spec = make_env(config.env, seed=0)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    env.close()
    vector = AtariVector(config.env, 2, seed=0)  # ale-py's vector env knows the ROM as "breakout"
    assert vector.reset().shape == (2, 84, 84)
    vector.close()


def _stdout_lines(result) -> list[str]:
    return result.stdout.strip().splitlines()


def _bar_lines(stderr: str) -> list[str]:
    """Each state of the progress bar that tqdm drew (it redraws in place with carriage returns)."""
    return [line.strip() for line in re.split(r"[\r\n]", stderr) if re.search(r"\| \d+/\d+ \[", line)]


def _seconds(interval: str) -> int:
    """A tqdm time ([H:]MM:SS) in seconds."""
    seconds = 0
    for part in interval.split(":"):
        seconds = 60 * seconds + int(part)
    return seconds


def _check_time_left(bars: list[str], learning_starts: int) -> None:
    """Each bar of the warm-up's last quarter counts the learning and evaluations to come in its time left: what it
    shows beyond the warm-up still to go (at the bar's rate) is within a factor of 3 of the time the run then took
    beyond it. The factor is the other tests' load: the update's cost is timed over 0.2 s as the run starts, and
    on two cores that load can halve or double it by the time learning runs (a run here saw its learning take 8.5 s
    where the timed cost said 18.5 s). tqdm's own estimate counts the 1,000 learning steps at the warm-up's rate,
    about 1 s against the 8 s or more they take (8 updates of 256 each), below a third of it."""
    end = _seconds(re.search(r"\[(\S+)<", bars[-1]).group(1))
    checked = 0
    for bar in bars:
        # tqdm pads a rate to five characters: one under 10 steps/s (learning on a loaded machine) follows two spaces
        n, elapsed, left, rate = re.search(r"\| (\d+)/\d+ \[(\S+)<(\S+),\s+([\d.]+|\?)step/s", bar).groups()
        if 3 * learning_starts // 4 <= int(n) < learning_starts and "?" not in (left, rate):
            warm_up = (learning_starts - int(n)) / float(rate)  # the warm-up still to go; the bar shows whole seconds
            counted, taken = _seconds(left) - warm_up, end - _seconds(elapsed) - warm_up
            assert taken / 3 - 1 < counted < 3 * taken + 1, (bar, bars[-1])
            checked += 1
    assert checked, bars


@pytest.mark.slow
def test_a_run_says_where_it_writes_and_its_length_moves_its_bar_every_second_and_ends_in_one_line(tmp_path):
    # One env and eight updates of 256 per env step: learning runs several times slower than the warm-up's acting.
    # 20,000 warm-up steps outlast the 3 s the line waits for even at 4,000 steps/s, so it is the warm-up's line
    # (a shorter warm-up has it said as learning begins, as tests/test_pace.py checks).
    result = run_module("tfdqn.train", "--env", "CartPole", "--total-steps", "21000", "--learning-starts", "20000",
                        "--training-interval", "0.125", "--set", "run.num_envs=1", "--set", "replay.batch_size=256",
                        "--set", "run.log_every=100000",
                        "--set", "run.final_eval_episodes=2", "--logdir", str(tmp_path), "--run-name", "r")
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "r"
    lines = _stdout_lines(result)
    assert lines[:4] == [f"run folder: {run_dir}", f"TensorBoard: tensorboard --logdir {run_dir}",
                         "evaluation protocol: CartPole-v1, epsilon 0, episodes capped at 500 steps (TimeLimit)",
                         "replay: 50,000 transitions, 0.00 GiB (2,900,072 bytes, 58 per transition)"]
    # Said once the warm-up's rate is measured: the time left, the learning to come and the update's cost.
    acting, learning = map(lambda figure: float(figure.replace(",", "")), re.fullmatch(
        r"time left: about \d+ (?:s|min) for [\d,]+ env steps: [\d,]+ of warm-up at ([\d,]+)/s, then 1,000 learning at "
        r"about ([\d,]+)/s: 8 updates of \d+\.\d ms per env step \((?:and \d+|with \d+) periodic evaluations of 10 "
        r"games and the final evaluation's 4 games(?:, not timed yet|: \d+ (?:s|min) at [\d.e-]+ s a game)\)",
        lines[4]).groups())
    assert learning < acting
    text = (run_dir / "summary.json").read_text()
    assert text.startswith('{\n  "env_id": "CartPole-v1",\n')  # indented
    summary = yaml.safe_load(text)
    product = f"final evaluation: 2 episodes, return {significant(summary['final_eval_return_mean'])} ± " \
              f"{significant(summary['final_eval_return_std'])}"
    network = summary["final_network"]  # periodic evaluation is on: the best-evaluated network or the last
    where = f"env step {network['env_steps']}, exported to {run_dir / 'policy'}"
    product += (f" (best-evaluated network, {where}; the last network: "
                f"{significant(summary['last_network_eval_return_mean'])})" if network["source"] == "best" else
                f" (the last network, {where})")
    assert lines[-2:] == [product, f"summary: {run_dir / 'summary.json'}"]
    bars = _bar_lines(result.stderr)
    # A summary is due only at the end (log_every 100,000), yet the bar moved about once a second (each
    # refresh waits for the loop iteration under way: slack for a loaded machine's long update rounds).
    shown = {int(re.search(r"\| (\d+)/", bar).group(1)) for bar in bars}
    assert len(shown) >= max(2, int(summary["wall_seconds"]) // 2), (summary["wall_seconds"], sorted(shown))
    assert max(shown) == summary["env_steps"]
    # Through learning's rounds of 2,048 updates, seconds each, the bar was still drawn each second: its clock moved.
    clocks = [_seconds(re.search(r"\[(\S+)<", bar).group(1)) for bar in bars]
    assert max(later - earlier for earlier, later in zip(clocks, clocks[1:])) <= 3, clocks
    _check_time_left(bars, 20000)
    # One rate per bar, and the returns told apart: the exploration games' and the newest evaluation's.
    evaluated = ["-", *(f"{float(row.split(',')[2]):.1f}" for row in
                       (run_dir / "evaluations.csv").read_text().splitlines()[1:])]
    for bar in bars:
        assert bar.count("/s") == 1 and re.search(r"step/s, train ret (-|\d+\.\d) \| eval (\S+) \| eps ", bar), bar
        assert re.search(r"\| eval (\S+) \|", bar).group(1) in evaluated, (bar, evaluated)
    # The bar closes where training ends, with the training's rate as summary.json has it (a final evaluation
    # that plays on is not in it), and the line below it says what plays meanwhile.
    closing = result.stderr.split("\n")[-3:]  # the closing bar, the line below it, and the end of stderr
    assert re.split(r"\r", closing[0])[-1].strip() == bars[-1]
    assert f" {summary['env_steps_per_sec']:.2f}step/s, " in bars[-1] and f"| eval {evaluated[-1]} |" in bars[-1]
    plan = f"final evaluation under way: 2 episodes of the last network (env step {summary['env_steps']})"
    plan += (f", then 2 of the best-evaluated one (env step {network['env_steps']})" if network["source"] == "best"
             else ", the best-evaluated one")
    assert closing[1:] == [plan, ""]


def _digest(folder) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_resuming_a_complete_run_reports_it_and_changes_no_byte(cartpole_run, tmp_path):
    run_dir = tmp_path / "done"
    shutil.copytree(cartpole_run[0], run_dir)
    before = _digest(run_dir)
    summary = yaml.safe_load((run_dir / "summary.json").read_text())
    for extra in ([], ["--total-steps", "1500"], ["--total-steps", "1.5e3"]):  # the run's own total_steps
        result = run_module("tfdqn.train", "--resume", str(run_dir), *extra, timeout=60)
        assert (result.returncode, result.stderr) == (0, "")
        assert _stdout_lines(result) == [
            f"run {run_dir} is complete ({summary['env_steps']} env steps), {final_evaluation_line(summary)}; "
            f"nothing to do (to train on: --resume {run_dir} --total-steps N with a larger N)"]
        assert _digest(run_dir) == before


def test_deterministic_with_the_async_learner_is_refused():
    with pytest.raises(UserError, match="^config key compute.deterministic = True with run.async_learner = True "):
        config_lib.resolve_config([], {"compute.deterministic": True, "run.async_learner": True})


@pytest.mark.slow
def test_deterministic_reaches_tensorflow_and_the_saved_config(tmp_path):
    """In this process, which TensorFlow has started in already (no start-up of its own): op determinism is off
    before the run and on after it, and turned off again after the test (process-wide, it would follow this
    worker's later tests)."""
    from tensorflow.python.framework import config as tf_config

    from tests.conftest import train_in_process

    args = ["--env", "CartPole", "--deterministic", "--total-steps", "600", "--learning-starts", "300", "--quiet",
            "--set", "run.final_eval_episodes=1", "--logdir", str(tmp_path), "--run-name", "d"]
    assert not tf_config.is_op_determinism_enabled()  # so it is the run that turns it on
    try:
        result = train_in_process(*args)
        assert result.returncode == 0, result.stderr
        assert tf_config.is_op_determinism_enabled()
    finally:
        tf_config.disable_op_determinism()
    assert yaml.safe_load((tmp_path / "d" / "config.yaml").read_text())["compute"]["deterministic"] is True


def test_the_final_line_gives_three_significant_digits_and_never_rounds_a_return_to_another():
    """Returns of 0.84 to 1.0 (mean 0.958) read 0.958, not 1.0; large and negative ones keep their whole digits."""
    assert [significant(value) for value in (0.958, 0.0412, 18.83, -20.66, 174.9, 500.0, 1234.5, 0.0)] == [
        "0.958", "0.0412", "18.8", "-20.7", "175", "500", "1234", "0"]


def test_a_start_that_fails_leaves_no_folder_prints_no_folder_line_and_print_config_refuses_it_too(tmp_path):
    """The network against the env is checked before a run folder exists: no `run folder:` line, no folder holding
    a config.yaml that would block the name and --resume; `--print-config` refuses the same config in one line."""
    from tests.conftest import train_in_process

    error = ("network.kind = nature_cnn needs image observations (uint8), not float32 [4]; allowed: network.kind = "
             "mlp or auto")
    failed = train_in_process("--env", "CartPole", "--set", "network.kind=nature_cnn", "--logdir", str(tmp_path / "r"),
                              "--run-name", "a", "--quiet")
    assert failed.returncode == 2 and failed.stderr == f"python -m tfdqn.train: error: {error}\n"
    assert "run folder:" not in failed.stdout and not (tmp_path / "r" / "a").exists()
    shown = train_in_process("--env", "CartPole", "--set", "network.kind=nature_cnn", "--print-config")
    assert shown.returncode == 2 and shown.stdout == "" and shown.stderr == f"python -m tfdqn.train: error: {error}\n"


@pytest.mark.slow
def test_the_bar_names_an_evaluation_while_it_plays_keeps_its_clock_moving_and_the_time_left_counts_them(tmp_path):
    # 300 greedy games of MountainCar, 200 steps each (an untrained network never reaches the flag): seconds of play
    # at env steps 1,000, 2,000 and 2,200 (the last), then 1 game of each of two networks at the end. Four updates per
    # env step make learning last long enough for the time-left line (3 s of rate, evaluations left out) before
    # 2,000; the 200 steps after it only reach the last step's evaluation.
    result = run_module("tfdqn.train", "--env", "MountainCar", "--total-steps", "2200", "--learning-starts", "500",
                        "--training-interval", "0.25", "--set", "run.eval_every=1000", "--set", "run.eval_episodes=300",
                        "--set", "run.final_eval_episodes=1", "--logdir", str(tmp_path), "--run-name", "r")
    assert result.returncode == 0, result.stderr
    bars = _bar_lines(result.stderr)
    playing = [bar for bar in bars if "| evaluating: 300 games at env step 1,000]" in bar]
    clocks = [_seconds(re.search(r"\[(\S+)<", bar).group(1)) for bar in playing]
    assert len(set(clocks)) >= 2, playing  # said as it began, and drawn again each second while it played
    # The time-left line, said again once an evaluation was timed, counts the two periodic ones and the final one.
    timed = [line for line in _stdout_lines(result) if line.startswith("time left:") and " s a game)" in line]
    assert len(timed) == 1 and re.search(r"\(with 2 periodic evaluations of 300 games and the final evaluation's 2 "
                                         r"games: \d+ (?:s|min) at [\d.e-]+ s a game\)$", timed[0]), timed
