"""Measure what a checkpoint costs with a full Atari replay: seconds and bytes per save, and the restore.

    python -m tools.checkpoint_cost [--env Breakout] [--capacity 1000000] [--new 250000 10000]
                                    [--compression none zstd] [--dir DIR]

For each codec in --compression (`replay.compression`): fills a ReplayRing to capacity by random play through
the trainer's envs (tools/random_play.py: real frames, so a codec has real work), saves a first (full)
checkpoint with the Nature-CNN agent, then plays each --new count of transitions more and saves again (only
the replay chunks written since the previous save are written, so a save costs time in proportion to the new
data), and restores the last save into a new agent and ring. Compressed chunks are written as the codes the
ring holds, never recoded. Prints a table and JSON. The checkpoint folder is deleted afterwards unless --dir
is given (then one subfolder per codec).
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
import tempfile
import time

from tfdqn.cli import OneLineErrorParser, number, run_cli, start_tensorflow
from tfdqn.config import resolve_config
from tfdqn.replay.frame_codec import CODECS
from tfdqn.errors import UserError
from tools.random_play import RandomPlay


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.checkpoint_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Breakout", help="the game whose frames fill the replay (default Breakout)")
    parser.add_argument("--capacity", type=number(int), default=1_000_000, help="replay transitions")
    parser.add_argument("--compression", nargs="+", default=["none"], metavar="CODEC",
                        help=f"replay.compression values to measure, one after the other: {', '.join(CODECS)}")
    parser.add_argument("--new", type=number(int), nargs="+", default=[250_000, 10_000],
                        help="transitions added before each later save")
    parser.add_argument("--dir", help="checkpoint folder to keep (default: a temporary one, deleted)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args) -> int:
    configs = [resolve_config([], {"env.id": args.env, "replay.capacity": args.capacity, "replay.compression": codec,
                                   "run.num_envs": 8}) for codec in args.compression]
    if min(args.new) < 1:
        raise UserError(f"--new {args.new} must list positive counts; allowed: e.g. --new 250000 10000")
    start_tensorflow()
    rows = []
    for config in configs:
        rows += measure(config, args.new, pathlib.Path(args.dir) / config.replay.compression if args.dir else None)
    print("| codec | save | new transitions | seconds | bytes written |\n|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['compression']} | {row['save']} | {row['new_transitions']:,} | {row['seconds']:.2f} | "
              f"{row['bytes']:,} |")
    print(json.dumps({"env": args.env, "replay_capacity": args.capacity, "saves": rows}))
    return 0


def measure(config, new: list[int], keep: pathlib.Path | None) -> list[dict]:
    """The saves and the restore of one codec's full replay."""
    from tfdqn.agent.agent import make_agent
    from tfdqn.envs.vector import make_vector_env
    from tfdqn.replay.ring import ReplayRing
    from tfdqn.run.checkpoint import Checkpointer

    vector, spec = make_vector_env(config.env, config.run.num_envs, seed=0)

    def ring():
        return ReplayRing(config.replay.capacity, spec.frame_shape, spec.frame_dtype, spec.stack_size,
                          num_streams=config.run.num_envs, seed=0, compression=config.replay.compression)

    def agent():
        return make_agent(config, (spec.stack_size, *spec.frame_shape), spec.frame_dtype, spec.num_actions)

    folder = keep or pathlib.Path(tempfile.mkdtemp(prefix="tfdqn-ckpt-"))
    folder.mkdir(parents=True, exist_ok=True)
    codec = config.replay.compression
    try:
        replay, play = ring(), RandomPlay(vector, spec.num_actions, seed=0)
        checkpointer = Checkpointer(folder, agent(), replay)
        started = time.perf_counter()
        play.fill(replay, config.replay.capacity)
        rows = [{"compression": codec, "save": "first (full replay)", "new_transitions": config.replay.capacity,
                 "fill_seconds": round(time.perf_counter() - started, 1), "replay_memory_bytes": replay.memory_bytes(),
                 **checkpointer.save(play.played, {})}]
        for count in new:
            play.fill(replay, count)
            rows.append({"compression": codec, "save": "incremental", "new_transitions": count,
                         **checkpointer.save(play.played, {})})
        held = replay.held
        del replay, checkpointer
        restored = ring()
        started = time.perf_counter()
        Checkpointer(folder, agent(), restored).restore_latest()
        if restored.held != held:
            raise RuntimeError(f"the restored ring holds {restored.held} transitions, the saved one {held}")
        rows.append({"compression": codec, "save": "restore (the last save)", "new_transitions": 0,
                     "seconds": time.perf_counter() - started, "bytes": sum(p.stat().st_size for p in folder.iterdir()),
                     "replay_memory_bytes": restored.memory_bytes()})
    finally:
        vector.close()
        if keep is None:
            shutil.rmtree(folder)
    return rows


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
