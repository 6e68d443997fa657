"""The envs students meet first, each trained with its packaged config on fixed seeds: FrozenLake-v1 (slippery),
Taxi-v4 with and without its legal-action masks, Blackjack-v1. Records each run's product and last network, the
first env step whose evaluation reached the target, and the illegal actions taken in training (TensorBoard's
charts/illegal_actions) and in a 100-game evaluation of the product (`tfdqn evaluate`); writes the JSON record
and a Markdown table. A finished run (its summary.json) is read, not run again, so the script resumes.

    python -m tools.own_envs --out docs/own-envs.json --table docs/own-envs.md
"""

from __future__ import annotations

import csv
import json
import pathlib
import shutil
import subprocess
import sys

from tfdqn.atomic import atomic_write, write_json
from tfdqn.cli import OneLineErrorParser, run_cli

# (name, env, extra train arguments, target the evaluation mean must reach, what the target means)
VARIANTS = [
    ("FrozenLake-v1", "FrozenLake-v1", [], 0.70, "success rate over 1,000 greedy games >= 0.70 (optimal: about 0.74)"),
    ("Taxi-v4", "Taxi-v4", [], 7.5, "mean return over 100 greedy games >= 7.5, with its action masks"),
    ("Taxi-v4, no masks", "Taxi-v4", ["--set", "env.mask_actions=false", "--total-steps", "300000"], 7.5,
     "the same without masks (the mask is read only to count illegal actions), 300,000 env steps"),
    ("Blackjack-v1", "Blackjack-v1", [], -0.08, "mean return over 10,000 greedy games >= -0.08 (basic strategy: "
                                                "about -0.05)"),
]
SEEDS = (0, 1, 2)


def _folder(name: str, seed: int) -> str:
    return name.replace(", ", "-").replace(" ", "-") + f"-s{seed}"


def _train(env: str, extra: list, seed: int, logdir: pathlib.Path, folder: str) -> list[str]:
    command = ["tfdqn", "train", "--env", env, "--seed", str(seed), *extra, "--quiet", "--logdir", str(logdir),
               "--run-name", folder]
    run_dir = logdir / folder
    if not (run_dir / "summary.json").is_file():
        shutil.rmtree(run_dir, ignore_errors=True)  # a run cut short: these take minutes, so it starts again
        subprocess.run([sys.executable, "-m", "tfdqn.train", *command[2:]], check=True)
    return command


def _first_reaching(run_dir: pathlib.Path, target: float) -> int | None:
    with open(run_dir / "evaluations.csv", newline="") as rows:
        return next((int(row["env_steps"]) for row in csv.DictReader(rows) if float(row["return_mean"]) >= target),
                    None)


def _record(name: str, env: str, extra: list, target: float, seed: int, logdir: pathlib.Path) -> dict:
    from tfdqn.telemetry.tensorboard import read_scalars

    folder = _folder(name, seed)
    command = _train(env, extra, seed, logdir, folder)
    run_dir = logdir / folder
    summary = json.loads((run_dir / "summary.json").read_text())
    record = {"variant": name, "env": env, "seed": seed, "command": " ".join(command[:-4]),
              "product_return_mean": summary["final_eval_return_mean"], "games": summary["final_eval_episodes"],
              "product_env_steps": summary["final_network"]["env_steps"],
              "last_network_return_mean": summary["last_network_eval_return_mean"],
              "first_evaluation_at_target": _first_reaching(run_dir, target), "target": target}
    illegal = read_scalars(run_dir, "charts/illegal_actions")
    if illegal:
        record["illegal_actions_training"] = int(sum(value for _, value in illegal))
        evaluated = subprocess.run([sys.executable, "-m", "tfdqn.evaluate", str(run_dir), "--checkpoint", "best",
                                    "--episodes", "100"], check=True, capture_output=True, text=True)
        report = json.loads(evaluated.stdout.strip().splitlines()[-1])
        record["evaluation"] = {key: report[key] for key in ("episodes", "return_mean", "illegal_actions")}
    return record


PAGE = """# The envs students meet first

Each env trains with the config tfdqn ships for it (`tfdqn/configs/frozenlake.yaml`, `taxi.yaml`,
`blackjack.yaml`), seeds 0, 1 and 2, fixed before any run, every finished run listed. The product is the
best-evaluated network (`run.eval_episodes` games per periodic evaluation), played on new games at the end;
"first evaluation at target" is the first periodic evaluation whose mean reached the target. Made by

    python -m tools.own_envs --out docs/own-envs.json --table docs/own-envs.md

(each run is `tfdqn train --env ENV --seed S`, the command column of docs/own-envs.json); written at commit
{commit}, on a 2-core machine shared with two Atari runs. {note}

Targets: {targets}

"""


def _table(records: list[dict]) -> str:
    lines = ["| env | seed | product | last network | first evaluation at target (env step) | illegal actions: "
             "training / 100 evaluation games |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in records:
        illegal = (f"{r['illegal_actions_training']:,} / {r['evaluation']['illegal_actions']}"
                   if "evaluation" in r else "no mask")
        reached = f"{r['first_evaluation_at_target']:,}" if r["first_evaluation_at_target"] is not None else "not reached"
        lines.append(f"| {r['variant']} | {r['seed']} | {r['product_return_mean']:.3f} ({r['games']:,} games) | "
                     f"{r['last_network_return_mean']:.3f} | {reached} | {illegal} |")
    return "\n".join(lines) + "\n"


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.own_envs", description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", default="runs/own-envs")
    parser.add_argument("--out", required=True, help="the JSON record")
    parser.add_argument("--table", help="also the Markdown page here")
    parser.add_argument("--variants", nargs="+", help="only these (names as in the table)")
    parser.add_argument("--note", default="", help="where the runs' code came from, where not the commit that "
                                                   "writes the record (kept in the record and the page)")
    return parser


def _main(args) -> int:
    out = pathlib.Path(args.out)
    records = json.loads(out.read_text())["runs"] if out.is_file() else []
    for name, env, extra, target, _ in VARIANTS:
        if args.variants and name not in args.variants:
            continue
        for seed in SEEDS:
            records = [r for r in records if (r["variant"], r["seed"]) != (name, seed)]
            records.append(_record(name, env, extra, target, seed, pathlib.Path(args.logdir)))
            write_json(out, {"commit": _commit(), "note": args.note, "seeds": list(SEEDS),
                             "targets": {v[0]: v[4] for v in VARIANTS}, "runs": records})
            if args.table:
                targets = "; ".join(f"{v[0]}: {v[4]}" for v in VARIANTS)
                page = PAGE.format(commit=_commit(), targets=targets, note=args.note)
                atomic_write(pathlib.Path(args.table), page + _table(records))
    return 0


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
