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

Each game-seed is one `python -m tfdqn.train` run (seeds in the outer loop, so every game gets a seed
early); a finished one is read, not rerun, and a killed one resumes from its checkpoint. `--report-only`
reports the finished runs without training.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from tfdqn import config as config_lib  # noqa: E402
from tfdqn.atari100k_scores import DER, DRQ_EPS, PUBLISHED_IQM, SCORES, human_normalized  # noqa: E402
from tfdqn.cli import OneLineErrorParser, number, run_cli  # noqa: E402
from tfdqn.errors import UserError  # noqa: E402
from tfdqn.presets import PRESETS  # noqa: E402
from tools.aggregate import interval_estimates  # noqa: E402
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


def game_rows(scores: dict[str, list[float]]) -> list[dict]:
    """Per game: the runs' scores, their mean, its human-normalised score and the published means."""
    rows = []
    for game, runs in scores.items():
        mean = float(np.mean(runs))
        published = SCORES[game]
        rows.append({"game": game, "scores": runs, "mean": mean, "human_normalized": human_normalized(game, mean),
                     "der": published[DER], "drq_eps": published[DRQ_EPS],
                     "at_or_above_drq_eps": mean >= published[DRQ_EPS]})
    return rows


def markdown_table(preset: str, rows: list[dict], aggregate: dict | None) -> str:
    lines = [f"| game | runs | tfdqn `--preset {preset}`: mean (each run) | human-normalised | DER | DrQ(ε) | "
             "at or above DrQ(ε) |", "|---|---:|---|---:|---:|---:|---|"]
    for r in rows:
        each = ", ".join(f"{s:.1f}" for s in r["scores"])
        lines.append(f"| {r['game']} | {len(r['scores'])} | {r['mean']:.1f} ({each}) | {r['human_normalized']:.3f} | "
                     f"{r['der']:g} | {r['drq_eps']:g} | {'yes' if r['at_or_above_drq_eps'] else 'no'} |")
    if aggregate:
        games, runs = len(rows), aggregate["runs_per_game"]
        lines += ["", f"Over these {games} game{'s' * (games != 1)}, {runs} run{'s' * (runs != 1)} each: IQM "
                      f"{aggregate['iqm']:.3f} (95% CI {aggregate['iqm_ci95'][0]:.3f} to {aggregate['iqm_ci95'][1]:.3f}), "
                      f"mean {aggregate['mean']:.3f} (95% CI {aggregate['mean_ci95'][0]:.3f} to "
                      f"{aggregate['mean_ci95'][1]:.3f}); published IQM over all 26 games: "
                      + ", ".join(f"{name} {value}" for name, value in PUBLISHED_IQM.items()) + "."]
    return "\n".join(lines) + "\n"


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
    for seed in args.seeds:
        for game in args.games:
            if args.report_only:
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
        aggregate = {**interval_estimates(normalized, args.reps), "runs_per_game": len(complete), "seeds": complete}
    results = {"command": command_line("atari100k.py"), "machine": machine(), "preset": args.preset, "set": args.set,
               "runs": runs, "games": rows, "aggregate": aggregate, "published_iqm_26_games": PUBLISHED_IQM}
    publish(results, markdown_table(args.preset, rows, aggregate), args.out, args.table)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
