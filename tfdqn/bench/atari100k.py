"""Atari 100k: train each game and seed for 100,000 agent steps with a preset, then score it as the field does.

    tfdqn atari100k --preset drq_eps --games Alien Breakout Krull Pong --seeds 0 1 \\
        --out docs/atari100k-drq_eps.json --table docs/atari100k-drq_eps.md

The protocol is the preset's (`der` and `drq_eps` carry Dopamine's labs/atari_100k settings): no sticky
actions, a lost life terminal for learning only, no-op starts, games capped at 27,000 agent steps,
rewards clipped for learning, and a run's score the mean of 100 evaluation episodes at epsilon 0.001
played after training, side by side on vector envs. Scores are human-normalised and aggregated as the
interquartile mean (IQM) and the mean, with 95% stratified-bootstrap confidence intervals (rliable,
Agarwal et al. 2021), beside the published per-game means of DER and DrQ(epsilon)
(`tfdqn.bench.atari100k_scores`).

A per-game mean of a few runs against DrQ(epsilon)'s mean of 100 is a coin flip even for DrQ(epsilon) itself,
so the report also compares like with like, from DrQ(epsilon)'s 100 published runs per game: each run's
percentile among them, DrQ(epsilon)'s IQM over the same games, the probability that a run of tfdqn outscores
a run of DrQ(epsilon) on the same game (rliable's probability of improvement), and how often DrQ(epsilon)'s own
runs, as many per game, put a game's mean at or above its published mean.

Each game-seed is one `python -m tfdqn.train` run, named by its RunKey (`tfdqn.bench.runkey`: the hash of its
resolved config, and its seed), as many at once as `--cpus-per-run` allows here, or as Ray tasks on a cluster
(`--ray-address`). The results JSON (`--out`) is the record (`tfdqn.bench.record`): each run enters it as it
ends with its config hash, resolved config, tfdqn version and commit, and stays until `--remove` names it, so a
report over fewer games or seeds, or after the run folders are gone, keeps every run. The runs of one recipe
(every key but the game and the seed) are reported together; other recipes in the same file are kept apart.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np


from tfdqn import config as config_lib
from tfdqn.bench.atari100k_scores import (DER, PUBLISHED_IQM, SCORES, drq_eps_mean, drq_eps_percentile,
                                    drq_eps_runs, human_normalized)
from tfdqn.cli import OneLineErrorParser, number
from tfdqn.errors import UserError
from tfdqn.config.presets import PRESETS
from tfdqn.bench.aggregate import improvement_probability, interval_estimates
from tfdqn.bench.drq_eps_spread import interval_coverage, own_iqm_spread
from tfdqn.bench.report import run_benchmark, machine, publish_table
from tfdqn.bench import sweep
from tfdqn.bench.runkey import RunKey, recipe, recipe_differences, recipe_hash
from tfdqn.bench.runs import PlannedRun, finished
from tfdqn.extras import require

GAMES, SEEDS = ("Alien", "Breakout", "Krull", "Pong"), (0, 1)  # what a run that trains plays by default


def build_parser(prog: str = "tfdqn atari100k") -> OneLineErrorParser:
    parser = OneLineErrorParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS), metavar="NAME",
                        help=f"the recipe (der, drq_eps; any of {', '.join(sorted(PRESETS))})")
    parser.add_argument("--games", nargs="+",
                        help=f"Atari 100k games, of {len(SCORES)} (default: {' '.join(GAMES)}; with --report-only, "
                             f"the games the record holds of this recipe)")
    parser.add_argument("--seeds", type=number(int), nargs="+",
                        help=f"runs per game (default: {' '.join(map(str, SEEDS))}; with --report-only, the seeds the "
                             f"record holds of this recipe on these games)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (leaves the protocol: say so in the report)")
    parser.add_argument("--logdir", default="runs/atari100k", help="where the run folders go")
    parser.add_argument("--out", required=True, metavar="FILE.json", help="the record: results JSON")
    parser.add_argument("--table", metavar="FILE.md", help="also write the Markdown table here")
    parser.add_argument("--reps", type=number(int), default=50_000, help="bootstrap resamples for the intervals")
    sweep.add_arguments(parser)
    return parser


CHECKPOINT_EVERY = 10_000  # agent steps: a killed run loses at most this much (the protocol saves only at the end)


def game_config(args, game: str, seed: int) -> config_lib.DQNConfig:
    """The config `tfdqn train` resolves from `train_arguments`: the run's recipe."""
    overrides = {**config_lib.parse_set(args.set), "run.seed": seed, "run.checkpoint_every": CHECKPOINT_EVERY,
                 "env.id": game}
    return config_lib.resolve_config([], overrides, args.preset)


