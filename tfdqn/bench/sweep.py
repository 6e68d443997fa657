"""What the sweeping benchmarks (`tfdqn atari100k`, `tfdqn time-to-score`) share: where their runs go, and the
record that keeps each run as it ends."""

from __future__ import annotations

import argparse
import pathlib

from tfdqn.bench.record import Record
from tfdqn.bench.runkey import check_folder
from tfdqn.bench.runs import Placement, PlannedRun, code_of, finished, run_all, stopped
from tfdqn.cli import number
from tfdqn.errors import UserError

IDENTITY = ("game", "config_hash", "seed")  # a run in a sweep's record


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The record's and the placement's flags, the same on every sweep."""
    parser.add_argument("--remove", action="append", default=[], metavar="GAME:SEED",
                        help="take this run of this recipe out of the record (repeatable); nothing else removes one")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: report the runs the record holds and those whose folders finished, "
                             "writing nothing to the record unless --write-record or --remove asks (--seeds default "
                             "to the seeds it holds of this recipe)")
    parser.add_argument("--write-record", action="store_true",
                        help="with --report-only: also enter the finished folders' runs in the record and store the "
                             "report and its command there (a run that trains always does)")
    parser.add_argument("--cpus-per-run", type=number(float), default=1.0, metavar="N",
                        help="CPUs per run: its TensorFlow thread pools, and as many runs at once as the CPUs allow "
                             "(on a Ray cluster, what each task reserves) (default 1)")
    parser.add_argument("--gpus-per-run", type=number(float), default=0.0, metavar="N",
                        help="GPUs each Ray task reserves (with --ray-address) (default 0)")
    parser.add_argument("--ray-address", metavar="ADDRESS",
                        help="run as Ray tasks on this cluster (auto: the one this machine joined; the ray extra); "
                             "run folders must be reachable where the tasks run")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")


def placement(args: argparse.Namespace) -> Placement:
    chosen = Placement(args.cpus_per_run, args.gpus_per_run, args.ray_address)
    chosen.check()
    return chosen


def removals(texts: list[str]) -> list[tuple[str, int]]:
    """`--remove GAME:SEED` values as (game, seed), or a one-line error."""
    pairs = []
    for text in texts:
        game, _, seed = text.rpartition(":")
        if not game or not seed.isdigit():
            raise UserError(f"--remove {text!r} is not a run; allowed: GAME:SEED, e.g. Pong:0")
        pairs.append((game, int(seed)))
    return pairs


def apply_removals(record: Record, texts: list[str], config_hash_of) -> None:
    """Take the runs `--remove` names (`config_hash_of(game, seed)`: this recipe's) out of the record, the only
    way a run leaves it: all in one write, or none if one is not there."""
    pairs = removals(texts)
    if pairs:
        record.remove([{"game": game, "config_hash": config_hash_of(game, seed), "seed": seed} for game, seed in pairs])
    for game, seed in pairs:
        print(f"removed {game} seed {seed} of this recipe from the record {record.path}")


def open_record(args: argparse.Namespace, tool: str) -> Record:
    """The record `--out` names. A `--report-only` look changes it only where asked: `--write-record`, a
    `--remove` or time-to-score's `--record-stopped`; otherwise what it finds stays in memory."""
    if args.write_record and not args.report_only:
        raise UserError("--write-record without --report-only: a run that trains always writes the record; "
                        "allowed: --report-only --write-record")
    asked = args.write_record or args.remove or getattr(args, "record_stopped", False)
    return Record(pathlib.Path(args.out), tool, IDENTITY, writes=not args.report_only or bool(asked))


def held_seeds(record: Record, recipe: str, field: str = "config_hash", games=None) -> list[int]:
    """The seeds of the record's runs of `recipe` (of `games`, where given): `--report-only`'s default `--seeds`."""
    return sorted({run["seed"] for run in record.of_recipe(recipe, field) if games is None or run["game"] in games})


def settle(record: Record, planned: list[PlannedRun], entry, collect, where: Placement, report_only: bool,
           recorded_seconds: list[float], stopped_too: bool = False) -> int:
    """Bring every planned run into the record: those whose folders finished (and, with `stopped_too`, those a
    signal stopped) as they are, then (unless `report_only`) train or resume the rest, several at once,
    recording each as it ends as `entry(run, outcome)`."""
    todo = [run for run in planned
            if record.get(game=run.game, config_hash=run.key.config_hash, seed=run.key.seed) is None]
    for run in todo:
        check_folder(run.run_dir, run.key)
    ended = [run for run in todo
             if finished(run.run_dir) is not None or (stopped_too and stopped(run.run_dir) is not None)]
    for run in ended:
        read_back = {"starts": [], "stretches": [], "host": None}  # trained before this sweep: its stretches unknown
        record.put(entry(run, {**read_back, **code_of(run.run_dir), **collect(run.run_dir, run.key)}))
    if report_only:
        return 0
    return run_all([run for run in todo if run not in ended], where, collect,
                   lambda run, outcome: record.put(entry(run, outcome)), recorded_seconds)


def run_facts(run: PlannedRun, outcome: dict) -> dict:
    """The record's fields every sweep's run carries: its identity, folder, how it started and where it trained."""
    kept = {name: value for name, value in outcome.items() if name not in ("exit_code", "log")}
    return {"game": run.game, "config_hash": run.key.config_hash, "seed": run.key.seed, "run_dir": str(run.run_dir),
            **kept}
