"""Time to a score on Atari: train a game per seed until an evaluation's mean reaches `--target`.

    tfdqn time-to-score --game Pong --preset atari_cpu --seeds 1 2 --target 18 \\
        --out docs/bench-atari-pong.json --plot docs/atari-pong

Each seed is one `python -m tfdqn.train` process with `run.target_return` set. A periodic evaluation that
reaches the target (evaluated as the config says: `run.eval_every`, `run.eval_episodes`,
`exploration.eval_epsilon`, on vector envs) is a first hit; the same network then plays `--confirm-episodes`
fresh games (`run.confirm_episodes`: seeds no evaluation used before), and the run ends only where their mean
reaches the target too, else it goes on to the next evaluation. A lucky evaluation of 10 games is not a score.
The run's product (the network its confirmations, or else its evaluations, rate best) then plays
`--product-episodes` further fresh games (`run.final_eval_episodes`), which selected nothing: its score.
The wall-clock is the run clock (`tfdqn.run.clock`): seconds from the process's start, continued across
a resume. Runs are named by their RunKey (the hash of the resolved config, the target and the step budget
among its keys, and the seed): a run of another target or budget is a run of its own. Seeds run at once
as the CPUs allow (`--cpus-per-run`) or as Ray tasks (`--ray-address`); a stopped run resumes from its
newest checkpoint and continues its curve.

Writes: the record (`--out`: every run it has recorded, each with its config hash, resolved config, commit, the
first hit and the confirmed one (solved, solve_env_steps, solve_wall_seconds), each confirmation, the product's
score on its fresh games and the last network's, and the curve), a Markdown table of this
recipe's runs (every seed the record holds, also those of earlier invocations), their curves against env steps
and wall-clock (`--plot PREFIX`: PREFIX.png and PREFIX.svg, with the game's other recipes in the record dashed
beside them, each labelled with its hash), and
(`--sweep-table`) every recipe of the game the record holds side by side, as a sweep's trials
(`tfdqn.bench.sweep_table`). A trial given up early (stopped with SIGTERM) enters the record as it stands with
`--record-stopped`, marked stopped, so every trial of a sweep can be checked; `--remove` takes it out to resume it.
"""

from __future__ import annotations

import pathlib
import sys


from tfdqn import config as config_lib
from tfdqn.atomic import atomic_write
from tfdqn.cli import OneLineErrorParser, number
from tfdqn.errors import UserError
from tfdqn.config.presets import PRESETS
from tfdqn.run.csv_log import EVALUATIONS_HEADER, read_rows
from tfdqn.run.run_dir import read_summary
from tfdqn.bench import sweep
from tfdqn.bench.report import run_benchmark, machine, publish_table
from tfdqn.bench.runkey import RunKey
from tfdqn.bench.runs import PlannedRun
from tfdqn.bench.sweep_table import sweep_table
from tfdqn.extras import require