def train_arguments(args, game: str, seed: int) -> tuple[str, ...]:
    return ("--env", game, "--preset", args.preset, "--seed", str(seed), f"--checkpoint-every={CHECKPOINT_EVERY}",
            *[f"--set={s}" for s in args.set])


def plan(args, logdir: pathlib.Path) -> list[PlannedRun]:
    """Every asked game-seed, seeds in the outer loop so that every game gets a seed early."""
    planned = []
    for seed in args.seeds:
        for game in args.games:
            key = RunKey.of(f"{game}-{args.preset}", game_config(args, game, seed))
            planned.append(PlannedRun(game, key, logdir / key.folder_name, train_arguments(args, game, seed),
                                      f"{game} seed {seed}"))
    return planned


def collect(run_dir: pathlib.Path, key: RunKey) -> dict:
    """A finished run's score and what made it: its final evaluation and its resolved config."""
    summary = finished(run_dir)
    config = config_lib.build_config([run_dir / "config.yaml"], {})
    return {"score": summary["final_eval_return_mean"], "episodes": summary["final_eval_episodes"],
            "env_steps": summary["env_steps"], "run_seconds": summary["run_seconds"],
            "suite_hash": recipe_hash(config, without=SUITE_KEYS), "config": config_lib.to_dict(config)}


SUITE_KEYS = ("env.id",)  # what may differ between the runs of one table besides the seed


def drq_eps_clears_its_mean(game: str, runs: int, draws: int = 200_000, seed: int = 0) -> float:
    """How often the mean of `runs` of DrQ(epsilon)'s own runs of `game` (drawn with replacement) is at or above
    its published mean: the chance that DrQ(epsilon) itself meets the per-game bar with that many runs."""
    scores = drq_eps_runs()[game]
    means = np.random.default_rng(seed).choice(scores, size=(draws, runs)).mean(axis=1)
    return float(np.mean(means >= scores.mean()))


def games_at_or_above(chances: list[float]) -> list[float]:
    """P(exactly j of the games at or above), j = 0..len(chances), for independent games with these chances."""
    distribution = np.array([1.0])
    for chance in chances:
        distribution = np.convolve(distribution, [1.0 - chance, chance])
    return distribution.tolist()


def rows_of(games: list[str], runs: list[dict]) -> list[dict]:
    """`game_rows` of the recorded `runs` for the `games` that have any, each game's scores in the order of `runs`."""
    scores = {game: [r["score"] for r in runs if r["game"] == game] for game in games}
    return game_rows({game: values for game, values in scores.items() if values})


def game_rows(scores: dict[str, list[float]]) -> list[dict]:
    """Per game: the runs' scores, their mean, its human-normalised score, the published means, each run's
    percentile among DrQ(epsilon)'s runs, and how often DrQ(epsilon)'s runs, as many, clear its mean."""
    rows = []
    for game, runs in scores.items():
        mean, drq_eps = float(np.mean(runs)), drq_eps_mean(game)
        rows.append({"game": game, "scores": runs, "mean": mean, "human_normalized": human_normalized(game, mean),
                     "der": SCORES[game][DER], "drq_eps": drq_eps, "at_or_above_drq_eps": mean >= drq_eps,
                     "drq_eps_percentiles": [drq_eps_percentile(game, score) for score in runs],
                     "drq_eps_own_runs_at_or_above": drq_eps_clears_its_mean(game, len(runs))})
    return rows


def against_drq_eps(games: list[str], normalized: np.ndarray, reps: int) -> dict:
    """Like with like over these games: DrQ(epsilon)'s IQM and mean from its runs, and the probability that a run
    of tfdqn (rows of `normalized`, human-normalised) outscores one of DrQ(epsilon)."""
    reference = np.stack([human_normalized(game, drq_eps_runs()[game]) for game in games], axis=1)
    return {"drq_eps_runs_per_game": reference.shape[0], "drq_eps": interval_estimates(reference, reps),
            "improvement_over_drq_eps": improvement_probability(normalized, reference, reps)}


