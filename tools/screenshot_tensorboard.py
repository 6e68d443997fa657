"""Screenshot a run's TensorBoard custom-scalars tab, as headless Chromium draws it.

    python tools/screenshot_tensorboard.py RUN_DIR --out docs/tensorboard-layout.png

Serves RUN_DIR with TensorBoard on a free local port, opens the tab through Playwright and Debian's
/usr/bin/chromium, waits until every chart has drawn its lines, and writes the PNG.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from tfdqn.cli import OneLineErrorParser, number, run_cli  # noqa: E402
from tfdqn.errors import RunFailure, UserError  # noqa: E402
from tools import tensorboard_view  # noqa: E402


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python tools/screenshot_tensorboard.py", description=__doc__.split("\n\n")[0])
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
        lines = tensorboard_view.chart_lines(page)
        if not lines:
            raise RunFailure(f"{run_dir} has no custom-scalars layout (runs write it at their start)")
        page.screenshot(path=args.out, full_page=True)
    print(args.out)
    return 0


def main(argv=None) -> int:
    return run_cli(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