def build_parser(prog: str = "tfdqn time-to-score") -> OneLineErrorParser:
    parser = OneLineErrorParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", required=True, help="an ALE game (Pong, Breakout, ...)")
    parser.add_argument("--seeds", type=number(int), nargs="+",
                        help="one run per seed (default: 0; with --report-only, the seeds the record holds of this "
                             "recipe)")
    parser.add_argument("--target", type=number(float), required=True, help="evaluation mean return that counts as reached")
    parser.add_argument("--preset", choices=sorted(PRESETS), metavar="NAME",
                        help=f"a preset on top of the game's config: {', '.join(sorted(PRESETS))}")
    parser.add_argument("--config", action="append", default=[], metavar="FILE", help="YAML config file (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    parser.add_argument("--total-steps", type=number(int), help="env steps at most, per run (default: the config's)")
    parser.add_argument("--confirm-episodes", type=number(int), default=30, metavar="N",
                        help="fresh games a network whose evaluation reaches --target plays before the hit counts "
                             "(run.confirm_episodes; 0: the evaluation's hit counts at once)")
    parser.add_argument("--product-episodes", type=number(int), default=100, metavar="N",
                        help="fresh games the run's product plays at the end, its score (run.final_eval_episodes)")
    parser.add_argument("--logdir", default="runs/time_to_score", help="where the run folders go")
    parser.add_argument("--out", required=True, metavar="FILE.json", help="the record: results JSON")
    parser.add_argument("--table", metavar="FILE.md", help="also write the Markdown table here")
    parser.add_argument("--plot", metavar="PREFIX", help="write PREFIX.png and PREFIX.svg: this recipe's curves, and "
                        "the game's other recipes in the record dashed beside them (the bench extra)")
    parser.add_argument("--sweep-table", metavar="FILE.md",
                        help="also write every recipe of this game in the record side by side here (a sweep's trials)")
    parser.add_argument("--record-stopped", action="store_true",
                        help="train nothing: also record this recipe's runs that a stop signal ended, where they "
                             "stand (a sweep's trial given up early); --remove takes one out to resume it")
    sweep.add_arguments(parser)
    return parser


def train_arguments(args, seed: int) -> tuple[str, ...]:
    """The seed's `tfdqn train` arguments, the target among them."""
    arguments = ["--env", args.game, "--seed", str(seed)]
    arguments += [f"--preset={args.preset}"] if args.preset else []
    arguments += [f"--config={path}" for path in args.config]
    arguments += [f"--set={item}" for item in args.set] + [f"--set={key}={value}" for key, value in set_by(args).items()]
    return tuple(arguments + ([f"--total-steps={args.total_steps}"] if args.total_steps else []))


def set_by(args) -> dict:
    """The config keys this command's own flags set."""
    return {"run.target_return": args.target, "run.confirm_episodes": args.confirm_episodes,
            "run.final_eval_episodes": args.product_episodes}


def seed_config(args, seed: int) -> config_lib.DQNConfig:
    """The config `tfdqn train` resolves from `train_arguments`: the run's recipe."""
    overrides = {**config_lib.parse_set(args.set), **set_by(args), "run.seed": seed, "env.id": args.game}
    if args.total_steps:
        overrides["run.total_steps"] = args.total_steps
    return config_lib.resolve_config(args.config, overrides, args.preset)


def plan(args) -> list[PlannedRun]:
    planned = []
    for seed in args.seeds:
        key = RunKey.of(f"{args.game}-{args.preset or 'config'}", seed_config(args, seed))
        planned.append(PlannedRun(args.game, key, pathlib.Path(args.logdir) / key.folder_name,
                                  train_arguments(args, seed), f"{args.game} seed {seed}"))
    return planned


def read_curve(run_dir: pathlib.Path, name: str = "evaluations.csv") -> list[dict]:
    """The run's periodic evaluations (`evaluations.csv`), or its confirmations (`confirmations.csv`: none for a
    run that kept none), in env-step order."""
    return [{"env_steps": row["env_steps"], "wall_seconds": row["run_seconds"], "return_mean": row["return_mean"],
             "return_std": row["return_std"]} for row in read_rows(pathlib.Path(run_dir) / name, EVALUATIONS_HEADER)]


def protocol(run_dir: pathlib.Path) -> str:
    """The evaluation protocol line the run printed, rebuilt from its saved config."""
    from tfdqn.envs.make import describe_protocol, make_env

    config = config_lib.build_config([run_dir / "config.yaml"], {})
    env, spec = make_env(config.env, seed=0)
    env.close()
    return describe_protocol(config.env, spec, config.exploration.eval_epsilon)


def collect(run_dir: pathlib.Path, key: RunKey) -> dict:
    """One seed's figures from its finished (or stopped and recorded as it stands) run folder, with the resolved
    config that made them. `solved` and `solve_*` are the confirmed hit (where the run confirmed its hits), the
    first hit beside it."""
    summary = read_summary(run_dir)  # written only when the run finished or a signal stopped it
    config = config_lib.build_config([run_dir / "config.yaml"], {})
    target, curve = config.run.target_return, read_curve(run_dir)
    confirmations = read_curve(run_dir, "confirmations.csv")
    first_hit = next((point for point in curve if point["return_mean"] >= target), None)
    solved = next((point for point in confirmations if point["return_mean"] >= target), None) \
        if config.run.confirm_episodes else first_hit
    return {"target": target, "solved": solved is not None,
            "solve_env_steps": solved["env_steps"] if solved else None,
            "solve_wall_seconds": solved["wall_seconds"] if solved else None,
            "confirm_episodes": config.run.confirm_episodes,
            "first_hit_env_steps": first_hit["env_steps"] if first_hit else None,
            "first_hit_wall_seconds": first_hit["wall_seconds"] if first_hit else None,
            "confirmations": confirmations,
            "final_eval_return": summary.get("final_eval_return_mean"),
            "final_eval_episodes": summary.get("final_eval_episodes"),
            "last_network_eval_return": summary.get("last_network_eval_return_mean"),
            "product_env_steps": summary.get("final_network", {}).get("env_steps"),
            "env_steps": summary["env_steps"], "run_seconds": summary["run_seconds"],
            "stopped_by": summary.get("stopped_by"),
            "env_steps_per_sec": summary["env_steps_per_sec"], "protocol": protocol(run_dir), "curve": curve,
            "config": config_lib.to_dict(config)}


def hit(run: dict, first: bool = False) -> str:
    """`env steps, minutes` of the run's confirmed hit (`first`: its first, unconfirmed one; in a record from before
    confirmations, the hit it ended at), or "-"."""
    first = first and "first_hit_env_steps" in run
    steps, seconds = ((run["first_hit_env_steps"], run["first_hit_wall_seconds"]) if first else
                      (run["solve_env_steps"], run["solve_wall_seconds"]))
    return "-" if steps is None else f"{steps:,}, {seconds / 60:.1f} min"


def confirmed(run: dict) -> str:
    """Whether the run reached its target, as its record can say: confirmed on fresh games, or by one evaluation
    (a record from before confirmations, or one that asked for none)."""
    if not run.get("confirm_episodes"):
        return f"{'yes' if run['solved'] else 'no'}, unconfirmed"
    return f"{'yes' if run['solved'] else 'no'}, {run['confirm_episodes']} games"


def product(run: dict) -> str:
    """The product's mean on the final evaluation's fresh games, with their count, and the last network's."""
    if run["final_eval_return"] is None:
        return "-"
    last = run.get("last_network_eval_return")
    return (f"{run['final_eval_return']:.1f} on {run['final_eval_episodes']}" +
            (f" (last network {last:.1f})" if last is not None else ""))


def markdown_table(runs: list[dict]) -> str:
    lines = ["| game | preset | seed | target | reached | first hit | confirmed hit | product: fresh games | run (min) |",
             "|---|---|---:|---:|---|---|---|---|---:|"]
    for r in runs:
        lines.append(f"| {r['game']} | {r['preset'] or 'config'} | {r['seed']} | {r['target']:g} | "
                     f"{confirmed(r)}{' (stopped)' if r.get('stopped_by') else ''} | {hit(r, first=True)} | "
                     f"{hit(r) if r.get('confirm_episodes') else '-'} | {product(r)} | {r['run_seconds'] / 60:.1f} |")
    return "\n".join(lines) + "\n"


def plot_curves(runs: list[dict], beside: list[dict], prefix: str) -> None:
    """`runs` (this recipe's seeds, solid) and `beside` (the game's other recipes in the record, dashed, each
    labelled with its recipe, as this recipe's are then too) against env steps and against wall-clock, on the same
    axes; the legend goes below both panels, where a sweep's many curves cannot hide its points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = [(r, "-", bool(beside)) for r in runs] + [(r, "--", True) for r in beside]
    columns = 2 if len(curves) > 3 else len(curves)
    rows = -(-len(curves) // columns)
    fig, (by_steps, by_time) = plt.subplots(1, 2, figsize=(11, 4 + 0.22 * rows), sharey=True, layout="constrained")
    colours = plt.get_cmap("tab20" if len(curves) > 10 else "tab10").colors  # one colour per curve where it can
    for (r, style, with_hash), colour in zip(curves, colours * len(curves)):
        label = f"{r['game']} {r['preset'] or 'config'}{' ' + r['config_hash'] if with_hash else ''} seed {r['seed']}"
        steps = [p["env_steps"] for p in r["curve"]]
        minutes = [p["wall_seconds"] / 60 for p in r["curve"]]
        means = [p["return_mean"] for p in r["curve"]]
        by_steps.plot(steps, means, style, marker="o", ms=3, label=label, color=colour)
        by_time.plot(minutes, means, style, marker="o", ms=3, label=label, color=colour)
        for ax, x in ((by_steps, "env_steps"), (by_time, "wall_seconds")):  # confirmations: stars, filled if confirmed
            for point in r.get("confirmations", []):
                ax.plot(point[x] / (60 if x == "wall_seconds" else 1), point["return_mean"], "*", ms=9, color=colour,
                        mfc=colour if point["return_mean"] >= r["target"] else "none")
    for ax, xlabel in ((by_steps, "env steps (agent steps)"), (by_time, "wall-clock from process start (minutes)")):
        for target in sorted({r["target"] for r in runs}):
            ax.axhline(target, ls="--", c="grey", lw=1)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    by_steps.set_ylabel("evaluation mean return")
    fig.legend(*by_time.get_legend_handles_labels(), loc="outside lower center", ncols=columns, fontsize=8)
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # the SVG keeps its labels as text: searchable, smaller
        for suffix in ("png", "svg"):
            fig.savefig(f"{prefix}.{suffix}", dpi=110)
    plt.close(fig)


def _check(args) -> None:
    given = config_lib.parse_set(args.set)  # a malformed --set fails here, before any run
    for key, flag in (("run.target_return", "--target"), ("run.confirm_episodes", "--confirm-episodes"),
                      ("run.final_eval_episodes", "--product-episodes")):
        if key in given:
            raise UserError(f"--set {key}={given[key]}: this command sets {key} from {flag}; allowed: {flag}")
    if args.confirm_episodes < 0 or args.product_episodes < 1:
        bad = (f"--confirm-episodes {args.confirm_episodes}: allowed: an integer >= 0" if args.confirm_episodes < 0
               else f"--product-episodes {args.product_episodes}: allowed: an integer >= 1")
        raise UserError(bad)
    if args.seeds is not None and (len(set(args.seeds)) != len(args.seeds) or min(args.seeds) < 0):
        raise UserError(f"--seeds {' '.join(map(str, args.seeds))}: allowed: distinct integers >= 0")
    if args.plot:
        require("bench", "--plot", ("matplotlib",))


def _main(args) -> int:
    _check(args)
    where = sweep.placement(args)
    record = sweep.open_record(args, "time-to-score")
    recipe = RunKey.of(args.game, seed_config(args, 0)).config_hash  # the seed is not in it
    if args.seeds is None:
        args.seeds = (args.report_only and sweep.held_seeds(record, recipe)) or [0]
    planned = plan(args)
    sweep.apply_removals(record, args.remove, lambda game, seed: recipe)
    entry = lambda run, outcome: {**sweep.run_facts(run, outcome), "preset": args.preset}  # noqa: E731
    code = sweep.settle(record, planned, entry, collect, where, args.report_only or args.record_stopped,
                        [run["run_seconds"] for run in record.of_recipe(recipe) if not run.get("stopped_by")],
                        stopped_too=args.record_stopped)
    # The table and curves give every seed of the recipe the record holds, not only this invocation's: a second
    # seed run on its own leaves the first in the table.
    runs = sorted(record.of_recipe(recipe), key=lambda run: run["seed"])
    if not any(run["seed"] in args.seeds for run in runs):
        if code:
            return code
        raise UserError(f"no finished run of recipe {recipe} under {args.logdir} or in {args.out}; allowed: run "
                        f"without --report-only")
    if args.plot:
        beside = [run for run in record.runs if run["game"] == args.game and run["config_hash"] != recipe]
        plot_curves(runs, beside, args.plot)
    record.report(recipe, {"command": args.command, "machine": machine()})
    others = record.other_recipes(recipe)
    note = f"Recipe {recipe}" + (f"; the record also holds {sum(others.values())} run(s) of other recipes, reported "
                                 f"apart ({', '.join(others)})" if others else "") + ".\n"
    publish_table(markdown_table(runs) + "\n" + note, args.table)
    if args.sweep_table:  # read after `report`, which brings the record up to the file another sweep may have written
        trials = [run for run in record.runs if run["game"] == args.game]
        atomic_write(pathlib.Path(args.sweep_table), sweep_table(trials, record.reports))
    return code


def main(argv: list[str] | None = None, prog: str = "tfdqn time-to-score") -> int:
    return run_benchmark(build_parser, _main, argv, prog)


if __name__ == "__main__":
    sys.exit(main(prog="python -m tfdqn.bench.time_to_score"))
