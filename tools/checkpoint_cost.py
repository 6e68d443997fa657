"""Measure what a checkpoint costs with a full Atari replay: seconds and bytes per save.

    python -m tools.checkpoint_cost [--capacity 1000000] [--new 250000 10000] [--dir DIR]

Fills a ReplayRing of 84x84 frames to capacity, saves a first (full) checkpoint with the Nature-CNN
agent, then adds each --new count of transitions and saves again: only the replay chunks written since
the previous save are written, so a save costs time in proportion to the new data. Prints a table and
JSON. The checkpoint folder is deleted afterwards unless --dir is given.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
import tempfile
import time

import numpy as np

from tfdqn.cli import OneLineErrorParser, number, run_cli, start_tensorflow
from tfdqn.config import CONFIG_DIR, build_config
from tfdqn.errors import UserError


def add_transitions(replay, count: int, frames: np.ndarray, start: int) -> None:
    for t in range(start, start + count):
        frame = frames[t % len(frames)][None]
        replay.add(frame, [t % 4], [0.0], [t % 1000 == 999], [False], frame)


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.checkpoint_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacity", type=number(int), default=1_000_000, help="replay transitions")
    parser.add_argument("--new", type=number(int), nargs="+", default=[250_000, 10_000],
                        help="transitions added before each later save")
    parser.add_argument("--dir", help="checkpoint folder to keep (default: a temporary one, deleted)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args) -> int:
    config = build_config([CONFIG_DIR / "atari.yaml"], {"replay.capacity": args.capacity})
    if min(args.new) < 1:
        raise UserError(f"--new {args.new} must list positive counts; allowed: e.g. --new 250000 10000")
    start_tensorflow()
    from tfdqn.agent.agent import make_agent
    from tfdqn.replay.ring import ReplayRing
    from tfdqn.run.checkpoint import Checkpointer

    frames = np.random.default_rng(0).integers(0, 256, (64, 84, 84), dtype=np.uint8)
    replay = ReplayRing(config.replay.capacity, (84, 84), np.uint8, 4)
    agent = make_agent(config, replay.observation_shape, np.uint8, 4)
    folder = pathlib.Path(args.dir or tempfile.mkdtemp(prefix="tfdqn-ckpt-"))
    checkpointer = Checkpointer(folder, agent, replay)
    started = time.perf_counter()
    add_transitions(replay, args.capacity, frames, 0)
    rows = [{"save": "first (full replay)", "new_transitions": args.capacity,
             "fill_seconds": round(time.perf_counter() - started, 1)}]
    rows[0].update(checkpointer.save(args.capacity, {}))
    step = args.capacity
    for count in args.new:
        add_transitions(replay, count, frames, step)
        step += count
        rows.append({"save": "incremental", "new_transitions": count, **checkpointer.save(step, {})})
    if not args.dir:
        shutil.rmtree(folder)
    print(f"replay: {args.capacity:,} transitions, {replay.nbytes:,} bytes")
    print("| save | new transitions | seconds | bytes written |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['save']} | {row['new_transitions']:,} | {row['seconds']:.2f} | {row['bytes']:,} |")
    print(json.dumps({"replay_capacity": args.capacity, "replay_bytes": replay.nbytes, "saves": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
