"""Did a change make training slower? bench.py's Breakout trainer rows for two checkouts, or for settings
within this one, run alternately in one invocation, so each ratio compares figures taken minutes apart on
one machine.

    git worktree add /tmp/base REV
    python -m tools.bench_ab --base /tmp/base [--rounds 3] [--steps 3000] --out ab.json
    python -m tools.bench_ab --variant raw:replay.compression=none --variant zstd:replay.compression=zstd \
        --variant prefetch:replay.compression=zstd,replay.prefetch=true --intervals 4 1 --envs 1 --out ab.json
    python -m tools.bench_ab --base /tmp/base --set replay.prefetch=true --intervals 4 1 --envs 1 --out ab.json

Each round runs `trainer_steps_per_sec` (bench.py's trainer row: Breakout or --env with --preset, learning
from env step 500, a 50,000-slot replay) once per arm, interval and env count: with `--base`, the base checkout's own
tools/bench.py and then this one's, each in a child process started in its checkout, so training with its
own checkout's tfdqn; with `--variant LABEL[:KEY=VALUE,...]`, this checkout with each variant's `--set`
values; `--set KEY=VALUE` goes to every arm. The first arm is the reference. Prints a table of medians and each arm's ratio to the reference,
per round too, and writes every figure to the JSON file.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys

from tfdqn.atomic import write_json
from tfdqn.cli import OneLineErrorParser, number, run_cli
from tfdqn.errors import UserError
from tfdqn.run.provenance import provenance

REPO = pathlib.Path(__file__).resolve().parent.parent


def trainer_figure(checkout: pathlib.Path, steps: int, num_envs: int, interval: int = 4,
                   settings: tuple[str, ...] = (), env: str = "Breakout", preset: str | None = None) -> float:
    """One trainer row, measured by `checkout`'s own bench.py in a child process started in `checkout`, so
    with its own tfdqn (the child, and the `python -m tfdqn.train` runs it starts there, find the
    checkout's folder first on their path, ahead of an installed tfdqn). Interval 4, Breakout and no
    settings or preset call the row as every earlier bench.py takes it."""
    extra = "".join(f", {setting!r}" for setting in settings) + (f", interval={interval}" if interval != 4 else "")
    extra += (f", env={env!r}" if env != "Breakout" else "") + (f", preset={preset!r}" if preset else "")
    code = (f"from tools.bench import trainer_steps_per_sec; "
            f"print(trainer_steps_per_sec({steps}, 500, 50_000, {num_envs}{extra}))")
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


def variant(text: str) -> tuple[str, tuple[str, ...]]:
    """`LABEL` or `LABEL:key=value,key=value` -> (label, ("key=value", ...))."""
    label, _, settings = text.partition(":")
    pairs = tuple(filter(None, settings.split(",")))
    if not label or any("=" not in pair for pair in pairs):
        raise argparse.ArgumentTypeError(f"{text!r} is not a variant; allowed: LABEL or LABEL:KEY=VALUE,...")
    return label, pairs


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.bench_ab", description=__doc__.split("\n\n")[0])
    arms = parser.add_mutually_exclusive_group(required=True)
    arms.add_argument("--base", type=pathlib.Path, help="the other checkout (e.g. a git worktree), the reference")
    arms.add_argument("--variant", action="append", type=variant, metavar="LABEL[:KEY=VALUE,...]",
                      help="settings to compare within this checkout (two or more; the first is the reference)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting every arm trains with (repeatable), before a variant's own")
    parser.add_argument("--env", default="Breakout", help="the game (default Breakout)")
    parser.add_argument("--preset", help="a recipe, as for tfdqn.train (default: the env's own config)")
    parser.add_argument("--intervals", type=number(int), nargs="+", default=[4], metavar="N",
                        help="training intervals (default 4)")
    parser.add_argument("--envs", type=number(int), nargs="+", default=[1, 8], metavar="N",
                        help="env counts (default 1 and 8)")
    parser.add_argument("--rounds", type=number(int), default=3, help="alternating rounds (default 3)")
    parser.add_argument("--steps", type=number(int), default=3_000,
                        help="env steps per trainer run (bench --quick: 3000)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="JSON file to write")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _arms(args) -> list[tuple[str, pathlib.Path, tuple[str, ...]]]:
    """(label, checkout, settings) per arm, the reference first."""
    if any("=" not in setting for setting in args.set):
        raise UserError(f"--set {' '.join(args.set)}: allowed: KEY=VALUE")
    if args.base is not None:
        if not (args.base / "tools" / "bench.py").is_file():
            raise UserError(f"--base {str(args.base)!r} holds no tools/bench.py; allowed: a checkout of this project")
        return [("base", args.base, tuple(args.set)), ("new", REPO, tuple(args.set))]
    labels = [label for label, _ in args.variant]
    if len(args.variant) < 2 or len(set(labels)) < len(labels):
        raise UserError(f"--variant {' '.join(labels)} is too few or repeats a label; allowed: two or more variants "
                        "with distinct labels")
    return [(label, REPO, (*args.set, *settings)) for label, settings in args.variant]


def _main(args) -> int:
    if args.rounds < 1 or args.steps < 1 or min(args.intervals) < 1 or min(args.envs) < 1:
        raise UserError(f"--rounds {args.rounds} / --steps {args.steps} / --intervals {args.intervals} / --envs "
                        f"{args.envs} is out of range; allowed: integers >= 1")
    arms = _arms(args)
    rows = [(interval, envs) for interval in args.intervals for envs in args.envs]
    row_names = {row: f"interval {row[0]}, {row[1]} env{'s' * (row[1] > 1)}" for row in rows}
    figures = {label: {row_names[row]: [] for row in rows} for label, _, _ in arms}
    for round_ in range(args.rounds):
        for label, checkout, settings in arms:
            for row in rows:
                value = trainer_figure(checkout, args.steps, row[1], row[0], settings, args.env, args.preset)
                figures[label][row_names[row]].append(value)
                print(f"round {round_ + 1} {label} {row_names[row]}: {value:.1f} env steps/s", flush=True)
    reference = arms[0][0]
    lines = ["| row | arm | env steps/s (median) | / " + reference + " | per round |", "|---|---|---:|---:|---|"]
    for name in row_names.values():
        ref = figures[reference][name]
        for label, _, _ in arms:
            own = figures[label][name]
            rounds = ", ".join(f"{n / b:.3f}" for b, n in zip(ref, own))
            ratio = statistics.median(own) / statistics.median(ref)
            lines.append(f"| {name} | {label} | {statistics.median(own):.1f} | {ratio:.3f} | {rounds} |")
    table = "\n".join(lines)
    write_json(args.out, {"command": " ".join(["python -m tools.bench_ab", *sys.argv[1:]]), "code": provenance(),
                          "arms": {label: {"checkout": str(checkout), "settings": list(settings)}
                                   for label, checkout, settings in arms},
                          "env": args.env, "preset": args.preset, "steps": args.steps, "figures": figures,
                          "table": table})
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
