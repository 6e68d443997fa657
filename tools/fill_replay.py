"""Fill a replay by random play through the trainer's envs and ring, without TensorFlow: what it holds, the
memory it takes and the process's peak RSS.

    python -m tools.fill_replay --env Breakout --capacity 1000000 --compression zstd [--memory-budget-gib 1.5]

The replay is checked against the memory this process may take (host memory, its cgroup's limit, its
RLIMIT_AS) before anything is filled, as `tfdqn train` checks it, so `prlimit --as=2147483648 python -m
tools.fill_replay ...` shows a 1M Atari replay held under 2 GiB, or the one line that refuses a budget the
limit cannot hold. Prints one JSON line (and writes it to --out).
"""

from __future__ import annotations

import json
import pathlib
import time

from tfdqn import config as config_lib
from tfdqn.atomic import atomic_write
from tfdqn.bench.report import command_line, machine
from tfdqn.cli import OneLineErrorParser, number, run_cli
from tfdqn.envs.vector import make_vector_env
from tfdqn.errors import UserError
from tfdqn.replay.frame_codec import CODECS
from tfdqn.replay.ring import ReplayRing
from tfdqn.run.replay_memory import check_memory, host_memory_left, replay_line
from tools.random_play import RandomPlay


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.fill_replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Breakout", help="env name or id, as tfdqn train takes it")
    parser.add_argument("--capacity", type=number(int), default=1_000_000, help="replay transitions")
    parser.add_argument("--transitions", type=number(int), help="env steps to play (default: --capacity)")
    parser.add_argument("--compression", default="zstd", help=f"the frames' codec: {', '.join(CODECS)}")
    parser.add_argument("--memory-budget-gib", type=number(float), default=0.0,
                        help="replay.memory_budget_gib (0: the default budget)")
    parser.add_argument("--num-envs", type=number(int), default=8, help="envs stepped together")
    parser.add_argument("--seed", type=number(int), default=0, help="env seed and action draws")
    parser.add_argument("--out", metavar="FILE.json", help="also write the JSON line here")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _main(args) -> int:
    config = config_lib.resolve_config([], {
        "env.id": args.env, "replay.capacity": args.capacity, "replay.compression": args.compression,
        "replay.memory_budget_gib": args.memory_budget_gib, "run.num_envs": args.num_envs, "run.seed": args.seed})
    transitions = args.capacity if args.transitions is None else args.transitions
    if transitions < 1:
        raise UserError(f"--transitions {transitions} is out of range; allowed: an integer >= 1")
    left_at_start, where = host_memory_left()
    vector, spec = make_vector_env(config.env, config.run.num_envs, seed=config.run.seed)
    try:
        budget = check_memory(config, spec)
        replay = ReplayRing(config.replay.capacity, spec.frame_shape, spec.frame_dtype, spec.stack_size,
                            num_streams=config.num_streams, seed=config.run.seed, n_step=config.learner.n_step,
                            compression=config.replay.compression, memory_budget=budget)
        print(replay_line(replay), flush=True)
        started, play = time.perf_counter(), RandomPlay(vector, spec.num_actions, args.seed)
        play.fill(replay, transitions)
        report = {"env_steps": play.played, **replay_figures(replay)}
    finally:
        vector.close()
    peak_rss = peak_rss_bytes()
    report.update(command=command_line("python -m tools.fill_replay", None), machine=machine(),
                  memory_left_at_start={"bytes": left_at_start, "what": where}, env_id=spec.env_id,
                  capacity=replay.capacity, compression=replay.compression, memory_budget_bytes=replay.memory_budget,
                  raw_bytes=replay.raw_nbytes, seconds=round(time.perf_counter() - started, 1),
                  peak_rss_bytes=peak_rss)
    line = json.dumps(report)
    if args.out:
        atomic_write(args.out, (line + "\n").encode())
    print(line)
    return 0


def peak_rss_bytes() -> int:
    """This process's peak resident memory since it started (VmHWM). Not getrusage's ru_maxrss: that one
    survives exec, so a child of a larger process reports its parent's peak."""
    status = pathlib.Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) * 1024


def replay_figures(replay: ReplayRing) -> dict:
    """What a filled ring holds and the memory it takes."""
    return {"slots_filled": replay.filled, "slots_held": replay.held,
            "fewest_held": replay.fewest_held, "memory_bytes": replay.memory_bytes(),
            "up_front_bytes": replay.nbytes, "code_bytes_per_slot": round((replay.memory_bytes() - replay.nbytes)
                                                                          / replay.held, 1),
            # exact once the ring is full: its records and references per slot, plus the frames' codes
            "bytes_per_transition_full": round((replay.nbytes + (replay.memory_bytes() - replay.nbytes)
                                                / replay.held * replay.capacity) / replay.capacity, 1)}


if __name__ == "__main__":
    raise SystemExit(run_cli(build_parser(), _main, None))
