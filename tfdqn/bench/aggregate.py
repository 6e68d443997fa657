"""Aggregates over seeds: the final evaluations and evaluation curves of several runs of one setting.

    tfdqn aggregate runs/CartPole-s0-* runs/CartPole-s1-* ... --out agg.json --plot agg

A run's score is its final evaluation (`summary.json`: the product network's mean return); its curve is
`evaluations.csv`. Over the runs: the mean, the median and the interquartile mean (IQM: the mean of the
middle half, Agarwal et al. 2021), each with a 95% stratified-bootstrap confidence interval computed by
rliable (runs resampled within each task), and the IQM curve with its band over the evaluation steps every
run has. The functions are the one way tfdqn's benchmarks aggregate runs (`tfdqn atari100k` uses them).
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import yaml


from tfdqn.cli import OneLineErrorParser, number
from tfdqn.errors import UserError
from tfdqn.extras import require
from tfdqn.run.csv_log import read_evaluations
from tfdqn.bench.report import run_benchmark, machine, publish
from tfdqn.bench.runs import finished

AGGREGATES = ("iqm", "median", "mean")


def _bootstrap(scores, aggregate, reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(point estimates, [2, k] 95% percentile intervals) of `aggregate` over a [runs, tasks] matrix, or over a
    tuple of them (each resampled on its own, within each task)."""
    from rliable import library

    np.random.seed(seed)  # rliable's bootstrap draws from NumPy's global generator
    points, intervals = library.get_interval_estimates({"runs": scores}, aggregate, reps=reps)
    return points["runs"], intervals["runs"]


def interval_estimates(scores: np.ndarray, reps: int, seed: int = 0) -> dict:
    """IQM, median and mean of a [runs, tasks] matrix, each with its 95% stratified-bootstrap interval. The
    median is of every run's score (rliable's `aggregate_median`, the median of per-task means, is the mean
    where there is one task)."""
    from rliable import metrics

    functions = (metrics.aggregate_iqm, np.median, metrics.aggregate_mean)
    points, intervals = _bootstrap(np.asarray(scores, dtype=float),
                                   lambda s: np.array([function(s) for function in functions]), reps, seed)
    estimates = {}
    for k, name in enumerate(AGGREGATES):
        estimates[name] = float(points[k])
        estimates[f"{name}_ci95"] = [float(intervals[0][k]), float(intervals[1][k])]
    return estimates


def improvement_probability(scores_x: np.ndarray, scores_y: np.ndarray, reps: int, seed: int = 0) -> dict:
    """rliable's probability of improvement of X over Y: the chance that a run of X outscores a run of Y on the
    same task (ties count half), averaged over tasks, with its 95% stratified-bootstrap interval. [runs, tasks]
    matrices; X and Y may have different numbers of runs (2 of tfdqn against a published 100)."""
    from rliable import metrics

    pair = (np.asarray(scores_x, dtype=float), np.asarray(scores_y, dtype=float))
    point, interval = _bootstrap(pair, metrics.probability_of_improvement, reps, seed)
    return {"probability": float(point), "probability_ci95": [float(interval[0][0]), float(interval[1][0])]}


def curve_estimates(curves: np.ndarray, reps: int, seed: int = 0) -> dict:
    """The IQM at each column of a [runs, points] matrix (one task), with its 95% bootstrap band."""
    import scipy.stats

    iqm_per_point = lambda s: scipy.stats.trim_mean(s, 0.25, axis=0)  # noqa: E731  (rliable's IQM, per column)
    points, intervals = _bootstrap(np.asarray(curves, dtype=float), iqm_per_point, reps, seed)
    return {"iqm": points.tolist(), "iqm_ci95_low": intervals[0].tolist(), "iqm_ci95_high": intervals[1].tolist()}


