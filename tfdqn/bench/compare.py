"""Sweep `training_interval`: R training runs per interval, then a CSV, a Markdown table and a figure.

    tfdqn compare --env CartPole --intervals 1 4 16 --steps 6000 --repeats 2 --out DIR

Every run uses the same seed and config and starts learning after 5% of its steps. `run.env_steps_per_round`
is pinned to 1 (an update as soon as one is due) unless --set gives it: the CartPole default's rounds of
updates would blur the comparison. The repeats are interleaved (1, 4, 16, 1, 4, 16, ...) so a slow
spell of the machine does not land on one interval only.

Figures are steady-state: the per-window perf/ and system/ TensorBoard scalars of the summary windows
that start at or after learning_starts, less the first --warmup-windows of them (graph tracing and
compilation land there); a cell reads mean ± std over every repeat's steady windows. system/ figures
are one-second samples, so they average over the windows that hold one. Each run's logs go
to DIR/interval_<K>_r<R>, so `tensorboard --logdir DIR` overlays them. The runs go through
`tfdqn.run.loop.train`, the same loop as `python -m tfdqn.train`.
"""

from __future__ import annotations

import argparse
import csv
import io
import pathlib
import sys

import numpy as np


from tfdqn import config as config_lib
from tfdqn.atomic import atomic_write
from tfdqn.cli import OneLineErrorParser, number, run_cli, start_tensorflow
from tfdqn.errors import UserError
from tfdqn.extras import require
from tfdqn.config.presets import PRESETS
from tfdqn.run.run_dir import choose_run_dir
from tfdqn.run.signals import exit_code
from tfdqn.bench.windows import steady_state, window_series

# The per-window scalars the table and figure use, under the names of the CSV's columns.
WINDOW_TAGS = {"perf/env_steps_per_sec": "env_steps_per_sec", "perf/updates_per_sec": "updates_per_sec",
               "perf/learner_busy_share": "learner_busy_share", "system/cpu_util": "cpu_util",
               "system/gpu_util": "gpu_util", "system/rss_gib": "rss_gib", "system/gpu_mem_gib": "gpu_mem_gib"}
# (column, header, format) of the Markdown table; a column no run measured (GPU without one) is left out.
TABLE = [("env_steps_per_sec", "env steps/s", "{:.0f}"), ("updates_per_sec", "updates/s", "{:.0f}"),
         ("learner_busy_share", "learner busy", "{:.2f}"), ("cpu_util", "CPU", "{:.2f}"),
         ("gpu_util", "GPU", "{:.2f}"), ("rss_gib", "RSS (GiB)", "{:.2f}")]
SWEEP_KEYS = ("run.total_steps", "run.training_interval", "run.seed", "run.learning_starts", "run.log_every",
              "run.checkpoint_every", "run.eval_every", "run.final_eval_episodes", "env.id")


