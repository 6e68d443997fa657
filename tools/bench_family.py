"""The DQN family's costs, measured side by side for tools/bench.py (which prints and saves them).

    python -m tools.bench_family --out docs/bench-family.json --table docs/bench-family.md

times the first on its own (tools/bench.py times all three among its other figures).

- `family_update_figures`: one batch-32 Nature-CNN update (Breakout's frames, the atari.yaml config) for
  the plain head, dueling, noisy, C51, QR-DQN, DrQ(epsilon)'s augmentation, the Rainbow preset, Munchausen's
  target, the IMPALA network in place of the Nature CNN, IQN and M-IQN, timed in interleaved rounds, with
  each one's FLOPs, roofline share and cost against the plain update.
- `prioritized_figures`: prioritized sampling plus the priority update of a batch of 32 at 1,000,000
  slots: the NumPy tree (`PrioritizedSampler`), the in-graph tree (`GraphPrioritizedSampler`, one
  tf.function) and the per-sample Python trees most DQN code uses (`peer_sum_tree`).
- `device_replay_figures`: the device ring's replay-fed update (batches drawn in the update graph),
  uniform and prioritized, on a Breakout-shaped ring.
"""

from __future__ import annotations

import statistics
import sys

import numpy as np

from tfdqn.bench.report import command_line, machine, publish
from tfdqn.cli import OneLineErrorParser, number, run_cli, start_tensorflow
from tools.bench_timing import calls_per_second, matmul_peak_flops
from tools.peer_sum_tree import PythonPrioritizedSampler

FAMILY = {  # variant -> (config overrides on atari.yaml, preset)
    "plain": ({}, None), "dueling": ({"network.dueling": True}, None), "noisy": ({"network.noisy": True}, None),
    "c51": ({"learner.loss": "categorical"}, None), "qr": ({"learner.loss": "quantile"}, None),
    "augmented": ({"learner.augment_pad": 4, "learner.augment_intensity": 0.05}, None), "rainbow": ({}, "rainbow"),
    "munchausen": ({"learner.munchausen": True}, None), "impala": ({"network.kind": "impala"}, None),
    "iqn": ({"learner.loss": "implicit_quantile"}, None),
    "m_iqn": ({"learner.loss": "implicit_quantile", "learner.munchausen": True}, None)}
ROUNDS = 3
PER_CAPACITY, PER_BATCH = 1_000_000, 32


def family_update_figures(seconds: float) -> dict:
    """`family_update_ms_<variant>`, `family_update_cost_<variant>` (against plain) and
    `family_update_roofline_<variant>` (of `peak_flops`, measured by the caller: filled in there)."""
    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent
    from tfdqn.telemetry.flops import update_flops

    rng = np.random.default_rng(0)
    frames = lambda: rng.integers(0, 256, (PER_BATCH, 4, 84, 84), dtype=np.uint8)  # noqa: E731
    batch = (frames(), rng.integers(0, 4, PER_BATCH).astype(np.int32), rng.normal(size=PER_BATCH).astype(np.float32),
             np.ones(PER_BATCH, np.float32), frames(), np.ones(PER_BATCH, np.float32))
    agents = {}
    for name, (overrides, preset) in FAMILY.items():
        config = config_lib.resolve_config([], {"env.id": "Breakout", **overrides}, preset)
        agents[name] = (config, make_agent(config, (4, 84, 84), np.uint8, 4))
    rates = {name: [] for name in FAMILY}
    for _ in range(ROUNDS):  # interleaved, so drift in the machine's speed spreads over every variant
        for name, (_, agent) in agents.items():
            rates[name].append(calls_per_second(lambda: agent.learner.update(*batch)["td_loss"].numpy(),
                                                seconds / ROUNDS))
    figures = {}
    for name, (config, agent) in agents.items():
        rate = statistics.median(rates[name])
        figures[f"family_update_ms_{name}"] = 1000 / rate
        l = config.learner  # noqa: E741
        fractions = (l.num_tau_samples, l.num_tau_prime_samples) if l.loss == "implicit_quantile" else (None, None)
        figures[f"family_update_flops_{name}"] = update_flops(agent.online, PER_BATCH, l.double_dqn, fractions,
                                                              reads_target_now=l.munchausen)
        figures[f"family_updates_per_sec_{name}"] = rate
    for name in FAMILY:
        figures[f"family_update_cost_{name}"] = figures[f"family_update_ms_{name}"] / figures["family_update_ms_plain"]
    return figures


