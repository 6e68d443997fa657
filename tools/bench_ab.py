"""Did a change make training slower? bench.py's Breakout trainer rows for this checkout and another,
run alternately in one invocation, so the ratio compares figures taken minutes apart on one machine.

    git worktree add /tmp/base REV
    python -m tools.bench_ab --base /tmp/base [--rounds 3] [--steps 3000] --out ab.json

Each round runs `trainer_steps_per_sec` (the `--quick` rows `train_steps_per_sec_interval4`, one env,
and `train_steps_per_sec_interval4_envs`, 8 envs) from the base checkout's own tools/bench.py, then
from this one's, each in a child process started in its checkout, so training with its own checkout's
tfdqn. Prints a table of medians and the new / base ratios, and writes every figure to the JSON file.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys

from tfdqn.atomic import write_json
from tfdqn.cli import OneLineErrorParser, number, run_cli
from tfdqn.errors import UserError

REPO = pathlib.Path(__file__).resolve().parent.parent

ROWS = {"train_steps_per_sec_interval4": 1, "train_steps_per_sec_interval4_envs": 8}  # row -> envs


def trainer_figure(checkout: pathlib.Path, steps: int, num_envs: int) -> float:
    """One trainer row, measured by `checkout`'s own bench.py in a child process started in `checkout`, so
    with its own tfdqn (the child, and the `python -m tfdqn.train` runs it starts there, find the
    checkout's folder first on their path, ahead of an installed tfdqn)."""
    code = (f"from tools.bench import trainer_steps_per_sec; "
            f"print(trainer_steps_per_sec({steps}, 500, 50_000, {num_envs}))")
    env = None
    if not (checkout / "tools" / "__init__.py").is_file():
        # A base from before tools/ was a package: its bench.py imports its neighbours by bare name
        # (`from bench_family import ...`), so its tools/ folder goes on this child's PYTHONPATH, and the
        # child hands the trainer runs it starts the environment they had before.
        inherited = os.environ.get("PYTHONPATH")
        tools = str(checkout.resolve() / "tools")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tools, inherited]))}
        restore = "os.environ.pop('PYTHONPATH')" if inherited is None else f"os.environ['PYTHONPATH'] = {inherited!r}"
        code = f"import os; {restore}; " + code.replace("from tools.bench import", "from bench import")
    result = subprocess.run([sys.executable, "-c", code], cwd=checkout, env=env, capture_output=True, text=True,
                            check=True)
    return float(result.stdout.strip().splitlines()[-1])


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.bench_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=pathlib.Path, required=True, help="the other checkout (e.g. a git worktree)")
    parser.add_argument("--rounds", type=number(int), default=3, help="alternating rounds (default 3)")
    parser.add_argument("--steps", type=number(int), default=3_000,
                        help="env steps per trainer run (bench --quick: 3000)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="JSON file to write")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args) -> int:
    if not (args.base / "tools" / "bench.py").is_file():
        raise UserError(f"--base {str(args.base)!r} holds no tools/bench.py; allowed: a checkout of this project")
    if args.rounds < 1 or args.steps < 1:
        raise UserError(f"--rounds {args.rounds} / --steps {args.steps} is out of range; allowed: integers >= 1")
    figures = {name: {row: [] for row in ROWS} for name in ("base", "new")}
    for round_ in range(args.rounds):
        for name, checkout in (("base", args.base), ("new", REPO)):
            for row, num_envs in ROWS.items():
                figures[name][row].append(trainer_figure(checkout, args.steps, num_envs))
                print(f"round {round_ + 1} {name} {row}: {figures[name][row][-1]:.1f} env steps/s", flush=True)
    lines = ["| row | base (median) | new (median) | new / base | per round |", "|---|---:|---:|---:|---|"]
    for row in ROWS:
        base, new = (statistics.median(figures[name][row]) for name in ("base", "new"))
        rounds = ", ".join(f"{n / b:.3f}" for b, n in zip(figures["base"][row], figures["new"][row]))
        lines.append(f"| {row} | {base:.1f} | {new:.1f} | {new / base:.3f} | {rounds} |")
    table = "\n".join(lines)
    write_json(args.out, {"command": " ".join(["python -m tools.bench_ab", *sys.argv[1:]]),
                          "base": str(args.base), "steps": args.steps, "figures": figures, "table": table})
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
