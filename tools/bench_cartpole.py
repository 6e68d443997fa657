"""What a CartPole user waits for and what they end with: the wall-clock from starting the process to the
first greedy evaluation that solves the task (mean return >= 475 over 10 games), and the final
evaluation of the network each run reports and exports, for tfdqn and, with `--peer sb3`, for
Stable-Baselines3's DQN with the RL zoo's tuned hyperparameters, seeds interleaved in one run. Like with like:
each side's product (tfdqn's best-evaluated network; the model SB3's `EvalCallback` keeps, on the same
evaluation cadence and games) against the other's, and each side's last network against the other's.

    python -m tools.bench_cartpole --seeds 10 --peer sb3 --out docs/bench-cartpole.json
    python -m tools.bench_cartpole --seeds 5 --set learner.learning_rate=1e-3   # one point of a sweep

Each run is its own process, timed from the moment the bench starts it, so imports, graph tracing
and env creation count (reported again on their own as `startup_seconds`: to tfdqn's first env step,
to SB3's `learn`). Evaluations are part of the wait too; both sides play their 10 games side by side.
Prints a table per impl, one row per seed with its time to solve and final evaluation, and writes
every run to `--out` as JSON (`runs`: impl, seed, solved, solve_env_steps, solve_wall_seconds,
final_eval_return (the product's), last_network_eval_return, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tfdqn.atomic import write_json  # noqa: E402
from tfdqn.bench.report import run_benchmark  # noqa: E402
from tfdqn.cli import OneLineErrorParser, last_line, number  # noqa: E402
from tfdqn.errors import RunFailure, UserError  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
PROG = "python -m tools.bench_cartpole"

SOLVED = 475.0  # mean greedy return that counts as solved (CartPole-v1 caps episodes at 500)


def first_solve(evaluations: list[tuple[int, float, float]], started: float) -> dict:
    """From (env steps, mean return, Unix time) per evaluation, the first that solves."""
    for steps, mean, when in evaluations:
        if mean >= SOLVED:
            return {"solved": True, "solve_env_steps": steps, "solve_wall_seconds": round(when - started, 3)}
    return {"solved": False, "solve_env_steps": None, "solve_wall_seconds": None}


def run_tfdqn(seed: int, args: argparse.Namespace, logdir: pathlib.Path) -> dict:
    from tfdqn.telemetry.tensorboard import read_events

    import tensorflow as tf

    name = f"seed{seed}"
    command = [sys.executable, "-m", "tfdqn.train", "--env", "CartPole", "--seed", str(seed), "--quiet",
               "--logdir", str(logdir), "--run-name", name, "--total-steps", str(args.total_steps),
               "--set", f"run.eval_every={args.eval_every}", "--set", "run.eval_episodes=10",
               "--set", "run.checkpoint_every=0", *(a for item in args.set for a in ("--set", item))]
    started = time.time()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    ended = time.time()
    if result.returncode != 0:
        raise RunFailure(f"tfdqn seed {seed} failed: {last_line(result.stderr)}")
    events = read_events(logdir / name)
    evaluations = [(e.step, float(tf.make_ndarray(e.tensor_proto)), e.wall_time)
                   for e in events.Tensors("charts/eval_return")]
    first_event = min(e.wall_time for e in events.Tensors("hyperparameters"))  # written just before the loop
    summary = json.loads((logdir / name / "summary.json").read_text())
    return {"impl": "tfdqn", "seed": seed, **first_solve(evaluations, started),
            "final_eval_return": summary["final_eval_return_mean"], "final_network": summary["final_network"],
            "last_network_eval_return": summary["last_network_eval_return_mean"],
            "startup_seconds": round(first_event - started, 3),
            "total_wall_seconds": round(ended - started, 3), "evaluations": [(s, m) for s, m, _ in evaluations]}


def run_sb3(seed: int, args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "tools.peer_sb3_cartpole", "--seed", str(seed),
               "--total-steps", str(args.total_steps), "--eval-every", str(args.eval_every)]
    started = time.time()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    ended = time.time()
    if result.returncode != 0:
        raise RunFailure(f"sb3 seed {seed} failed: {last_line(result.stderr)}")
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    evaluations = [(e["env_steps"], e["return_mean"], e["time"]) for e in events if e["event"] == "eval"]
    learn_start = next(e["time"] for e in events if e["event"] == "learn_start")
    final = {e["event"]: e for e in events if e["event"] in ("final", "final_best")}
    return {"impl": "sb3", "seed": seed, **first_solve(evaluations, started),
            "final_eval_return": final["final_best"]["return_mean"],
            "best_evaluation": final["final_best"]["best_evaluation"],
            "last_network_eval_return": final["final"]["return_mean"],
            "startup_seconds": round(learn_start - started, 3), "total_wall_seconds": round(ended - started, 3),
            "evaluations": [(s, m) for s, m, _ in evaluations]}


def _stats(values: list) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else {}


def summarize(runs: list[dict]) -> dict:
    """Per impl: solved count, solve time and steps, startup, final return; and tfdqn / sb3 medians."""
    summary = {}
    for impl in dict.fromkeys(r["impl"] for r in runs):
        mine = [r for r in runs if r["impl"] == impl]
        solved = [r for r in mine if r["solved"]]
        summary[impl] = {"runs": len(mine), "solved": len(solved),
                         "final_eval_solved": sum(r["final_eval_return"] >= SOLVED for r in mine),
                         "last_network_solved": sum(r["last_network_eval_return"] >= SOLVED for r in mine),
                         "last_network_eval_return": _stats([r["last_network_eval_return"] for r in mine]),
                         "solve_wall_seconds": _stats([r["solve_wall_seconds"] for r in solved]),
                         "solve_env_steps": _stats([r["solve_env_steps"] for r in solved]),
                         "startup_seconds": _stats([r["startup_seconds"] for r in mine]),
                         "final_eval_return": _stats([r["final_eval_return"] for r in mine]),
                         "total_wall_seconds": _stats([r["total_wall_seconds"] for r in mine])}
    tfdqn, sb3 = summary.get("tfdqn", {}), summary.get("sb3", {})
    if tfdqn.get("solve_wall_seconds") and sb3.get("solve_wall_seconds"):
        summary["solve_time_ratio_tfdqn_over_sb3"] = round(
            tfdqn["solve_wall_seconds"]["median"] / sb3["solve_wall_seconds"]["median"], 3)
    return summary


def table(summary: dict) -> str:
    def cell(stats: dict, digits: int = 1) -> str:
        return f"{stats['median']:.{digits}f} ({stats['min']:.{digits}f}-{stats['max']:.{digits}f})" if stats else "-"

    lines = ["| impl | solved | solve s, median (min-max) | solve env steps, median | startup s | "
             f"product (best-evaluated network): final eval, median (min-max) | product >= {SOLVED:g} | "
             f"last network: final eval, median (min-max) | last >= {SOLVED:g} | whole run s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for impl, s in summary.items():
        if isinstance(s, dict):
            steps = s["solve_env_steps"]
            lines.append(f"| {impl} | {s['solved']}/{s['runs']} | {cell(s['solve_wall_seconds'])} | "
                         f"{steps['median'] if steps else '-'} | {cell(s['startup_seconds'])} | "
                         f"{cell(s['final_eval_return'])} | {s['final_eval_solved']}/{s['runs']} | "
                         f"{cell(s['last_network_eval_return'])} | {s['last_network_solved']}/{s['runs']} | "
                         f"{cell(s['total_wall_seconds'])} |")
    if "solve_time_ratio_tfdqn_over_sb3" in summary:
        lines.append(f"\ntfdqn / sb3 median time to solve: {summary['solve_time_ratio_tfdqn_over_sb3']}")
    return "\n".join(lines)


def seed_table(runs: list[dict]) -> str:
    """One row per seed: each impl's steps and seconds to solve and its final evaluation."""
    impls = list(dict.fromkeys(r["impl"] for r in runs))
    by_seed = {(r["impl"], r["seed"]): r for r in runs}
    lines = ["| seed | " + " | ".join(f"{i} solve steps | {i} solve s | {i} product | {i} last" for i in impls) + " |",
             "|---:|" + "---:|" * 4 * len(impls)]
    for seed in dict.fromkeys(r["seed"] for r in runs):
        cells = []
        for impl in impls:
            r = by_seed.get((impl, seed))
            cells += ["-"] * 4 if r is None else [f"{r['solve_env_steps']:,}" if r["solved"] else "never",
                                                   f"{r['solve_wall_seconds']:.1f}" if r["solved"] else "-",
                                                   f"{r['final_eval_return']:.1f}", f"{r['last_network_eval_return']:.1f}"]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_parser(prog: str = PROG) -> OneLineErrorParser:
    parser = OneLineErrorParser(prog=prog, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=number(int), default=10, help="seeds to run (default 10)")
    parser.add_argument("--first-seed", type=number(int), default=0, help="first seed (default 0)")
    parser.add_argument("--peer", action="append", choices=["sb3"], default=[],
                        help="also run SB3's DQN (needs the compare extra: pip install -e '.[compare]')")
    parser.add_argument("--eval-every", type=number(int), default=2000,
                        help="env steps between evaluations (default 2000)")
    parser.add_argument("--total-steps", type=number(int), default=50_000, help="env steps per run (default 50000)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="tfdqn config override (repeatable): one point of a sweep")
    parser.add_argument("--no-tfdqn", action="store_true", help="run only the peer")
    parser.add_argument("--out", metavar="FILE.json", help="write the runs and the summary here")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args: argparse.Namespace) -> int:
    for name in ("seeds", "eval_every", "total_steps"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} {getattr(args, name)} is out of range; "
                            f"allowed: an integer >= 1")
    runs = []
    with tempfile.TemporaryDirectory() as logdir:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            if not args.no_tfdqn:
                runs.append(run_tfdqn(seed, args, pathlib.Path(logdir)))
                print(json.dumps({k: v for k, v in runs[-1].items() if k != "evaluations"}), flush=True)
            if "sb3" in args.peer:
                runs.append(run_sb3(seed, args))
                print(json.dumps({k: v for k, v in runs[-1].items() if k != "evaluations"}), flush=True)
    summary = summarize(runs)
    print(seed_table(runs))
    print()
    print(table(summary))
    if args.out:
        write_json(pathlib.Path(args.out), {"command": args.command,
                                            "overrides": args.set, "eval_every": args.eval_every,
                                            "total_steps": args.total_steps, "summary": summary, "runs": runs})
    return 0


def main(argv=None) -> int:
    """The bench with `argv` (default: this process's), which its record names as the command that ran it."""
    return run_benchmark(build_parser, _main, argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
