"""The update's cost by network and frame size: what the Pong sweep (docs/experiments/atari.md) trades against.

    python -m tools.bench_networks --out docs/bench-networks.json

One batch-32 update (double DQN, n-step targets, Adam; through `update_many` with k = 1, as the trainer calls
it) and one act call for 4 envs, for the Nature CNN on 84x84 and on 42x42 frames and `small_cnn` on 42x42 frames,
each in float32 and mixed bfloat16, and the IMPALA network on 84x84 and 42x42 frames in float32 (and 42x42 in
bfloat16), timed in interleaved rounds (the median of the rounds' best slices, `bench_timing`). `*_xla` variants
compile the update by XLA (`compute.update_jit_compile`, which the generic config sets for its MLP, and which an
image env's CNN turns off by rule), beside the same network without it (96x96: CarRacing's frame side);
`impala_42_qr*` use QR-DQN's loss (the Breakout sweep's T10), `impala_42_iqn8*` IQN's at 8 fractions (T9, now
`--preset iqn_impala_cpu`).
"""

from __future__ import annotations

import statistics
import sys
from typing import NamedTuple

import numpy as np

from tfdqn.bench.report import machine, publish, run_benchmark
from tfdqn.cli import OneLineErrorParser, number, start_tensorflow
from tools.bench_timing import calls_per_second

class Variant(NamedTuple):
    kind: str  # network.kind
    side: int  # frame side
    bf16: bool = False  # mixed bfloat16
    xla: bool = False  # the update compiled by XLA
    loss: str = "huber"  # learner.loss: quantile is QR-DQN's (200 quantiles), the Breakout sweep's T10
    fractions: int = 0  # implicit_quantile: IQN's sampled fractions N = N' and midpoints K (T9: 8)


VARIANTS = {
    "nature_84": Variant("nature_cnn", 84), "nature_84_bf16": Variant("nature_cnn", 84, bf16=True),
    "nature_42": Variant("nature_cnn", 42), "nature_42_bf16": Variant("nature_cnn", 42, bf16=True),
    "small_42": Variant("small_cnn", 42), "small_42_bf16": Variant("small_cnn", 42, bf16=True),
    "impala_84": Variant("impala", 84), "impala_42": Variant("impala", 42),
    "impala_42_bf16": Variant("impala", 42, bf16=True), "impala_42_xla": Variant("impala", 42, xla=True),
    "impala_42_qr": Variant("impala", 42, loss="quantile"),
    "impala_42_qr_bf16": Variant("impala", 42, bf16=True, loss="quantile"),
    "impala_42_qr_xla": Variant("impala", 42, xla=True, loss="quantile"),
    "impala_42_iqn8": Variant("impala", 42, loss="implicit_quantile", fractions=8),
    "impala_42_iqn8_bf16": Variant("impala", 42, bf16=True, loss="implicit_quantile", fractions=8),
    "nature_84_xla": Variant("nature_cnn", 84, xla=True), "nature_96": Variant("nature_cnn", 96),
    "nature_96_xla": Variant("nature_cnn", 96, xla=True)}
BATCH, ENVS, ACTIONS = 32, 4, 6
PROG = "python -m tools.bench_networks"


def build_parser(prog: str = PROG) -> OneLineErrorParser:
    parser = OneLineErrorParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=number(float), default=3.0, help="timed seconds per variant and round")
    parser.add_argument("--rounds", type=number(int), default=3, help="interleaved rounds")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS),
                        help="which networks to time (default: all); nature_84 is always timed, as the reference")
    parser.add_argument("--out", required=True, metavar="FILE.json")
    parser.add_argument("--table", metavar="FILE.md", help="also write the Markdown table here")
    return parser


def fractions(v: Variant) -> dict:
    """IQN's fraction counts for a variant that sets them, as `--preset iqn_impala_cpu` does."""
    keys = ("learner.num_tau_samples", "learner.num_tau_prime_samples", "learner.num_quantile_samples")
    return dict.fromkeys(keys, v.fractions) if v.fractions else {}


def measure(seconds: float, rounds: int, variants: list[str]) -> dict:
    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent

    rng = np.random.default_rng(0)
    calls = {}
    for name in dict.fromkeys(["nature_84", *variants]):
        v = VARIANTS[name]
        side = v.side
        config = config_lib.resolve_config([], {"env.id": "Pong", "network.kind": v.kind, "env.screen_size": side,
                                                "compute.mixed_precision": v.bf16, "compute.update_jit_compile": v.xla,
                                                "learner.loss": v.loss, **fractions(v)}, "atari_cpu")
        agent = make_agent(config, (4, side, side), np.uint8, ACTIONS)
        frames = lambda n: rng.integers(0, 256, (n, 4, side, side), dtype=np.uint8)  # noqa: E731
        batch = (frames(BATCH), rng.integers(0, ACTIONS, BATCH).astype(np.int32),
                 rng.normal(size=BATCH).astype(np.float32), np.ones(BATCH, np.float32), frames(BATCH),
                 np.ones(BATCH, np.float32))
        observation, epsilon = frames(ENVS), np.float32(0.01)
        fused = tuple(column[None] for column in batch)  # one update as the trainer calls it: fused, k = 1
        calls[name] = (lambda a=agent, b=fused: a.learner.update_many(*b)["td_loss"].numpy(),
                       lambda a=agent, o=observation: a.actor.act_with_epsilon(o, epsilon).numpy(),
                       agent.online.count_params())
    rates = {name: ([], []) for name in calls}
    for _ in range(rounds):  # interleaved, so drift in the machine's speed spreads over every variant
        for name, (update, act, _) in calls.items():
            rates[name][0].append(calls_per_second(update, seconds / 2))
            rates[name][1].append(calls_per_second(act, seconds / 2))
    base = 1000 / statistics.median(rates["nature_84"][0])
    return {name: {"update_ms": 1000 / statistics.median(update), "act_ms": 1000 / statistics.median(act),
                   "update_against_nature_84": 1000 / statistics.median(update) / base, "params": calls[name][2]}
            for name, (update, act) in rates.items()}


def markdown_table(figures: dict) -> str:
    lines = ["| network, frames, precision, loss | update (ms, batch 32) | against Nature 84x84 | act (ms, 4 envs) | "
             "parameters |", "|---|---:|---:|---:|---:|"]
    for name, f in figures.items():
        v = VARIANTS[name]
        precision = ("bfloat16" if v.bf16 else "float32") + (", XLA update" if v.xla else "")
        loss = v.loss + (f" ({v.fractions} fractions)" if v.fractions else "")
        lines.append(f"| {v.kind}, {v.side}x{v.side}, {precision}, {loss} | {f['update_ms']:.2f} | "
                     f"{f['update_against_nature_84']:.2f} | {f['act_ms']:.2f} | {f['params']:,} |")
    return "\n".join(lines) + "\n"


def _main(args) -> int:
    start_tensorflow()
    figures = measure(args.seconds, args.rounds, args.variants)
    publish({"command": args.command, "machine": machine(), "figures": figures},
            markdown_table(figures), args.out, args.table)
    return 0


def main(argv: list[str] | None = None) -> int:
    """The bench with `argv` (default: this process's), which its record names as the command that ran it."""
    return run_benchmark(build_parser, _main, argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
