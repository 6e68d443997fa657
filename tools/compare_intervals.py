"""Sweep `training_interval`: one training run per interval, then a CSV, a Markdown table and a plot.

    python tools/compare_intervals.py --env CartPole --intervals 1 2 4 8 16 --steps 4000 --out DIR

Every run uses the same seed and config and starts learning after 5% of its steps, so most of the run
is learning. Each run's TensorBoard logs go to DIR/interval_<K>, so `tensorboard --logdir DIR`
overlays them. The runs go through `tfdqn.run.loop.train`, the same loop as `python -m tfdqn.train`.
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from tfdqn import config as config_lib  # noqa: E402
from tfdqn.cli import OneLineErrorParser, number, run_cli, start_tensorflow  # noqa: E402
from tfdqn.errors import UserError  # noqa: E402
from tfdqn.run.run_dir import choose_run_dir  # noqa: E402
from tfdqn.run.signals import exit_code  # noqa: E402

BASE_COLUMNS = ["training_interval", "env_steps", "updates", "wall_seconds", "env_steps_per_sec", "updates_per_sec",
                "updates_per_env_step", "learner_busy_share", "cpu_util"]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python tools/compare_intervals.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole", help="env name or id, as for tfdqn.train")
    parser.add_argument("--intervals", type=number(int), nargs="+", default=[1, 2, 4, 8, 16], metavar="K",
                        help="training intervals to compare (env steps per update)")
    parser.add_argument("--steps", type=number(int), default=4000, metavar="N", help="env steps per run")
    parser.add_argument("--learning-starts", type=number(int), metavar="N", help="default: 5%% of --steps, at least 100")
    parser.add_argument("--seed", type=number(int), default=0, help="seed of every run (default 0)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any config key")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the runs, CSV, table and plot")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def make_config(args: argparse.Namespace, interval: int) -> config_lib.DQNConfig:
    """The env's config as `python -m tfdqn.train --env` resolves it, with the sweep's run settings and a
    replay as large as the run."""
    learning_starts = args.learning_starts if args.learning_starts is not None else max(args.steps // 20, 100)
    overrides = {"replay.capacity": max(args.steps, 1000), **config_lib.parse_set(args.set), "env.id": args.env,
                 "run.total_steps": args.steps, "run.training_interval": interval, "run.seed": args.seed,
                 "run.learning_starts": learning_starts, "run.log_every": max(args.steps // 10, 1),
                 "run.checkpoint_every": 0, "run.eval_every": 0, "run.final_eval_episodes": 1}
    return config_lib.resolve_config([], overrides)


def row_from_summary(summary: dict) -> dict:
    row = {key: summary.get(key) for key in BASE_COLUMNS if key in summary}
    row["updates_per_env_step"] = round(summary["updates"] / summary["env_steps"], 4)
    if "gpu_util" in summary:
        row["gpu_util"] = summary["gpu_util"]
    row.update({f"share_{k}": v for k, v in summary["phase_shares"].items()})
    return row


def write_table(rows: list[dict], out: pathlib.Path, gpu: str) -> str:
    columns = list(rows[0])
    with (out / "intervals.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(row[c]) for c in columns) + " |" for row in rows]
    table = "\n".join(lines) + f"\n\nGPU: {gpu}" + ("" if gpu != "no GPU" else " (gpu_util not measured)") + "\n"
    (out / "intervals.md").write_text(table)
    return table


def plot(rows: list[dict], out: pathlib.Path, env_id: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = [r["training_interval"] for r in rows]
    fig, (rate, share) = plt.subplots(1, 2, figsize=(10, 4))
    rate.plot(k, [r["env_steps_per_sec"] for r in rows], "o-", label="env steps/s")
    rate.plot(k, [r["updates_per_sec"] for r in rows], "s-", label="updates/s")
    rate.set(xscale="log", yscale="log", xlabel="training_interval (env steps per update)", ylabel="per second",
             title=f"{env_id}: throughput")
    rate.set_xticks(k, [str(v) for v in k])
    rate.minorticks_off()
    rate.legend()
    share.plot(k, [r["learner_busy_share"] for r in rows], "o-", label="learner busy share")
    share.plot(k, [r["share_env_step"] for r in rows], "^-", label="env step share")
    share.plot(k, [r["share_act"] for r in rows], "v-", label="act share")
    if rows[0].get("cpu_util") is not None:
        share.plot(k, [r["cpu_util"] for r in rows], "x--", label="CPU utilisation")
    if "gpu_util" in rows[0]:
        share.plot(k, [r["gpu_util"] for r in rows], "d--", label="GPU utilisation")
    share.set(xscale="log", xlabel="training_interval (env steps per update)", ylabel="share of wall time",
              ylim=(0, 1.05), title=f"{env_id}: where the time goes")
    share.set_xticks(k, [str(v) for v in k])
    share.minorticks_off()
    share.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "intervals.png", dpi=110)


SWEEP_KEYS = ("run.total_steps", "run.training_interval", "run.seed", "run.learning_starts", "run.log_every",
              "run.checkpoint_every", "run.eval_every", "run.final_eval_episodes", "env.id")


def _main(args: argparse.Namespace) -> int:
    if args.steps < 1 or any(k < 1 for k in args.intervals) or len(set(args.intervals)) != len(args.intervals):
        raise UserError(f"--steps {args.steps} / --intervals {args.intervals}: allowed: integers >= 1, "
                        f"each interval once")
    fixed = [key for key in config_lib.parse_set(args.set) if key in SWEEP_KEYS]
    if fixed:
        raise UserError(f"--set {fixed[0]} is set by the sweep itself; allowed: the tool's own flags for it")
    out = pathlib.Path(args.out)
    configs = {k: make_config(args, k) for k in args.intervals}  # every config validated before any run
    run_dirs = {k: choose_run_dir(str(out), f"interval_{k}", configs[k]) for k in args.intervals}
    start_tensorflow()
    from tfdqn.run.loop import train

    rows, gpu, env_id = [], "no GPU", args.env
    for k in args.intervals:
        print(f"training_interval {k}: {args.steps} env steps ...", flush=True)
        summary = train(configs[k], run_dirs[k], quiet=True)
        if "stopped_by" in summary:
            print(f"stopped by {summary['stopped_by']} during training_interval {k}", file=sys.stderr)
            return exit_code(summary["stopped_by"])
        rows.append(row_from_summary(summary))
        gpu, env_id = summary["gpu"], summary["env_id"]
    table = write_table(rows, out, gpu)
    plot(rows, out, env_id)
    print(table)
    print(json.dumps({"csv": str(out / "intervals.csv"), "table": str(out / "intervals.md"),
                      "plot": str(out / "intervals.png")}))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