def read_run(run_dir: pathlib.Path) -> dict:
    """A finished run's env, final evaluation (and the last network's on the same games, the product's env step and
    the run clock), evaluation curve and the code it trained with (its summary's version and commit, so a record
    names the commit of each run), or a one-line error."""
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"RUN_DIR {str(run_dir)!r} is a file, not a run folder; allowed: run folders written by "
                        f"tfdqn train (a record such as docs/*.json is read by the subcommand that wrote it)")
    summary = finished(run_dir)
    if summary is None:
        raise UserError(f"RUN_DIR {str(run_dir)!r} holds no finished run; allowed: run folders with a summary.json "
                        f"of a run that ended by itself")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    curve = [(row["env_steps"], row["return_mean"]) for row in read_evaluations(run_dir)]
    return {"run_dir": str(run_dir), "env": config["env"]["id"], "seed": config["run"]["seed"],
            "final_eval_return": summary["final_eval_return_mean"],
            "last_network_eval_return": summary.get("last_network_eval_return_mean"),
            "product_env_steps": summary.get("final_network", {}).get("env_steps"),
            "run_seconds": summary.get("run_seconds"), "curve": curve, "code": summary.get("code")}


def common_curve(runs: list[dict]) -> tuple[list[int], np.ndarray]:
    """The evaluation steps every run has, and the [runs, steps] matrix of their means there."""
    steps = sorted(set.intersection(*(set(step for step, _ in run["curve"]) for run in runs)))
    return steps, np.array([[dict(run["curve"])[step] for step in steps] for run in runs])


def markdown_table(runs: list[dict], estimates: dict) -> str:
    lines = ["| aggregate over runs | final evaluation return | 95% CI |", "|---|---:|---|"]
    lines += [f"| {name.upper() if name == 'iqm' else name} | {estimates[name]:.2f} | "
              f"{estimates[name + '_ci95'][0]:.2f} to {estimates[name + '_ci95'][1]:.2f} |" for name in AGGREGATES]
    each = ", ".join(f"{run['final_eval_return']:.1f}" for run in runs)
    return "\n".join(lines) + f"\n\n{len(runs)} runs of {runs[0]['env']}: {each}.\n"


def plot(steps: list[int], curve: dict, runs: list[dict], prefix: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    axes.fill_between(steps, curve["iqm_ci95_low"], curve["iqm_ci95_high"], alpha=0.25, label="95% CI")
    axes.plot(steps, curve["iqm"], label=f"IQM of {len(runs)} runs")
    axes.set(xlabel="env steps", ylabel="evaluation return", title=runs[0]["env"])
    axes.legend()
    figure.tight_layout()
    for suffix in (".png", ".svg"):
        figure.savefig(prefix + suffix)
    plt.close(figure)


def build_parser(prog: str = "tfdqn aggregate") -> OneLineErrorParser:
    parser = OneLineErrorParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="finished runs of one env, one per seed")
    parser.add_argument("--out", metavar="FILE.json", help="results JSON (default: print only)")
    parser.add_argument("--table", metavar="FILE.md", help="also write the Markdown table here")
    parser.add_argument("--plot", metavar="PREFIX", help="write the IQM curve with its band as PREFIX.png and .svg")
    parser.add_argument("--reps", type=number(int), default=50_000, help="bootstrap resamples for the intervals")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args) -> int:
    if args.reps < 1:
        raise UserError(f"--reps {args.reps} is too small; allowed: 1 or more")
    require("bench", "this subcommand")
    runs = [read_run(pathlib.Path(path)) for path in args.run_dirs]
    envs = sorted({run["env"] for run in runs})
    if len(envs) > 1:
        raise UserError(f"RUN_DIR runs of {', '.join(envs)}: returns of different envs do not aggregate; allowed: "
                        f"runs of one env")
    estimates = interval_estimates(np.array([[run["final_eval_return"]] for run in runs]), args.reps)
    steps, matrix = common_curve(runs)
    curve = {"env_steps": steps, **curve_estimates(matrix, args.reps)} if steps else None
    if args.plot and curve:
        plot(steps, curve, runs, args.plot)
    results = {"command": args.command, "machine": machine(), "runs": runs,
               "final_eval_return": estimates, "curve": curve}
    table = markdown_table(runs, estimates)
    if args.out:
        publish(results, table, args.out, args.table)
    else:
        print(table, end="")
    return 0


def main(argv: list[str] | None = None, prog: str = "tfdqn aggregate") -> int:
    return run_benchmark(build_parser, _main, argv, prog)


if __name__ == "__main__":
    sys.exit(main(prog="python -m tfdqn.bench.aggregate"))
