"""Act calls/s at batch 1 and 8: tfdqn as its trainer acts and as its actor processes act, beside the JAX
peer and beside tfdqn's own network with noisy layers, each arm in a process of its own and the arms
alternating round by round.

    python -m tools.bench_act [--rounds 3] [--seconds 2] [--batches 1 8] [--pairs tfdqn/jax ...] --out FILE.json
                              [--table FILE.md]

Arms, in the order each round runs them:
  tfdqn           `Actor.act` as the trainer calls it: a NumPy observation in, TensorFlow's default threads
  jax             the JAX peer's act (tools/peer_jax.py), jax's default threads
  tfdqn_one_core  the acting copy an actor process builds, started as one is (`tfdqn.actors.worker`: one
                  intra-op and one inter-op thread), the process pinned to one core
  jax_one_core    the JAX peer's act, the process pinned to the same core
  tfdqn_noisy, tfdqn_noisy_one_core
                  the first and third arms with the noisy layers Rainbow acts with (`network.noisy`)
  tfdqn_noisy_held
                  the first arm's noisy twin holding its acting noise between updates
                  (`network.noise_refresh: update`): its act call reads the noise instead of drawing it
So each tfdqn arm meets a JAX arm under the same limit on threads, and its noisy twins: plain / noisy is
what a noisy call costs in plain calls. Every figure is `calls_per_second`'s best
of five slices of an epsilon-greedy act (epsilon 0.05 for the peer; the Atari schedule's start for tfdqn),
from a new NumPy observation each call, as a training loop hands it. The table gives the median over rounds
and each round's ratio, tfdqn / JAX and plain / noisy, and the JSON every figure. `--pairs` runs only the arms
of the comparisons named (default: every one).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

import numpy as np

from tfdqn.atomic import atomic_write, write_json
from tfdqn.cli import OneLineErrorParser, last_line, number, run_cli
from tfdqn.errors import RunFailure, UserError
from tfdqn.run.provenance import provenance

ARMS = ("tfdqn", "jax", "tfdqn_one_core", "jax_one_core", "tfdqn_noisy", "tfdqn_noisy_one_core", "tfdqn_noisy_held")
PAIRS = (("tfdqn", "jax"), ("tfdqn_one_core", "jax_one_core"),  # (tfdqn arm, the JAX arm with its thread limit)
         ("tfdqn", "tfdqn_noisy"), ("tfdqn_one_core", "tfdqn_noisy_one_core"),  # (plain, noisy): a noisy call's cost
         ("tfdqn", "tfdqn_noisy_held"))
NOISY = {"network.noisy": True}
SETTINGS = {"tfdqn_noisy": NOISY, "tfdqn_noisy_one_core": NOISY,  # each tfdqn arm's config keys beyond atari.yaml
            "tfdqn_noisy_held": {**NOISY, "network.noise_refresh": "update"}}
NUM_ACTIONS = 4  # Breakout's


def _observations(batch: int, count: int = 64) -> list:
    """Distinct uint8 [batch, 4, 84, 84] observations, cycled so that no call is handed its predecessor's."""
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, (batch, 4, 84, 84), dtype=np.uint8) for _ in range(count)]


def _rate(act, batch: int, seconds: float) -> float:
    from tools.bench_timing import calls_per_second

    observations, index = _observations(batch), [0]

    def call():
        index[0] = (index[0] + 1) % len(observations)
        act(observations[index[0]])

    return calls_per_second(call, seconds)


def _tfdqn_act(one_core: bool, settings: dict):
    """The trainer's act, or (`one_core`) the acting copy an actor worker builds after starting TensorFlow
    as one does, of atari.yaml's network with the config keys `settings`."""
    from tfdqn.agent.agent import make_acting_copy, make_agent
    from tools.bench import atari_config

    if one_core:
        from tfdqn.actors.worker import start_tensorflow
        start_tensorflow()
    else:
        from tfdqn.cli import start_tensorflow
        start_tensorflow()
    config = atari_config(**settings)
    if one_core:
        _, actor = make_acting_copy(config, config.exploration, (4, 84, 84), np.uint8, NUM_ACTIONS, seed=0)
    else:
        actor = make_agent(config, (4, 84, 84), np.uint8, NUM_ACTIONS).actor
    return lambda observation: actor.act(observation).numpy()


def _jax_act():
    from tools.peer_jax import JaxDQN

    peer = JaxDQN(NUM_ACTIONS, learning_rate=1e-4, adam_epsilon=1.5e-4, gamma=0.99, max_grad_norm=10.0,
                  target_update_period=2000)
    return lambda observation: peer.act(observation, 0.05)


