"""Command line: `python -m tfdqn.evaluate RUN_DIR|POLICY_DIR [--checkpoint latest|best|STEP] [--episodes N]
[--epsilon E] [--video FILE.mp4] [--import MODULE]`."""

from __future__ import annotations

import argparse
import json
import sys

from tfdqn import config as config_lib
from tfdqn.cli import OneLineErrorParser, add_import_option, import_modules, number, run_cli, start_tensorflow
from tfdqn.envs.names import resolve_env_id
from tfdqn.errors import UserError
from tfdqn.policy.locate import locate_network


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog=prog or "python -m tfdqn.evaluate",
                                description="Evaluate a checkpoint of a run (the newest complete one unless "
                                            "--checkpoint says otherwise) or an exported policy folder.")
    parser.add_argument("run_dir", metavar="RUN_DIR|POLICY_DIR",
                        help="a run folder written by tfdqn.train, or a policy folder written by tfdqn.export "
                             "(its env is the one in its config.yaml)")
    parser.add_argument("--checkpoint", metavar="latest|best|STEP",
                        help="a run's checkpoint: the newest complete one (default), the one with the best periodic "
                             "evaluation return, or the one saved at env step STEP")
    parser.add_argument("--episodes", type=number(int), default=10, metavar="N", help="whole games to play (default 10)")
    parser.add_argument("--epsilon", type=number(float), metavar="E",
                        help="random-action probability (default: the run's exploration.eval_epsilon)")
    parser.add_argument("--seed", type=number(int), default=12345, metavar="S", help="seed of the evaluation env and actor")
    parser.add_argument("--video", metavar="FILE.mp4", help="record the first episode to this MP4 file")
    add_import_option(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args: argparse.Namespace) -> int:
    location = locate_network(args.run_dir, args.checkpoint)
    if args.episodes < 1:
        raise UserError(f"--episodes {args.episodes} is out of range; allowed: an integer >= 1")
    if args.epsilon is not None and not 0.0 <= args.epsilon <= 1.0:
        raise UserError(f"--epsilon {args.epsilon} is out of range; allowed: a probability in [0, 1]")
    if args.video and not args.video.endswith(".mp4"):
        raise UserError(f"--video {args.video!r} is not an .mp4 path; allowed: FILE.mp4")
    import_modules(args)
    config = config_lib.build_config([location.config_file], {"run.seed": args.seed})  # its errors before TensorFlow
    resolve_env_id(config.env.id)  # and an env no module registered (one --import would)

    start_tensorflow()
    from tfdqn.policy.evaluation import evaluate_network

    evaluation = evaluate_network(location, config, args.episodes, args.epsilon, args.video)
    print(evaluation.protocol)
    print(json.dumps(evaluation.report))
    return 0


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`prog` (e.g. "tfdqn evaluate") names the command in its help and errors; default: python -m tfdqn.evaluate."""
    return run_cli(build_parser(prog), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
