"""Command line: `python -m tfdqn.tune --env CartPole --param learner.learning_rate=loguniform:1e-4:1e-2
--trials 12 --workers 2`: an Optuna study whose trials are real tfdqn runs (see --help)."""

from __future__ import annotations

import argparse
import math
import pathlib
import subprocess
import sys

from tfdqn import config as config_lib
from tfdqn.cli import OneLineErrorParser, number, run_cli
from tfdqn.config.presets import PRESETS
from tfdqn.errors import RunFailure, UserError
from tfdqn.extras import require
from tfdqn.tuning.parent_death import child_environment
from tfdqn.tuning.search_space import ALLOWED, as_set, parse_params
from tfdqn.tuning.study import GRACE_HEARTBEATS, HEARTBEAT_SECONDS

WORKER_FLAG = "--worker-only"  # a worker that --workers started: it runs trials and leaves the results to its parent


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=prog or "python -m tfdqn.tune",
        description="Tune any config key with an Optuna study (TPE sampler, median pruner). Each trial is a "
                    "python -m tfdqn.train run in its own folder under the study's; its periodic evaluations are "
                    "reported as they land, so weak trials are stopped early. Workers on this machine (--workers) "
                    "or on others (the same --storage and --study) share one study.")
    parser.add_argument("--env", required=True, help="the env every trial trains on (as tfdqn.train's --env)")
    parser.add_argument("--preset", choices=list(PRESETS), metavar="NAME",
                        help=f"a preset under every trial: {', '.join(PRESETS)}")
    parser.add_argument("--config", action="append", default=[], metavar="FILE", help="YAML config file (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a fixed config value")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=DIST", help=f"a tuned key: {ALLOWED}")
    parser.add_argument("--trials", type=number(int), required=True, help="finished trials (complete or pruned) to reach")
    parser.add_argument("--study", help="study name (default: the env id)")
    parser.add_argument("--storage", metavar="URL",
                        help="database URL, e.g. postgresql://user@host/db (default: sqlite:///LOGDIR/STUDY.db)")
    parser.add_argument("--workers", type=number(int), default=1, help="worker processes on this machine")
    parser.add_argument("--total-steps", type=number(int), help="env steps per trial (default: the config's)")
    parser.add_argument("--last-evaluations", type=number(int), default=3,
                        help="score: the mean of a trial's last this many evaluation means (maximised)")
    parser.add_argument("--target", type=number(float),
                        help="score instead: env steps to the first evaluation mean >= TARGET (minimised; the "
                             "trial's run ends there)")
    parser.add_argument("--pruner", choices=("median", "none"), default="median",
                        help="median: stop a trial whose evaluation trails the median of the others' at that step")
    parser.add_argument("--heartbeat", type=number(float), default=HEARTBEAT_SECONDS, metavar="SECONDS",
                        help=f"seconds between a worker's heartbeats; a running trial that missed {GRACE_HEARTBEATS} "
                             f"is marked failed (its worker was killed)")
    parser.add_argument("--logdir", default="runs/tune", metavar="DIR", help="holds STUDY/ (trials, results)")
    parser.add_argument("--track", action="store_true", help="each trial tracked in Weights & Biases (tfdqn.train --track)")
    parser.add_argument("--wandb-project", metavar="NAME", help="the W&B project of the trials")
    parser.add_argument(WORKER_FLAG, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def fixed_settings(args) -> dict:
    """The config keys every trial shares, as `--set` would give them: --set, --total-steps, --target,
    --track and --wandb-project."""
    settings = config_lib.parse_set(args.set)
    settings.update({"run.total_steps": args.total_steps} if args.total_steps is not None else {})
    settings.update({"run.target_return": args.target} if args.target is not None else {})
    settings.update({"tracking.wandb": True} if args.track else {})
    settings.update({"tracking.wandb_project": args.wandb_project} if args.wandb_project else {})
    return settings


def train_arguments(args) -> list[str]:
    """What every trial's `tfdqn.train` gets besides its sampled values."""
    arguments = ["--env", args.env, *[f"--config={path}" for path in args.config]]
    arguments += [f"--preset={args.preset}"] if args.preset else []
    return arguments + [f"--set={as_set(key, value)}" for key, value in fixed_settings(args).items()]


def check(args, params) -> config_lib.DQNConfig:
    """Refuse, before any trial, what would fail every trial: the config at each end of every range,
    resolved as a trial's `tfdqn.train` resolves it."""
    if not 0 < args.heartbeat < math.inf:
        raise UserError(f"--heartbeat {args.heartbeat:g}; allowed: seconds > 0")
    if args.trials < 1 or args.workers < 1 or args.last_evaluations < 1:
        raise UserError(f"--trials {args.trials} / --workers {args.workers} / --last-evaluations "
                        f"{args.last_evaluations}; allowed: integers >= 1")
    if not params:
        raise UserError(f"no --param given; allowed: one or more --param {ALLOWED}")
    if args.target is not None and not math.isfinite(args.target):
        raise UserError(f"--target {args.target} is not a return; allowed: a finite number")

    def resolved(sampled: dict) -> config_lib.DQNConfig:
        overrides = {**fixed_settings(args), **sampled, "env.id": args.env}
        return config_lib.resolve_config(args.config, overrides, args.preset)

    config = resolved({})
    for param in params:
        for value in param.ends():
            resolved(config_lib.parse_set([as_set(param.key, value)]))
    if config.run.eval_every <= 0:
        raise UserError("config key run.eval_every = 0 gives a trial no evaluation to score; allowed: "
                        "--set run.eval_every=N with N >= 1")
    return config


def _spawn_workers(argv: list[str], count: int) -> list[int]:
    """Run `count` worker processes of this same command to their end; their exit codes."""
    children = [subprocess.Popen([sys.executable, "-m", "tfdqn.tune", *argv, WORKER_FLAG], env=child_environment())
                for _ in range(count)]
    return [child.wait() for child in children]


def require_extra(storage: str | None) -> None:
    """Refuse in one line, before any folder or trial is made, where the `tune` extra is not installed: a
    light install (`pip install tfdqn`) has no Optuna."""
    require("tune", "tuning")
    if storage and storage.startswith("postgresql://"):
        require("tune", f"--storage {storage!r}", ("psycopg",))


def _main(args, argv: list[str]) -> int:
    require_extra(args.storage)
    from tfdqn.tuning import results, study as study_lib
    from tfdqn.tuning.trial_run import Objective, TrialRunner

    params = parse_params(args.param)
    config = check(args, params)
    name = args.study or args.env
    folder = pathlib.Path(args.logdir) / name
    objective = Objective(args.last_evaluations, args.target)
    settings = {"env": args.env, "preset": args.preset, "config": args.config, "set": args.set,
                "param": args.param, "total_steps": args.total_steps, "objective": objective.describe(),
                "heartbeat": args.heartbeat}  # a worker beating slower than another's grace would be failed by it
    url = study_lib.storage_url(args.storage, pathlib.Path(args.logdir), name)
    study = study_lib.open_study(name, url, objective.direction, settings, args.trials, args.pruner,
                                 config.run.total_steps, args.heartbeat)
    if args.workers > 1 and not args.worker_only:
        codes = _spawn_workers([a for a in argv if a != WORKER_FLAG], args.workers)
        finished = study_lib.finished_trials(study_lib.counts(study))
        if finished < args.trials:  # a worker that stopped early: the study waits for the command again
            raise RunFailure(f"workers exited with {codes} before study {name!r} had {args.trials} finished trials "
                             f"({finished}); run the same command again to carry the study on")
    else:
        runner = TrialRunner(train_arguments(args), folder, params, objective)
        study_lib.work(study, runner, args.trials, failures_allowed=args.trials)
    if args.worker_only:
        return 0
    table, written = results.write_results(study, folder, objective.describe())
    tally = study_lib.counts(study)
    print(f"study {name!r} ({url}): " + ", ".join(f"{n} {state.lower()}" for state, n in sorted(tally.items())))
    print(table, end="")
    print("results: " + ", ".join(str(path) for path in written))
    return 0


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`prog` (e.g. "tfdqn tune") names the command in its help and errors; default: python -m tfdqn.tune."""
    argv = sys.argv[1:] if argv is None else argv
    return run_cli(build_parser(prog), lambda args: _main(args, argv), argv)


if __name__ == "__main__":
    sys.exit(main())