def build_parser(prog: str = "tfdqn compare") -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole", help="env name or id, as for tfdqn.train")
    parser.add_argument("--intervals", type=number(float), nargs="+", default=[1, 4, 16], metavar="K",
                        help="training intervals to compare (env steps per update; 0.25: four updates per env step)")
    parser.add_argument("--steps", type=number(int), default=6000, metavar="N", help="env steps per run")
    parser.add_argument("--repeats", type=number(int), default=1, metavar="R", help="runs per interval, interleaved")
    parser.add_argument("--learning-starts", type=number(int), metavar="N", help="default: 5%% of --steps, at least 100")
    parser.add_argument("--warmup-windows", type=number(int), default=1, metavar="W",
                        help="summary windows after learning_starts left out of the averages (default 1)")
    parser.add_argument("--seed", type=number(int), default=0, help="seed of every run (default 0)")
    parser.add_argument("--preset", choices=sorted(PRESETS), metavar="NAME",
                        help=f"a preset on top of the env's config: {', '.join(sorted(PRESETS))}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any config key")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the runs, CSV, table and figure")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def make_config(args: argparse.Namespace, interval: float) -> config_lib.DQNConfig:
    """The env's config as `python -m tfdqn.train --env` resolves it, with the sweep's run settings, a
    replay as large as the run, and one update as soon as it is due unless --set says otherwise."""
    learning_starts = args.learning_starts if args.learning_starts is not None else max(args.steps // 20, 100)
    overrides = {"replay.capacity": max(args.steps, 1000), "run.env_steps_per_round": 1, **config_lib.parse_set(args.set),
                 "env.id": args.env, "run.total_steps": args.steps, "run.training_interval": interval,
                 "run.seed": args.seed, "run.learning_starts": learning_starts, "run.log_every": max(args.steps // 10, 1),
                 "run.checkpoint_every": 0, "run.eval_every": 0, "run.final_eval_episodes": 1}
    return config_lib.resolve_config([], overrides, args.preset)


def schedule(intervals: list[float], repeats: int) -> list[tuple[float, int]]:
    """(interval, repeat) in run order: interleaved, so drift in the machine's speed spreads over all intervals."""
    return [(k, r) for r in range(repeats) for k in intervals]


def run_row(interval: int, repeat: int, run_dir: pathlib.Path, summary: dict, windows: dict) -> dict:
    """One run's CSV row: its totals, then each steady-state figure as mean, min and max over its windows."""
    row = {"training_interval": interval, "repeat": repeat, "run_dir": run_dir.name, "env_steps": summary["env_steps"],
           "updates": summary["updates"], "wall_seconds": summary["wall_seconds"],
           "steady_windows": max(len(v) for v in windows.values())}
    for tag, values in sorted(windows.items()):
        name = WINDOW_TAGS.get(tag, tag.split("/", 1)[1])
        row.update({name: float(np.mean(values)), f"{name}_min": min(values), f"{name}_max": max(values)})
    return row


def pooled(windows: list[dict], interval_runs: list[float]) -> dict:
    """Per interval: each figure's (mean, std) over the steady windows of all its repeats."""
    stats = {}
    for k in dict.fromkeys(interval_runs):
        runs = [w for w, run_k in zip(windows, interval_runs) if run_k == k]
        tags = set().union(*runs)
        stats[k] = {WINDOW_TAGS.get(tag, tag.split("/", 1)[1]): (float(np.mean(v)), float(np.std(v)))
                    for tag in tags for v in [[x for run in runs for x in run.get(tag, [])]]}
    return stats


def write_csv(rows: list[dict], path: pathlib.Path) -> None:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, text.getvalue())


def markdown_table(stats: dict, note: str) -> str:
    """interval and up to six figures as `mean ± std`: a table that fits a page; the CSV has the rest."""
    shown = [(col, head, fmt) for col, head, fmt in TABLE if any(col in s for s in stats.values())]
    cell = lambda s, col, fmt: " ± ".join(fmt.format(x) for x in s[col]) if col in s else "-"  # noqa: E731
    lines = ["| interval | " + " | ".join(head for _, head, _ in shown) + " |", "|---" * (len(shown) + 1) + "|"]
    lines += [f"| {k:g} | " + " | ".join(cell(s, col, fmt) for col, _, fmt in shown) + " |" for k, s in stats.items()]
    return "\n".join(lines) + "\n\n" + note + "\n"


def build_figure(stats: dict, title: str):
    """Throughput, where the loop's time goes and utilisation per interval, on linear axes with every
    interval as a labelled category: the figure reads without a legend for the x axis."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.5), layout="constrained")
    rate, phases, util = fig.subplots(1, 3)
    labels = [f"{k:g}" for k in stats]
    x = np.arange(len(labels))
    _bars(rate, x, stats, [("env_steps_per_sec", "env steps/s"), ("updates_per_sec", "updates/s")], "{:.0f}")
    rate.set(ylabel="per second", title="throughput (steady state)")
    shares = sorted({name for s in stats.values() for name in s if name.startswith("share_")})
    bottom = np.zeros(len(x))
    for name in shares:
        height = np.array([s.get(name, (0.0, 0.0))[0] for s in stats.values()])
        phases.bar(x, height, 0.6, bottom=bottom, label=name.removeprefix("share_"))
        bottom += height
    phases.set(ylabel="share of the loop's wall time", ylim=(0, 1.05), title="where the time goes")
    phases.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    _bars(util, x, stats, [("learner_busy_share", "learner busy"), ("cpu_util", "CPU"), ("gpu_util", "GPU")],
          "{:.2f}")
    util.set(ylabel="share", ylim=(0, 1.15), title="utilisation")
    for ax in (rate, phases, util):
        ax.set_xticks(x, labels)
        ax.set_xlabel("training_interval (env steps per update)")
    fig.suptitle(title)
    return fig


def _bars(ax, x, stats: dict, series: list[tuple[str, str]], fmt: str) -> None:
    """Grouped bars with std error bars and each mean written on its bar; a series no run has is left out."""
    series = [(col, label) for col, label in series if any(col in s for s in stats.values())]
    width = 0.8 / len(series)
    for i, (col, label) in enumerate(series):
        mean, std = zip(*[s.get(col, (0.0, 0.0)) for s in stats.values()])
        bars = ax.bar(x + (i - (len(series) - 1) / 2) * width, mean, width, yerr=std, capsize=3, label=label)
        ax.bar_label(bars, [fmt.format(m) for m in mean], fontsize=8, padding=2)
    ax.legend(fontsize=8)


def _check(args: argparse.Namespace) -> None:
    if args.steps < 1 or args.repeats < 1 or args.warmup_windows < 0 or any(k <= 0 for k in args.intervals) \
            or len(set(args.intervals)) != len(args.intervals):
        raise UserError(f"--steps {args.steps} / --repeats {args.repeats} / --warmup-windows {args.warmup_windows} / "
                        f"--intervals {' '.join(f'{k:g}' for k in args.intervals)}: allowed: steps and repeats >= 1, "
                        f"warm-up >= 0, intervals > 0 (0.25: four updates per env step), each interval once")
    fixed = [key for key in config_lib.parse_set(args.set) if key in SWEEP_KEYS]
    if fixed:
        raise UserError(f"--set {fixed[0]} is set by the sweep itself; allowed: the tool's own flags for it")
    require("bench", "this subcommand", ("matplotlib",))


def run_folder(out: pathlib.Path, interval: float, repeat: int, config: config_lib.DQNConfig) -> pathlib.Path:
    """The run's folder in `out`; a comparison already there is refused, never overwritten or mixed in."""
    name = f"interval_{interval:g}_r{repeat}"
    if (out / name).is_dir() and any((out / name).iterdir()):
        raise UserError(f"--out {str(out)!r} already holds a comparison ({out / name} is not empty); allowed: a new "
                        f"--out")
    return choose_run_dir(str(out), name, config)


def _main(args: argparse.Namespace) -> int:
    _check(args)
    out = pathlib.Path(args.out)
    configs = {k: make_config(args, k) for k in args.intervals}  # every config validated before any run
    order = schedule(args.intervals, args.repeats)
    run_dirs = {(k, r): run_folder(out, k, r, configs[k]) for k, r in order}
    start_tensorflow()
    from tfdqn.run.loop import train

    rows, windows, summary = [], [], {}
    for k, r in order:
        print(f"training_interval {k:g}, repeat {r}: {args.steps} env steps ...", flush=True)
        summary = train(configs[k], run_dirs[k, r], quiet=True)
        if "stopped_by" in summary:
            print(f"stopped by {summary['stopped_by']} during training_interval {k:g}", file=sys.stderr)
            return exit_code(summary["stopped_by"])
        windows.append(steady_state(window_series(run_dirs[k, r]), configs[k].run.learning_starts,
                                    args.warmup_windows))
        if not windows[-1]:
            raise UserError(f"--steps {args.steps}: no summary window left after learning_starts and "
                            f"{args.warmup_windows} warm-up window(s); allowed: more --steps or fewer --warmup-windows")
        rows.append(run_row(k, r, run_dirs[k, r], summary, windows[-1]))
    write_csv(rows, out / "intervals.csv")
    stats = pooled(windows, [k for k, _ in order])
    note = (f"Steady state: summary windows of {configs[order[0][0]].run.log_every} env steps starting at or after "
            f"learning_starts ({configs[order[0][0]].run.learning_starts}), less the first {args.warmup_windows}; "
            f"mean ± std over {args.repeats} repeat(s) x their windows. GPU: {summary['gpu']}.")
    table = markdown_table(stats, note)
    atomic_write(out / "intervals.md", table)
    fig = build_figure(stats, f"{summary['env_id']}, {args.steps} env steps per run, {args.repeats} repeat(s)")
    for suffix in ("png", "svg"):
        fig.savefig(out / f"intervals.{suffix}", dpi=110)
    print(table)
    print(f"output: {out.resolve()}\ntensorboard --logdir {out}")
    return 0


def main(argv: list[str] | None = None, prog: str = "tfdqn compare") -> int:
    return run_cli(build_parser(prog), _main, argv)


if __name__ == "__main__":
    sys.exit(main(prog="python -m tfdqn.bench.compare"))
