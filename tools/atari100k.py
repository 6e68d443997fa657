"""Atari 100k: train each game and seed for 100,000 agent steps with a preset, then score it as the field does.

    python tools/atari100k.py --preset drq_eps --games Alien Breakout Krull Pong --seeds 0 1 \\
        --out docs/atari100k-drq_eps.json --table docs/atari100k-drq_eps.md

The protocol is the preset's (`der` and `drq_eps` carry Dopamine's labs/atari_100k settings): no sticky
actions, a lost life terminal for learning only, no-op starts, games capped at 27,000 agent steps,
rewards clipped for learning, and a run's score the mean of 100 evaluation episodes at epsilon 0.001
played after training, side by side on vector envs. Scores are human-normalised and aggregated as the
interquartile mean (IQM) and the mean, with 95% stratified-bootstrap confidence intervals (rliable,
Agarwal et al. 2021), beside the published per-game means of DER and DrQ(epsilon)
(`tfdqn.atari100k_scores`).

A per-game mean of a few runs against DrQ(epsilon)'s mean of 100 is a coin flip even for DrQ(epsilon) itself,
so the report also compares like with like, from DrQ(epsilon)'s 100 published runs per game: each run's
percentile among them, DrQ(epsilon)'s IQM over the same games, the probability that a run of tfdqn outscores
a run of DrQ(epsilon) on the same game (rliable's probability of improvement), and how often DrQ(epsilon)'s own
runs, as many per game, put a game's mean at or above its published mean.

Each game-seed is one `python -m tfdqn.train` run (seeds in the outer loop, so every game gets a seed
early); a finished one is read, not rerun, and a killed one resumes from its checkpoint. The results JSON
(`--out`) is the record: a game-seed it holds for the same preset and `--set` is kept and not rerun, even
where its run folder is gone (a new machine, a cleaned `runs/`). `--report-only` reports the finished runs
without training.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from tfdqn import config as config_lib  # noqa: E402
from tfdqn.atari100k_scores import (DER, PUBLISHED_IQM, SCORES, drq_eps_mean, drq_eps_percentile,  # noqa: E402
                                    drq_eps_runs, human_normalized)
from tfdqn.cli import OneLineErrorParser, number, run_cli  # noqa: E402
from tfdqn.errors import UserError  # noqa: E402
from tfdqn.presets import PRESETS  # noqa: E402
from tools.aggregate import improvement_probability, interval_estimates  # noqa: E402
from tools.report import command_line, machine, publish  # noqa: E402
from tools.training_runs import finished, train_or_resume  # noqa: E402


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python tools/atari100k.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS), help="the recipe (der, drq_eps)")
    parser.add_argument("--games", nargs="+", default=["Alien", "Breakout", "Krull", "Pong"],
                        help=f"Atari 100k games (of {len(SCORES)})")
    parser.add_argument("--seeds", type=number(int), nargs="+", default=[0, 1], help="runs per game")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (leaves the protocol: say so in the report)")
    parser.add_argument("--logdir", default="runs/atari100k", help="where the run folders go")
    parser.add_argument("--out", required=True, metavar="FILE.json", help="results JSON")
    parser.add_argument("--table", metavar="FILE.md", help="also write the Markdown table here")
    parser.add_argument("--reps", type=number(int), default=50_000, help="bootstrap resamples for the intervals")
    parser.add_argument("--report-only", action="store_true", help="report the finished runs; train nothing")
    return parser


CHECKPOINT_EVERY = 10_000  # agent steps: a killed run loses at most this much (the protocol saves only at the end)


def run_name(game: str, preset: str, seed: int) -> str:
    return f"{game}-{preset}-seed{seed}"


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
    return "\n".join(lines) + "\n"


def recorded_runs(out: pathlib.Path, preset: str, overrides: list[str]) -> dict[tuple[str, int], dict]:
    """The runs an earlier report wrote to `out`, by (game, seed); refused where they were made with another
    preset or `--set`, so one results file never mixes recipes (nor is overwritten by another's)."""
    if not out.exists():
        return {}
    try:
        results = json.loads(out.read_text())
        made_with = (results["preset"], sorted(results["set"]))
        runs = {(run["game"], run["seed"]): run for run in results["runs"]}
    except (ValueError, KeyError, TypeError) as error:
        raise UserError(f"--out {out} is not an atari100k.py results file ({error!r}); allowed: one this tool "
                        f"wrote, or a new file") from None
    if made_with != (preset, sorted(overrides)):
        raise UserError(f"--out {out} holds results of --preset {made_with[0]} with --set {made_with[1]}; allowed: "
                        f"the same --preset and --set, or another --out")
    return runs


def _check(args) -> None:
    config_lib.parse_set(args.set)  # a malformed --set fails here, before any run
    unknown = [game for game in args.games if game not in SCORES]
    if unknown:
        raise UserError(f"--games {unknown[0]!r} is not an Atari 100k game; allowed: {', '.join(SCORES)}")
    if len(set(args.seeds)) != len(args.seeds) or min(args.seeds) < 0 or args.reps < 1:
        raise UserError(f"--seeds {' '.join(map(str, args.seeds))} / --reps {args.reps}: allowed: distinct seeds "
                        f">= 0 and reps >= 1")


def _main(args) -> int:
    _check(args)
    logdir = pathlib.Path(args.logdir)
    recorded = recorded_runs(pathlib.Path(args.out), args.preset, args.set)
    for seed in args.seeds:
        for game in args.games:
            if args.report_only or (game, seed) in recorded:
                continue
            arguments = ["--env", game, "--preset", args.preset, "--seed", str(seed),
                         f"--checkpoint-every={CHECKPOINT_EVERY}", *[f"--set={s}" for s in args.set]]
            code = train_or_resume(logdir / run_name(game, args.preset, seed), arguments, f"{game} seed {seed}")
            if code != 0:
                return code
    runs = []
    for game in args.games:
        for seed in args.seeds:
            summary = finished(logdir / run_name(game, args.preset, seed))
            if summary is not None:
                runs.append({"game": game, "seed": seed, "score": summary["final_eval_return_mean"],
                             "episodes": summary["final_eval_episodes"], "env_steps": summary["env_steps"],
                             "run_seconds": summary["run_seconds"],
                             "run_dir": str(logdir / run_name(game, args.preset, seed))})
            elif (game, seed) in recorded:
                runs.append(recorded[game, seed])
    scores = {game: [r["score"] for r in runs if r["game"] == game] for game in args.games}
    scores = {game: values for game, values in scores.items() if values}
    if not scores:
        raise UserError(f"no finished run under {logdir} for --preset {args.preset}; allowed: run without --report-only")
    rows = game_rows(scores)
    # the bootstrap needs as many runs for every game: the seeds every game has finished
    complete = [seed for seed in args.seeds if all(any(r["game"] == g and r["seed"] == seed for r in runs)
                                                   for g in args.games)]
    aggregate = None
    if complete:
        normalized = np.array([[human_normalized(r["game"], r["score"]) for g in args.games for r in runs
                                if r["game"] == g and r["seed"] == seed] for seed in complete])
        aggregate = {**interval_estimates(normalized, args.reps), "runs_per_game": len(complete), "seeds": complete,
                     **against_drq_eps(args.games, normalized, args.reps),
                     "drq_eps_games_at_or_above": games_at_or_above(
                         [drq_eps_clears_its_mean(game, len(complete)) for game in args.games])}
    results = {"command": command_line("atari100k.py"), "machine": machine(), "preset": args.preset, "set": args.set,
               "runs": runs, "games": rows, "aggregate": aggregate, "published_iqm_26_games": PUBLISHED_IQM}
    publish(results, markdown_table(args.preset, rows, aggregate), args.out, args.table)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
