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
from tfdqn.policy.locate import PRODUCT_DIR, locate_network, product_checkpoint


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=prog or "python -m tfdqn.export",
        description="Export a checkpoint of a run as a policy folder: a TensorFlow SavedModel (signature "
                    "serving_default: observation -> action, q_values) that loads without tfdqn, the network "
                    "as a .keras file, and the run's config. A run that ends by itself exports its product (the "
                    "best-evaluated network with periodic evaluation, else the last) to RUN_DIR/policy; this "
                    "command writes that folder again only from the product's own network (to add LiteRT), and "
                    "every other checkpoint beside it.")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder written by tfdqn.train")
    parser.add_argument("--checkpoint", metavar="latest|best|STEP",
                        help="which checkpoint: the newest complete one, the one with the best periodic "
                             "evaluation return, or the one saved at env step STEP (default: the product's)")
    parser.add_argument("--out", metavar="DIR",
                        help="policy folder to write or replace (default: RUN_DIR/policy for the product, else "
                             "RUN_DIR/policy-latest, RUN_DIR/policy-best or RUN_DIR/policy-STEP; never "
                             "RUN_DIR/policy for a --checkpoint)")
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


def _destination(args: argparse.Namespace) -> tuple[str | int, pathlib.Path | None]:
    """(The checkpoint to export, the folder to write or None for its default): the product's network into the
    product's folder where no --checkpoint is given; a --checkpoint never into the product's folder."""
    product = pathlib.Path(args.run_dir) / PRODUCT_DIR
    if args.checkpoint is None:
        locate_network(args.run_dir, "latest", policies=False)  # a run folder at all, before its product
        return product_checkpoint(args.run_dir), pathlib.Path(args.out) if args.out else product
    if args.out and pathlib.Path(args.out).resolve() == product.resolve():
        raise UserError(f"--out {args.out} is the run's product, which only its own network is exported into; "
                        f"allowed: another --out, or no --checkpoint (the product's network)")
    return args.checkpoint, pathlib.Path(args.out) if args.out else None


def _main(args: argparse.Namespace) -> int:
    if args.format != "litert" and args.quantize != "none":
        raise UserError(f"--quantize {args.quantize} needs --format litert; allowed: --format litert --quantize "
                        f"{args.quantize}, or no --quantize")
    if args.observations < 1:
        raise UserError(f"--observations {args.observations} is out of range; allowed: an integer >= 1")
    checkpoint, out = _destination(args)
    location = locate_network(args.run_dir, checkpoint, policies=False)
    if args.format == "litert":
        require("litert", "--format litert", instead="--format savedmodel")
    import_modules(args)
    start_tensorflow()
    from tfdqn.policy.saved_model import export_checkpoint

    litert = (args.quantize, args.observations) if args.format == "litert" else None
    report = export_checkpoint(location, out, litert)
    for line in litert_lines(report.get("litert", {})):
        print(line, file=sys.stderr)
    print(json.dumps(report))
    return 0


AGREEMENT_FLOOR = 0.95  # below this share of greedy actions agreeing with the network, a LiteRT file is flagged


def litert_lines(litert: dict) -> list[str]:
    """One line per LiteRT file on how often its greedy action agrees with the network's, and a warning where
    that is below AGREEMENT_FLOOR: int8 can play far worse than the network, which policy.json alone would hide."""
    lines = []
    for kind in ("float32", "int8"):
        if kind not in litert:
            continue
        file = litert[kind]
        agreement = (f"{file['file']}: its greedy action is the network's on {file['action_agreement']:.1%} of "
                     f"{file['observations']:,} observations from play")
        lines.append(f"warning: {agreement}, below {AGREEMENT_FLOOR:.0%}: its games can score far less than the "
                     f"network's; play it before deploying it, or deploy policy.tflite"
                     if file["action_agreement"] < AGREEMENT_FLOOR else agreement)
    return lines


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`prog` (e.g. "tfdqn export") names the command in its help and errors; default: python -m tfdqn.export."""
    return run_cli(build_parser(prog), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