def run_arm(arm: str, batches: list[int], seconds: float) -> dict:
    """One arm's act calls/s per batch size, in this process (pinned first where the arm says one core)."""
    if arm.endswith("_one_core"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})  # before TensorFlow or jax counts the cores
    act = _jax_act() if arm.startswith("jax") else _tfdqn_act(arm.endswith("_one_core"), SETTINGS.get(arm, {}))
    return {"cores": len(os.sched_getaffinity(0)), **{str(b): _rate(act, b, seconds) for b in batches}}


def _arm_in_child(arm: str, batches: list[int], seconds: float) -> dict:
    command = [sys.executable, "-m", "tools.bench_act", "--arm", arm, "--seconds", str(seconds),
               "--batches", *map(str, batches)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RunFailure(f"arm {arm} failed: {last_line(result.stderr)}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def summarize(rounds: list[dict], batches: list[int], pairs) -> dict:
    """Medians over rounds per arm and batch, and the first arm's calls/s over the second's per pair, batch and
    round."""
    medians = {arm: {str(b): statistics.median(r[arm][str(b)] for r in rounds) for b in batches}
               for arm in rounds[0]}
    ratios = {f"{mine}/{theirs}": {str(b): [r[mine][str(b)] / r[theirs][str(b)] for r in rounds] for b in batches}
              for mine, theirs in pairs}
    return {"medians": medians, "ratios": ratios}


def table(results: dict) -> str:
    batches, summary = results["batches"], results["summary"]
    lines = ["| batch | arm | calls/s | against | calls/s | ratio, median | per round |",
             "|---:|---|---:|---|---:|---:|---|"]
    for b in map(str, batches):
        for pair, per_batch in summary["ratios"].items():
            (mine, theirs), per_round = pair.split("/"), per_batch[b]
            lines.append(f"| {b} | {mine} | {summary['medians'][mine][b]:,.0f} | {theirs} | "
                         f"{summary['medians'][theirs][b]:,.0f} | {statistics.median(per_round):.2f} | "
                         f"{', '.join(f'{x:.2f}' for x in per_round)} |")
    return "\n".join(lines) + "\n"


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.bench_act", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=number(int), default=3, help="rounds of all the arms (default 3)")
    parser.add_argument("--seconds", type=number(float), default=2.0, help="seconds per timing (default 2)")
    parser.add_argument("--batches", type=number(int), nargs="+", default=[1, 8], help="batch sizes (default 1 8)")
    parser.add_argument("--pairs", nargs="+", choices=[f"{mine}/{theirs}" for mine, theirs in PAIRS],
                        metavar="MINE/THEIRS", help="the comparisons to run (default: every one; "
                        f"allowed: {', '.join(f'{mine}/{theirs}' for mine, theirs in PAIRS)})")
    parser.add_argument("--out", help="JSON file of every figure")
    parser.add_argument("--table", help="also write the table to this Markdown file")
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # the child mode: one arm, one JSON line
    return parser


def _check(args) -> None:
    for name, value in (("--rounds", args.rounds), ("--seconds", args.seconds), *(("--batches", b) for b in args.batches)):
        if value <= 0:
            raise UserError(f"{name} {value} is not allowed: it must be above 0")
    if args.arm is None and args.out is None:
        raise UserError("--out FILE.json is required")


def body(args) -> int:
    _check(args)
    if args.arm is not None:
        print(json.dumps(run_arm(args.arm, args.batches, args.seconds)))
        return 0
    pairs = [tuple(pair.split("/")) for pair in args.pairs] if args.pairs else PAIRS
    arms = [arm for arm in ARMS if any(arm in pair for pair in pairs)]
    rounds, load_before = [], os.getloadavg()[0]
    for index in range(args.rounds):
        rounds.append({arm: _arm_in_child(arm, args.batches, args.seconds) for arm in arms})
        print(f"round {index + 1}: " + ", ".join(f"{arm} {rounds[-1][arm][str(args.batches[0])]:,.0f}"
                                                  for arm in arms) + f" calls/s at batch {args.batches[0]}",
              flush=True)
    results = {"code": provenance(), "cores": len(os.sched_getaffinity(0)),
               "load_average_1min": [load_before, os.getloadavg()[0]],  # other work on the machine, before and after
               "batches": args.batches, "seconds": args.seconds, "rounds": rounds,
               "summary": summarize(rounds, args.batches, pairs)}
    write_json(pathlib.Path(args.out), results)
    text = table(results)
    if args.table:
        atomic_write(pathlib.Path(args.table), text)
    print(text, end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(build_parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
