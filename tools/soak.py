"""Soak: a long CartPole run's resident memory, sampled every log interval, before and after the
replay fills. Flat RSS after the fill means nothing grows per step.

    python -m tools.soak --steps 200000 --capacity 20000 --out DIR

Writes DIR/soak.csv (env step, RSS), DIR/soak.png and prints the growth after the fill as JSON.
"""

from __future__ import annotations

import csv
import json
import pathlib
import sys

from tfdqn.cli import OneLineErrorParser, number, run_cli, start_tensorflow
from tfdqn.config import CONFIG_DIR, build_config
from tfdqn.extras import require
from tfdqn.run.run_dir import make_run_dir


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=number(int), default=200_000, help="env steps (default 200000)")
    parser.add_argument("--capacity", type=number(int), default=20_000, help="replay transitions (fills early)")
    parser.add_argument("--training-interval", type=number(int), default=4, help="env steps per update (default 4)")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the run, soak.csv and soak.png")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args) -> int:
    config = build_config([CONFIG_DIR / "cartpole.yaml"], {
        "run.total_steps": args.steps, "replay.capacity": args.capacity,
        "run.training_interval": args.training_interval, "run.log_every": max(args.steps // 200, 1),
        "run.checkpoint_every": max(args.steps // 4, 1), "run.final_eval_episodes": 1})
    require("bench", "the soak's plot", ("matplotlib",))  # before the long run, not after it
    out = pathlib.Path(args.out)
    make_run_dir(out)  # a folder that cannot be made is a one-line error
    start_tensorflow()
    from tfdqn.telemetry.tensorboard import read_scalars
    from tfdqn.run.loop import train

    summary = train(config, out / "run", quiet=True)
    points = read_scalars(out / "run", "system/rss_bytes")
    with (out / "soak.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env_steps", "rss_bytes"])
        writer.writerows(points)
    after_fill = [rss for step, rss in points if step >= 2 * args.capacity]
    growth = (after_fill[-1] - after_fill[0]) if after_fill else None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([p[0] for p in points], [p[1] / 2**20 for p in points])
    ax.axvline(args.capacity, linestyle="--", color="gray", label="replay full")
    ax.set(xlabel="env steps", ylabel="RSS (MiB)", title=f"CartPole soak, {args.steps:,} steps")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "soak.png", dpi=110)
    print(json.dumps({"env_steps": summary["env_steps"], "replay_capacity": args.capacity,
                      "rss_mib_after_fill_first": round(after_fill[0] / 2**20, 1) if after_fill else None,
                      "rss_mib_last": round(points[-1][1] / 2**20, 1),
                      "rss_growth_mib_after_fill": round(growth / 2**20, 1) if growth is not None else None,
                      "wall_seconds": summary["wall_seconds"]}))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
