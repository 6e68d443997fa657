"""Screenshot a run's TensorBoard custom-scalars tab, as headless Chromium draws it.

    python -m tools.screenshot_tensorboard RUN_DIR --out docs/tensorboard-layout.png   (from the repository root)

Serves RUN_DIR with TensorBoard on a free local port, opens the tab through Playwright and Debian's
/usr/bin/chromium in a window 1920 pixels wide, waits until the charts are drawn, makes the window as tall as
the tab so that every chart is in the picture, and writes the PNG.
"""

from __future__ import annotations

import pathlib
import sys

from tfdqn.cli import OneLineErrorParser, number, run_cli
from tfdqn.errors import RunFailure, UserError
from tools import tensorboard_view


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.screenshot_tensorboard", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder written by tfdqn.train")
    parser.add_argument("--out", required=True, metavar="FILE.png", help="image to write")
    parser.add_argument("--timeout", type=number(float), default=60.0, metavar="SECONDS",
                        help="longest wait for TensorBoard and the charts (default 60)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args) -> int:
    run_dir = pathlib.Path(args.run_dir)
    if not any(run_dir.glob("events.out.tfevents.*")):
        raise UserError(f"RUN_DIR {str(run_dir)!r} holds no TensorBoard events; allowed: a run folder written by "
                        f"tfdqn.train")
    if not args.timeout > 0:
        raise UserError(f"--timeout {args.timeout:g} is out of range; allowed: a number of seconds > 0")
    reason = tensorboard_view.missing()
    if reason:
        raise UserError(f"{reason}; allowed: a machine with both")
    with tensorboard_view.custom_scalars_page(run_dir, args.timeout) as page:
        if not tensorboard_view.charts(page):
            raise RunFailure(f"{run_dir} has no custom-scalars layout (runs write it at their start)")
        tensorboard_view.show_whole_tab(page)
        page.screenshot(path=args.out)
    print(args.out)
    return 0


def main(argv=None) -> int:
    return run_cli(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
