"""Measure the replay's frame codecs on real play: bytes per frame and per transition, the time to add a
transition and to assemble a batch, per game and codec (no TensorFlow).

    python -m tools.bench_replay --games Breakout Pong MsPacman Seaquest --out docs/bench-replay.json \\
        --table docs/bench-replay.md

Each game is played with uniform random actions through the trainer's envs (4 at once) into one ring per
codec, all fed the same steps; a ring holding exactly --transitions slots is full, so its memory over its
slots is the bytes per transition of a full replay of any size (records and references per slot, plus the
frames' codes). Batches are the learner's: 32 transitions, 4-frame stacks, 3-step returns, from one thread.
"""

from __future__ import annotations

import time

import numpy as np

from tfdqn import config as config_lib
from tfdqn.bench.report import command_line, machine, publish
from tfdqn.cli import OneLineErrorParser, number, run_cli
from tfdqn.envs.vector import make_vector_env
from tfdqn.errors import UserError
from tfdqn.replay.frame_codec import CODECS, make_codec
from tfdqn.replay.ring import ReplayRing
from tools.random_play import RandomPlay

BATCH, N_STEP = 32, 3


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.bench_replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", nargs="+", default=["Breakout", "Pong", "MsPacman", "Seaquest"],
                        help="Atari games (names as tfdqn train takes them)")
    parser.add_argument("--transitions", type=number(int), default=20_000, help="slots of each ring, filled")
    parser.add_argument("--batches", type=number(int), default=300, help="batches timed per ring")
    parser.add_argument("--out", required=True, metavar="FILE.json", help="results JSON")
    parser.add_argument("--table", metavar="FILE.md", help="also write the Markdown table here")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def measure_game(game: str, transitions: int, batches: int) -> list[dict]:
    """One row per codec: what `transitions` steps of random play cost in a ring of that many slots."""
    config = config_lib.resolve_config([], {"env.id": game, "run.num_envs": 4})
    vector, spec = make_vector_env(config.env, 4, seed=0)
    rings = {codec: ReplayRing(transitions, spec.frame_shape, spec.frame_dtype, spec.stack_size, num_streams=4,
                               seed=0, n_step=N_STEP, gamma=0.99, compression=codec) for codec in CODECS}
    add_seconds = dict.fromkeys(CODECS, 0.0)
    play = RandomPlay(vector, spec.num_actions, seed=0)
    kept = []  # every 10th frame, for the per-frame codec figures
    try:
        while min(ring.filled for ring in rings.values()) < transitions:
            first = play.played % 40 == 0
            frames, actions, step = play.step()
            if first:
                kept.append(frames[0].copy())
            for codec, ring in rings.items():
                started = time.perf_counter()
                ring.add(frames, actions, step.reward, step.terminated, step.truncated, step.final_frames)
                add_seconds[codec] += time.perf_counter() - started
    finally:
        vector.close()
    played = play.played
    rows = []
    for codec, ring in rings.items():
        rows.append({"game": spec.env_id, "codec": codec, "env_steps": played, **_frame_figures(codec, kept),
                     "bytes_per_transition": round(ring.memory_bytes() / ring.capacity, 1),
                     "add_us_per_transition": round(add_seconds[codec] / played * 1e6, 2),
                     **_batch_figures(ring, batches)})
    raw = rows[0]["bytes_per_transition"]
    for row in rows:
        row["memory_vs_raw"] = round(raw / row["bytes_per_transition"], 2)
    return rows


def _frame_figures(codec: str, frames: list[np.ndarray]) -> dict:
    if codec == "none":
        return {"bytes_per_frame": float(frames[0].nbytes), "encode_us": 0.0, "decode_us": 0.0}
    coder = make_codec(codec, frames[0].nbytes)
    started = time.perf_counter()
    codes = [coder.encode(frame) for frame in frames]
    encoded = time.perf_counter()
    out = np.empty(frames[0].nbytes, np.uint8)
    for code in codes:
        coder.decode_into(code, out)
    decoded = time.perf_counter()
    return {"bytes_per_frame": round(float(np.mean([len(code) for code in codes])), 1),
            "encode_us": round((encoded - started) / len(frames) * 1e6, 2),
            "decode_us": round((decoded - encoded) / len(frames) * 1e6, 2)}


def _batch_figures(ring: ReplayRing, batches: int) -> dict:
    ring.sample(BATCH)  # first call outside the timing
    started = time.perf_counter()
    for _ in range(batches):
        ring.sample(BATCH)
    per_batch = (time.perf_counter() - started) / batches
    return {"batch_ms": round(per_batch * 1e3, 3), "batches_per_sec_one_core": round(1 / per_batch, 1)}


def table(rows: list[dict]) -> str:
    lines = ["| game | codec | bytes per frame | bytes per transition (full ring) | memory vs raw | encode us | "
             "decode us | add us per transition | batch ms (32, stack 4, 3-step) | batches/s, one core |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['game']} | {r['codec']} | {r['bytes_per_frame']:,.0f} | {r['bytes_per_transition']:,.0f} | "
                     f"{r['memory_vs_raw']:.1f}x | {r['encode_us']:.1f} | {r['decode_us']:.1f} | "
                     f"{r['add_us_per_transition']:.1f} | {r['batch_ms']:.2f} | {r['batches_per_sec_one_core']:,.0f} |")
    return "\n".join(lines) + "\n"


def _main(args) -> int:
    if args.transitions < 1000 or args.batches < 1:
        raise UserError(f"--transitions {args.transitions} / --batches {args.batches} is out of range; allowed: "
                        f"--transitions >= 1000 and --batches >= 1")
    rows = [row for game in args.games for row in measure_game(game, args.transitions, args.batches)]
    publish({"command": command_line("python -m tools.bench_replay", None), "machine": machine(), "rows": rows},
            table(rows), args.out, args.table)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(build_parser(), _main, None))
