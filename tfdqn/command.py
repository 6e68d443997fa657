"""`tfdqn`: the installed command, one subcommand per job. Each subcommand is its module's `main`, the same one
`python -m tfdqn.train` (and the other `python -m` forms) runs; only the one asked for is imported."""

from __future__ import annotations

import importlib
import shutil
import sys
import textwrap

import tfdqn

# name: (module, one line of help)
SUBCOMMANDS = {
    "train": ("tfdqn.train", "train an agent: --env CartPole, --env Breakout, --preset NAME, --set KEY=VALUE"),
    "evaluate": ("tfdqn.evaluate", "play a run's policy or checkpoint and report its returns (--video to record)"),
    "export": ("tfdqn.export", "export a checkpoint of a run as a SavedModel policy folder"),
    "tune": ("tfdqn.tune", "an Optuna study over config keys, workers on any machine (the tune extra)"),
    "compare": ("tfdqn.bench.compare",
                "training intervals side by side: throughput, where the time goes, utilisation (the bench extra)"),
    "time-to-score": ("tfdqn.bench.time_to_score",
                      "train a game per seed until an evaluation reaches --target; curves and a record"),
    "atari100k": ("tfdqn.bench.atari100k",
                  "the Atari 100k benchmark: runs on these cores or a Ray cluster, scores against DER and DrQ(ε)"),
    "aggregate": ("tfdqn.bench.aggregate", "IQM, median and mean over seeds with bootstrap intervals (the bench extra)"),
}


def usage() -> str:
    width = max(40, min(shutil.get_terminal_size().columns, 120))
    lines = ["usage: tfdqn SUBCOMMAND [--help] ...", "",
             f"tfdqn {tfdqn.__version__}: DQN in TensorFlow 2 with a compiled learner and measured utilisation.", "",
             "subcommands:"]
    for name, (_, text) in SUBCOMMANDS.items():
        lines += textwrap.wrap(text, width, initial_indent=f"  {name:<15}", subsequent_indent=" " * 17)
    lines += ["", "tfdqn SUBCOMMAND --help shows a subcommand's flags; `python -m tfdqn.train` is `tfdqn train`."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        return 0
    if argv[0] == "--version":
        print(f"tfdqn {tfdqn.__version__}")
        return 0
    if argv[0] not in SUBCOMMANDS:
        print(f"tfdqn: error: {argv[0]!r} is not a subcommand; allowed: {', '.join(SUBCOMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[argv[0]][0])
    return module.main(argv[1:], prog=f"tfdqn {argv[0]}")


if __name__ == "__main__":
    sys.exit(main())