def prioritized_figures(seconds: float) -> dict:
    """Milliseconds per prioritized draw of 32 with its importance weights and priority update, at 1M slots."""
    import tensorflow as tf

    from tfdqn.replay.graph_samplers import GraphPrioritizedSampler
    from tfdqn.replay.samplers import PrioritizedSampler
    from tfdqn.replay.sum_tree import build_tree, tree_size

    rng = np.random.default_rng(0)
    leaves = rng.exponential(size=PER_CAPACITY)
    losses = rng.exponential(size=PER_BATCH)

    class Slots:  # what a sampler reads of its ring: the capacity
        capacity = PER_CAPACITY

    host = PrioritizedSampler(0.5, 1e-6)
    host.attach(Slots())
    host.tree.load_leaves(leaves)

    def host_step():
        indices = host.draw(PER_BATCH, PER_BATCH, rng)
        host.weights(indices[None], 0.4)
        host.update(indices, losses)

    graph = GraphPrioritizedSampler(0.5, 1e-6)
    graph.attach(Slots())
    graph.tree.load_leaves(leaves)
    generator = tf.random.Generator.from_seed(0)
    graph_losses = tf.constant(losses, tf.float32)

    @tf.function(autograph=False)
    def graph_step():
        slots = graph.draw_in_graph(PER_BATCH, generator)
        weights = graph.weights_in_graph(slots, 0.4)
        with tf.control_dependencies([weights]):
            return graph.write_in_graph(slots, graph_losses)

    peer = PythonPrioritizedSampler(PER_CAPACITY, 0.5)
    peer.sums.values[:] = build_tree(leaves, tree_size(PER_CAPACITY), np.float64)[1:].astype(np.float32)
    peer.mins.values[peer.mins.size - 1:][:PER_CAPACITY] = leaves  # the peer's setup, not timed

    def peer_step():
        indices, _ = peer.sample(PER_BATCH, 0.4)
        peer.update(indices, losses)

    figures = {"per_ms_numpy_tree": 1000 / calls_per_second(host_step, seconds),
               "per_ms_graph_tree": 1000 / calls_per_second(lambda: graph_step().numpy(), seconds),
               "per_ms_python_tree": 1000 / calls_per_second(peer_step, seconds)}
    figures["per_speedup_numpy_over_python"] = figures["per_ms_python_tree"] / figures["per_ms_numpy_tree"]
    return figures


def device_replay_figures(seconds: float, capacity: int = 20_000, k: int = 4) -> dict:
    """Updates/s of the device ring's replay-fed update (k per call), uniform and prioritized, side by side."""
    import tensorflow as tf

    from tfdqn import config as config_lib
    from tfdqn.agent.agent import make_agent
    from tfdqn.replay.device import DeviceReplay
    from tfdqn.replay.samplers import make_sampler

    rng = np.random.default_rng(0)
    updates = {}
    for sampler in ("uniform", "prioritized"):
        config = config_lib.resolve_config([], {"env.id": "Breakout", "replay.device": "accelerator",
                                                "replay.sampler": sampler})
        agent = make_agent(config, (4, 84, 84), np.uint8, 4)
        ring = DeviceReplay(capacity, (84, 84), np.uint8, 4, num_streams=8, seed=0,
                            sampler=make_sampler(config.replay, in_graph=True))
        for _ in range(capacity // 8):
            ring.add(rng.integers(0, 256, (8, 84, 84), dtype=np.uint8), rng.integers(0, 4, 8), np.ones(8, np.float32),
                     rng.random(8) < 0.01, np.zeros(8, bool), rng.integers(0, 256, (8, 84, 84), dtype=np.uint8))
        ring.flush()
        write = ring.sampler.write_in_graph if ring.sampler.prioritized else None
        update = agent.learner.make_replay_update(lambda: ring.sample_in_graph(PER_BATCH, 0.4), PER_BATCH, write)
        updates[sampler] = lambda update=update: update(tf.constant(k, tf.int32))["td_loss"].numpy()
    rates = {name: [] for name in updates}
    for _ in range(ROUNDS):
        for name, call in updates.items():
            rates[name].append(k * calls_per_second(call, seconds / ROUNDS))
    figures = {f"device_updates_per_sec_{name}": statistics.median(rates[name]) for name in rates}
    figures["device_prioritized_over_uniform"] = (figures["device_updates_per_sec_prioritized"]
                                                  / figures["device_updates_per_sec_uniform"])
    return figures


TITLES = {"plain": "plain (Nature DQN, double DQN, Huber)", "dueling": "dueling", "noisy": "noisy nets",
          "c51": "C51 (51 atoms)", "qr": "QR-DQN (200 quantiles)", "augmented": "DrQ augmentation (shift 4, intensity 0.05)",
          "rainbow": "Rainbow (C51, noisy, dueling, importance weights)", "munchausen": "Munchausen target (M-DQN)",
          "impala": "IMPALA network (in place of the Nature CNN)",
          "iqn": "IQN (N = N' = 64, K = 32, 64 cosines)", "m_iqn": "M-IQN (IQN with Munchausen's target)"}


def family_table(figures: dict) -> str:
    lines = ["| update | ms | against plain | roofline share |", "|---|---:|---:|---:|"]
    for name in FAMILY:
        lines.append(f"| {TITLES[name]} | {figures[f'family_update_ms_{name}']:.1f} | "
                     f"{figures[f'family_update_cost_{name}']:.2f} | {figures[f'family_update_roofline_{name}']:.2f} |")
    return "\n".join(lines) + "\n"


def build_parser() -> OneLineErrorParser:
    parser = OneLineErrorParser(prog="python -m tools.bench_family", description="The DQN family's update costs, "
                                "side by side (tools/bench.py's family figures on their own).")
    parser.add_argument("--seconds", type=number(float), default=1.0, help="timed seconds per variant (default 1, as "
                        "tools/bench.py --quick)")
    parser.add_argument("--out", required=True, metavar="FILE.json")
    parser.add_argument("--table", metavar="FILE.md", help="also write the Markdown table here")
    return parser


def _main(args) -> int:
    start_tensorflow()
    figures = {"peak_flops": matmul_peak_flops(args.seconds)}
    figures.update(family_update_figures(args.seconds * len(FAMILY) / 2))
    for name in FAMILY:
        figures[f"family_update_roofline_{name}"] = (figures[f"family_updates_per_sec_{name}"]
                                                     * figures[f"family_update_flops_{name}"] / figures["peak_flops"])
    publish({"command": command_line("python -m tools.bench_family", None), "machine": machine(), **figures},
            family_table(figures), args.out, args.table)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(build_parser(), _main, None))
