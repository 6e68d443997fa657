"""Plot a run's learning curve: training episode returns (raw, whole games) and evaluation returns.

    python -m tools.plot_learning_curve RUN_DIR --out docs/breakout_learning_curve.png
"""

from __future__ import annotations

import csv
import pathlib
import sys

import numpy as np

from tfdqn import config as config_lib
from tfdqn.cli import OneLineErrorParser, number, run_cli
from tfdqn.errors import UserError
from tfdqn.extras import require
from tfdqn.run.csv_log import read_evaluations


def training_returns(run_dir: pathlib.Path) -> tuple[np.ndarray, np.ndarray]:
    rows = list(csv.DictReader((run_dir / "episodes.csv").open()))
    return np.array([int(r["env_steps"]) for r in rows]), np.array([float(r["return"]) for r in rows])


def eval_label(run_dir: pathlib.Path) -> str:
    """What the evaluations were played with: the run's own `exploration.eval_epsilon` (0 for CartPole,
    0.05 for Atari), read from its config.yaml."""
    if not (run_dir / "config.yaml").is_file():
        return "evaluation"
    epsilon = config_lib.build_config([run_dir / "config.yaml"], {}).exploration.eval_epsilon
    return f"evaluation (epsilon {epsilon:g})"


def eval_returns(run_dir: pathlib.Path) -> tuple[list, list]:
    """The periodic evaluations from the run's evaluations.csv (the points TensorBoard's
    `charts/eval_return` shows, read without starting TensorFlow)."""
    rows = read_evaluations(run_dir)
    return [int(row["env_steps"]) for row in rows], [float(row["return_mean"]) for row in rows]


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.plot_learning_curve", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder written by tfdqn.train")
    parser.add_argument("--out", required=True, metavar="FILE.png", help="image to write")
    parser.add_argument("--window", type=number(int), default=50, help="episodes in the moving average")
    parser.add_argument("--final", type=number(float), help="final evaluation mean to mark at the last step")
    parser.add_argument("--random", type=number(float), help="random policy's mean under the same protocol")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args) -> int:
    run_dir = pathlib.Path(args.run_dir)
    if not (run_dir / "episodes.csv").is_file():
        raise UserError(f"RUN_DIR {str(run_dir)!r} holds no episodes.csv; allowed: a run folder written by tfdqn.train")
    if args.window < 1:
        raise UserError(f"--window {args.window} is out of range; allowed: an integer >= 1")
    require("bench", "plotting a learning curve", ("matplotlib",))  # before any work: one line if it is missing
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, returns = training_returns(run_dir)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(steps, returns, ".", alpha=0.15, color="tab:blue", label="training episode (raw return)")
    if len(returns) >= args.window:
        mean = np.convolve(returns, np.ones(args.window) / args.window, mode="valid")
        ax.plot(steps[args.window - 1:], mean, color="tab:blue", label=f"training, mean of {args.window} episodes")
    eval_steps, eval_values = eval_returns(run_dir)
    if eval_steps:
        ax.plot(eval_steps, eval_values, "o-", color="tab:orange", label=eval_label(run_dir))
    if args.final is not None:
        ax.plot([steps[-1]], [args.final], "*", markersize=14, color="tab:red", label="final evaluation")
    if args.random is not None:
        ax.axhline(args.random, linestyle="--", color="gray", label="random policy")
    ax.set(xlabel="agent steps", ylabel="return (raw game score)", title=run_dir.name)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(args.out, dpi=110)
    except OSError as error:
        raise UserError(f"--out {args.out!r} cannot be written ({error.strerror}); allowed: a writable file path") from None
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
