"""Command line: `python -m tfdqn.export RUN_DIR [--checkpoint latest|best|STEP] [--out DIR] [--format litert
[--quantize int8]]`."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from tfdqn.cli import OneLineErrorParser, add_import_option, import_modules, number, run_cli, start_tensorflow
from tfdqn.errors import UserError
from tfdqn.extras import require
from tfdqn.policy.litert import QUANTIZE
from tfdqn.policy.locate import locate_network


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=prog or "python -m tfdqn.export",
        description="Export a checkpoint of a run as a policy folder: a TensorFlow SavedModel (signature "
                    "serving_default: observation -> action, q_values) that loads without tfdqn, the network "
                    "as a .keras file, and the run's config. Every run exports its newest checkpoint to "
                    "RUN_DIR/policy when it ends.")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder written by tfdqn.train")
    parser.add_argument("--checkpoint", default="latest", metavar="latest|best|STEP",
                        help="which checkpoint: the newest complete one (default), the one with the best periodic "
                             "evaluation return, or the one saved at env step STEP")
    parser.add_argument("--out", metavar="DIR",
                        help="policy folder to write or replace (default: RUN_DIR/policy for latest, else "
                             "RUN_DIR/policy-best or RUN_DIR/policy-STEP)")
    parser.add_argument("--format", choices=["savedmodel", "litert"], default="savedmodel",
                        help="savedmodel (default), or litert: also policy.tflite for the LiteRT runtime, with its "
                             "parity against the network in policy.json (needs pip install \"tfdqn[litert]\")")
    parser.add_argument("--quantize", choices=QUANTIZE, default="none",
                        help="with --format litert: int8 also writes policy-int8.tflite, weights and activations "
                             "quantized on observations from play")
    parser.add_argument("--observations", type=number(int), default=1000, metavar="N",
                        help="with --format litert: observations from play the parity is measured on (default 1000)")
    add_import_option(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args: argparse.Namespace) -> int:
    location = locate_network(args.run_dir, args.checkpoint, policies=False)
    if args.format != "litert" and args.quantize != "none":
        raise UserError(f"--quantize {args.quantize} needs --format litert; allowed: --format litert --quantize "
                        f"{args.quantize}, or no --quantize")
    if args.observations < 1:
        raise UserError(f"--observations {args.observations} is out of range; allowed: an integer >= 1")
    if args.format == "litert":
        require("litert", "--format litert", instead="--format savedmodel")
    import_modules(args)
    start_tensorflow()
    from tfdqn.policy.saved_model import export_checkpoint

    litert = (args.quantize, args.observations) if args.format == "litert" else None
    print(json.dumps(export_checkpoint(location, pathlib.Path(args.out) if args.out else None, litert)))
    return 0


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`prog` (e.g. "tfdqn export") names the command in its help and errors; default: python -m tfdqn.export."""
    return run_cli(build_parser(prog), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