def markdown_table(preset: str, rows: list[dict], aggregate: dict | None) -> str:
    lines = [f"| game | runs | tfdqn `--preset {preset}`: mean (each run) | human-normalised | DER | DrQ(ε) | "
             "at or above DrQ(ε) | each run's percentile among DrQ(ε)'s runs | DrQ(ε)'s own runs, as many, at or "
             "above its mean |", "|---|---:|---|---:|---:|---:|---|---|---:|"]
    for r in rows:
        each = ", ".join(f"{s:.1f}" for s in r["scores"])
        percentiles = ", ".join(f"{p:.0f}" for p in r["drq_eps_percentiles"])
        lines.append(f"| {r['game']} | {len(r['scores'])} | {r['mean']:.1f} ({each}) | {r['human_normalized']:.3f} | "
                     f"{r['der']:g} | {r['drq_eps']:.1f} | {'yes' if r['at_or_above_drq_eps'] else 'no'} | "
                     f"{percentiles} | {r['drq_eps_own_runs_at_or_above']:.0%} |")
    if aggregate:
        games, runs = len(rows), aggregate["runs_per_game"]
        lines += ["", f"Over these {games} game{'s' * (games != 1)}, {runs} run{'s' * (runs != 1)} each: IQM "
                      f"{aggregate['iqm']:.3f} (95% CI {aggregate['iqm_ci95'][0]:.3f} to {aggregate['iqm_ci95'][1]:.3f}), "
                      f"mean {aggregate['mean']:.3f} (95% CI {aggregate['mean_ci95'][0]:.3f} to "
                      f"{aggregate['mean_ci95'][1]:.3f}); published IQM over all 26 games: "
                      + ", ".join(f"{name} {value}" for name, value in PUBLISHED_IQM.items()) + "."]
        drq, better = aggregate["drq_eps"], aggregate["improvement_over_drq_eps"]
        half = -(-games // 2)
        lines += ["", f"DrQ(ε)'s own {aggregate['drq_eps_runs_per_game']} runs of these games: IQM {drq['iqm']:.3f} "
                      f"(95% CI {drq['iqm_ci95'][0]:.3f} to {drq['iqm_ci95'][1]:.3f}), mean {drq['mean']:.3f} "
                      f"(95% CI {drq['mean_ci95'][0]:.3f} to {drq['mean_ci95'][1]:.3f}). The probability that a run of "
                      f"tfdqn outscores a run of DrQ(ε) on the same game: {better['probability']:.2f} (95% CI "
                      f"{better['probability_ci95'][0]:.2f} to {better['probability_ci95'][1]:.2f}; 0.5 is a tie). "
                      f"With {runs} of its own runs per game, DrQ(ε) puts on average "
                      f"{np.dot(np.arange(games + 1), aggregate['drq_eps_games_at_or_above']):.2f} of these {games} "
                      f"games at or above its published means, and at least {half} with probability "
                      f"{sum(aggregate['drq_eps_games_at_or_above'][half:]):.2f}."]
        own, coverage = aggregate["drq_eps_own_iqm"], aggregate["iqm_ci95_coverage"]
        lines += ["", f"Like with like: DrQ(ε)'s IQM over these games from {runs} of its runs per game (drawn from its "
                      f"100) lies between {own['band95'][0]:.3f} and {own['band95'][1]:.3f} in 95% of draws (mean "
                      f"{own['mean']:.3f}); tfdqn's {aggregate['iqm']:.3f} is at percentile "
                      f"{own['percentile_of_tfdqn']:.0f} of those draws."
                      + (f" With {runs} runs per game a 95% bootstrap interval of the IQM holds the IQM of DrQ(ε)'s "
                         f"100 runs only {coverage:.0%} of the time (simulated on its own runs), so the intervals "
                         f"above are narrower than the truth." if runs > 1 else
                         " With one run per game the bootstrap intervals above are a point: they say nothing.")]
    return "\n".join(lines) + "\n"


def _check(args) -> None:
    config_lib.parse_set(args.set)  # a malformed --set fails here, before any run
    unknown = [game for game in (args.games or []) + [game for game, _ in sweep.removals(args.remove)]
               if game not in SCORES]
    if unknown:
        raise UserError(f"--games {unknown[0]!r} is not an Atari 100k game; allowed: {', '.join(SCORES)}")
    seeds = args.seeds or SEEDS
    if len(set(seeds)) != len(seeds) or min(seeds) < 0 or args.reps < 1:
        raise UserError(f"--seeds {' '.join(map(str, seeds))} / --reps {args.reps}: allowed: distinct seeds "
                        f">= 0 and reps >= 1")
    require("bench", "this subcommand", ("rliable",))


def _defaults(args, record, suite: str) -> None:
    """`--games` and `--seeds` left out: a report-only look takes those the record holds of the recipe, a run that
    trains `GAMES` and `SEEDS`."""
    held = record.of_recipe(suite, "suite_hash") if args.report_only else []
    if args.games is None:
        args.games = sorted({run["game"] for run in held}) or list(GAMES)
    if args.seeds is None:
        args.seeds = sweep.held_seeds(record, suite, "suite_hash", args.games) if held else list(SEEDS)


def recipe_line(args, suite: str, record) -> str:
    """Which recipe the table is, and what else the record holds (never pooled into it), each other recipe with
    the keys it differs in (an older recipe of the same preset, say, with what the preset has changed since)."""
    overrides = " ".join(f"--set {s}" for s in args.set)
    line = f"Recipe {suite}: `--preset {args.preset}{' ' + overrides if overrides else ''}`."
    ours = recipe(game_config(args, args.games[0], 0), without=SUITE_KEYS)
    others = []
    for other, count in record.other_recipes(suite, "suite_hash").items():
        theirs = record.of_recipe(other, "suite_hash")[0]["config"]
        differences = recipe_differences(ours, theirs, without=SUITE_KEYS)
        others.append(f"{count} of {other} (theirs -> this recipe's: {'; '.join(differences)})")
    if others:
        line += " The record also holds runs of other recipes, reported apart: " + ", ".join(others) + "."
    return line


def report(args, runs: list[dict]) -> tuple[list[dict], dict | None]:
    """Per-game rows, and the aggregates over the seeds every game has finished (the bootstrap needs as many runs
    for every game)."""
    rows = rows_of(args.games, runs)
    complete = [seed for seed in args.seeds if all(any(r["game"] == g and r["seed"] == seed for r in runs)
                                                   for g in args.games)]
    if not complete:
        return rows, None
    normalized = np.array([[human_normalized(r["game"], r["score"]) for g in args.games for r in runs
                            if r["game"] == g and r["seed"] == seed] for seed in complete])
    estimates = interval_estimates(normalized, args.reps)
    return rows, {**estimates, "runs_per_game": len(complete), "seeds": complete,
                  **against_drq_eps(args.games, normalized, args.reps),
                  "drq_eps_own_iqm": own_iqm_spread(args.games, len(complete), estimates["iqm"]),
                  "iqm_ci95_coverage": interval_coverage(args.games, len(complete)),
                  "drq_eps_games_at_or_above": games_at_or_above(
                      [drq_eps_clears_its_mean(game, len(complete)) for game in args.games])}


def _main(args) -> int:
    _check(args)
    where = sweep.placement(args)
    record = sweep.open_record(args, "atari100k")
    suite = recipe_hash(game_config(args, GAMES[0], 0), without=SUITE_KEYS)  # the game is not in it
    _defaults(args, record, suite)
    sweep.apply_removals(record, args.remove, lambda game, seed: recipe_hash(game_config(args, game, seed)))
    entry = lambda run, outcome: {**sweep.run_facts(run, outcome), "preset": args.preset, "set": args.set}  # noqa: E731
    code = sweep.settle(record, plan(args, pathlib.Path(args.logdir)), entry, collect, where, args.report_only,
                        [run["run_seconds"] for run in record.of_recipe(suite, "suite_hash")])
    runs = sorted((run for run in record.of_recipe(suite, "suite_hash") if run["game"] in args.games
                   and run["seed"] in args.seeds), key=lambda run: run["seed"])  # in seed order, not finishing order
    if not runs:
        if code:
            return code
        raise UserError(f"no finished run of recipe {suite} under {args.logdir} or in {args.out}; allowed: run "
                        f"without --report-only")
    rows, aggregate = report(args, runs)
    record.report(suite, {"command": args.command,
                          "machine": machine(), "preset": args.preset, "set": args.set, "games": rows,
                          "aggregate": aggregate, "published_iqm_26_games": PUBLISHED_IQM})
    table = markdown_table(args.preset, rows, aggregate) + "\n" + recipe_line(args, suite, record) + "\n"
    publish_table(table, args.table)
    return code


def main(argv: list[str] | None = None, prog: str = "tfdqn atari100k") -> int:
    return run_benchmark(build_parser, _main, argv, prog)


if __name__ == "__main__":
    sys.exit(main(prog="python -m tfdqn.bench.atari100k"))
