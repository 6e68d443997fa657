"""A release installs and works from any folder: its sdist and wheel build and pass `twine check`; the wheel
ships the configs and data, trains CartPole from an empty folder with the `tfdqn` command, which runs every
subcommand; and a plain install (no extras) names the extra a subcommand misses before any work.

The venvs take TensorFlow and the other dependencies from this interpreter's site-packages (installing them anew
would take minutes and a network); tfdqn's wheel is built from a copy of this working tree (tests/plain_venv.py)."""

import csv
import json
import subprocess

import pytest

from tests import plain_venv
from tests.conftest import REPO
from tfdqn.command import SUBCOMMANDS


def _run(venv, work, *command, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), cwd=work, env=plain_venv.environment(venv), capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_an_installed_copy_trains_and_compares_from_another_folder(tmp_path):
    venv, work = plain_venv.with_system_packages(tmp_path), tmp_path / "work"
    work.mkdir()
    python = str(venv / "bin" / "python")
    where = _run(venv, work, python, "-c", "import tfdqn; print(tfdqn.__file__)").stdout.strip()
    assert where.startswith(str(venv)) and not where.startswith(str(REPO)), where
    # the package data `tfdqn atari100k` reads ships too: DrQ(epsilon)'s published runs
    code = "from tfdqn.bench.atari100k_scores import drq_eps_mean; print(drq_eps_mean('Pong'))"
    assert round(float(_run(venv, work, python, "-c", code).stdout), 1) == -9.1
    listed = _run(venv, work, "tfdqn", "--help")
    assert listed.returncode == 0 and listed.stderr == ""
    assert [line.split()[0] for line in listed.stdout.split("subcommands:\n")[1].splitlines()
            if line.startswith("  ") and not line.startswith("   ")] == list(SUBCOMMANDS)
    for name in ("atari100k", "time-to-score"):
        answer = _run(venv, work, "tfdqn", name, "--help")
        assert (answer.returncode, answer.stderr) == (0, "") and answer.stdout.startswith(f"usage: tfdqn {name} ")
    # past learning_starts (1,024) by two rounds of updates (256 env steps each): the run has a product to export
    result = _run(venv, work, "tfdqn", "train", "--env", "CartPole", "--total-steps", "1536")
    assert result.returncode == 0, result.stderr
    (run_dir,) = (work / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_id"] == "CartPole-v1" and summary["env_steps"] == 1536
    compared = _run(venv, work, "tfdqn", "compare", "--env", "CartPole", "--intervals", "1", "4", "--steps", "2000",
                    "--out", "cmp")
    assert compared.returncode == 0, compared.stderr
    rows = list(csv.DictReader((work / "cmp" / "intervals.csv").open()))
    assert [float(row["training_interval"]) for row in rows] == [1, 4]
    assert (work / "cmp" / "intervals.md").read_text().startswith("| interval |")
    assert all((work / "cmp" / f"intervals.{suffix}").stat().st_size > 0 for suffix in ("png", "svg"))


@pytest.mark.slow
def test_a_plain_install_names_the_extra_a_subcommand_needs_before_any_work(tmp_path):
    venv, work = plain_venv.plain(tmp_path), tmp_path / "work"
    work.mkdir()
    for absent in ("matplotlib", "rliable", "ray", "optuna", "wandb"):  # truly not installed there
        found = _run(venv, work, "python", "-c", f"import importlib.util as u; print(u.find_spec({absent!r}))")
        assert found.stdout.strip() == "None", (absent, found.stdout, found.stderr)
    asked = {"bench": [["compare", "--env", "CartPole", "--out", "cmp"],
                       ["atari100k", "--preset", "drq_eps", "--games", "Pong", "--out", "a.json"],
                       ["time-to-score", "--game", "Pong", "--target", "18", "--out", "t.json", "--plot", "curves"],
                       ["aggregate", "runs/a", "runs/b"]],
             "tune": [["tune", "--env", "CartPole", "--trials", "2", "--param", "learner.learning_rate=uniform:1e-4:1e-3"]],
             "wandb": [["train", "--env", "CartPole", "--track"]],
             "ray": [["time-to-score", "--game", "Pong", "--target", "18", "--out", "t.json", "--ray-address", "auto"],
                     ["train", "--env", "CartPole", "--actors", "ray"]]}
    for extra, commands in asked.items():
        for command in commands:
            result = _run(venv, work, "tfdqn", *command, timeout=120)
            assert (result.returncode, result.stdout, result.stderr.count("\n")) == (2, "", 1), (command, result)
            assert result.stderr.startswith(f"tfdqn {command[0]}: error: ")
            assert f'pip install "tfdqn[{extra}]"' in result.stderr, (command, result.stderr)
            assert list(work.iterdir()) == []  # refused before any run, record or folder was made
