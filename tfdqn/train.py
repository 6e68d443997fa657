"""Command line: `python -m tfdqn.train --env CartPole` (see --help for every config key)."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from tfdqn import config as config_lib
from tfdqn.cli import OneLineErrorParser, run_cli, start_tensorflow
from tfdqn.errors import UserError
from tfdqn.run.run_dir import choose_run_dir, load_run_config
from tfdqn.run.signals import exit_code

FLAG_KEYS = {  # dedicated flags and the config key each one sets
    "env": "env.id",
    "total_steps": "run.total_steps",
    "training_interval": "run.training_interval",
    "num_envs": "run.num_envs",
    "learning_starts": "run.learning_starts",
    "seed": "run.seed",
    "checkpoint_every": "run.checkpoint_every",
}


def build_parser() -> argparse.ArgumentParser:
    docs = config_lib.field_docs()
    defaults = config_lib.DQNConfig()
    keys = "\n".join(f"  {key:<36} {doc} (default {_default(defaults, key)})" for key, doc in docs.items())
    parser = OneLineErrorParser(
        prog="python -m tfdqn.train", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train DQN with a compiled actor and learner. Configs: tfdqn/configs/cartpole.yaml for "
                    "vector-observation envs, tfdqn/configs/atari.yaml for ALE games; flags and --set override them.",
        epilog=f"config keys for --set key=value (defaults before any config file):\n{keys}")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue RUN_DIR from its newest complete checkpoint with its saved config "
                             "(only --total-steps may be given with it, to extend the run)")
    parser.add_argument("--env", help=docs["env.id"])
    parser.add_argument("--config", action="append", default=[], metavar="FILE",
                        help="YAML config file; repeatable, later files win (default: chosen from --env)")
    parser.add_argument("--total-steps", type=int, metavar="N", help=docs["run.total_steps"])
    parser.add_argument("--training-interval", type=int, metavar="K", help=docs["run.training_interval"])
    parser.add_argument("--learning-starts", type=int, metavar="N", help=docs["run.learning_starts"])
    parser.add_argument("--num-envs", type=int, metavar="N", help=docs["run.num_envs"])
    parser.add_argument("--seed", type=int, metavar="S", help=docs["run.seed"])
    parser.add_argument("--checkpoint-every", type=int, metavar="N", help=docs["run.checkpoint_every"])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config key (repeatable), e.g. --set learner.learning_rate=1e-4")
    parser.add_argument("--logdir", default="runs", metavar="DIR", help="folder that holds run folders")
    parser.add_argument("--run-name", metavar="NAME", help="run folder name (default: <env>-s<seed>-<time>)")
    parser.add_argument("--profile-steps", metavar="A:B",
                        help="record a TensorFlow profiler trace of env steps A to B into <run>/profile "
                             "(view it in TensorBoard's profile tab: pip install -e \".[profile]\")")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _default(config, key: str):
    section, name = key.split(".")
    return getattr(getattr(config, section), name)


def resolve_config(args: argparse.Namespace) -> config_lib.DQNConfig:
    overrides = config_lib.parse_set(args.set)
    for flag, key in FLAG_KEYS.items():
        if getattr(args, flag) is not None:
            overrides[key] = getattr(args, flag)
    files = [pathlib.Path(f) for f in args.config]
    if not files:
        env_name = overrides.get("env.id") or config_lib.DQNConfig().env.id
        files = [config_lib.default_config_file(str(env_name))]
    config = config_lib.build_config(files, overrides)
    from tfdqn.envs.make import resolve_env_id

    resolve_env_id(config.env.id)
    return config


def parse_profile_steps(text: str | None, total_steps: int) -> tuple[int, int] | None:
    """`A:B` with 1 <= A < B <= total_steps + 1, or a one-line error naming the value."""
    if text is None:
        return None
    first, sep, last = text.partition(":")
    if sep and first.strip().isdigit() and last.strip().isdigit() and 1 <= int(first) < int(last) <= total_steps + 1:
        return int(first), int(last)
    raise UserError(f"--profile-steps {text!r} is not a step range; allowed: A:B with 1 <= A < B <= {total_steps + 1}")


RESUME_FLAGS = {"resume", "total_steps", "quiet", "debug"}


def resume_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[config_lib.DQNConfig, pathlib.Path]:
    """The saved config of RUN_DIR (with an extended --total-steps); any other flag is refused."""
    given = [name for name, value in vars(args).items()
             if name not in RESUME_FLAGS and value != parser.get_default(name)]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise UserError(f"{flag} cannot be used with --resume (the run keeps its saved config); allowed with "
                        f"--resume: --total-steps, --quiet, --debug")
    run_dir = pathlib.Path(args.resume)
    return load_run_config(run_dir, args.total_steps), run_dir


def _main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.resume:
        config, run_dir = resume_config(args, parser)
    else:
        config = resolve_config(args)
    profile_steps = parse_profile_steps(args.profile_steps, config.run.total_steps)
    if not args.resume:
        run_dir = choose_run_dir(args.logdir, args.run_name, config)
    start_tensorflow()
    from tfdqn.run.loop import train  # imports TensorFlow

    summary = train(config, run_dir, quiet=args.quiet, profile_steps=profile_steps, resume=bool(args.resume))
    print(json.dumps({"run_dir": str(run_dir), **{k: v for k, v in summary.items() if k != "final_eval_returns"}}))
    if "stopped_by" in summary:
        print(f"stopped by {summary['stopped_by']} at env step {summary['env_steps']}; checkpoint saved; "
              f"continue with: python -m tfdqn.train --resume {run_dir}", file=sys.stderr)
        return exit_code(summary["stopped_by"])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    return run_cli(parser, lambda args: _main(args, parser), argv)


if __name__ == "__main__":
    sys.exit(main())
